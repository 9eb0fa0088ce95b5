package dhcp6s

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// informScript records what dhclient -6 -S was told, one line a call
// (ISC dhclient 4.4 calls it with reason RENEW6 after an
// Information-request's Reply).
const informScript = `echo "reason=$reason|dns=$new_dhcp6_name_servers|search=$new_dhcp6_domain_search" >>"$EVENTS"
exit 0
`

// TestNetnsStateless: ISC dhclient's Information-request (dhclient -6 -S)
// gets the DNS server and search domain; a Solicit gets an Advertise with
// NoAddrsAvail; garbage is counted malformed; a burst from one client is
// cut at its bucket; a change of DNS reaches the next client.
func TestNetnsStateless(t *testing.T) {
	testenv.Require(t, "root", "ip", "dhclient")
	srv, cli := netnstest.New(t, "dh6s-s"), netnstest.New(t, "dh6s-c")
	for _, ns := range []*netnstest.Namespace{srv, cli} {
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	netnstest.Veth(t, netnstest.End{NS: srv, Name: "s0", MAC: "02:d6:00:00:00:01", Up: true},
		netnstest.End{NS: cli, Name: "c0", MAC: "02:d6:00:00:00:02", Up: true})
	s, err := New(Config{Interface: "s0", DNS: []netip.Addr{boxDNS}, Domains: []string{"lan"}, ClientRate: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := srv.Go(t, func() {
		if err := s.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wait() })
	netnstest.WaitFor(t, 5*time.Second, "the server's DUID", func() bool { return s.DUID() != nil })
	wantDUID := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0xd6, 0, 0, 0, 1}}
	if !s.DUID().Equal(wantDUID) {
		t.Errorf("DUID %v, want the DUID-LL of s0's MAC %v", s.DUID(), wantDUID)
	}

	netnstest.WaitFor(t, 5*time.Second, "c0's link-local address", func() bool {
		out, _ := cli.Output("ip", "-6", "addr", "show", "dev", "c0", "scope", "link")
		return strings.Contains(out, "fe80::") && !strings.Contains(out, "tentative")
	})
	got := inform(t, cli, t.TempDir())
	if want := "reason=RENEW6|dns=" + boxDNS.String() + "|search=lan."; got != want {
		t.Errorf("dhclient -6 -S was told %q, want %q", got, want)
	}

	// A Solicit, by hand: an Advertise with NoAddrsAvail and no address.
	var adv *dhcpv6.Message
	cli.Do(t, func() {
		sol, err := dhcpv6.NewSolicit(net.HardwareAddr{2, 0xd6, 0, 0, 0, 2})
		if err != nil {
			t.Fatal(err)
		}
		adv = exchange(t, sol.ToBytes())
	})
	if adv == nil || adv.MessageType != dhcpv6.MessageTypeAdvertise || adv.Options.Status() == nil ||
		adv.Options.Status().StatusCode != iana.StatusNoAddrsAvail || len(adv.Options.IANA()) != 0 {
		t.Errorf("the answer to a Solicit: %v, want an Advertise with only NoAddrsAvail", adv)
	}

	// Garbage, then a burst of 30 Information-requests from one address.
	before := s.Stats()
	cli.Do(t, func() {
		send(t, []byte{11, 1})
		ir := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeInformationRequest, TransactionID: xid}
		for range 30 {
			send(t, ir.ToBytes())
		}
	})
	netnstest.WaitFor(t, 5*time.Second, "the garbage and the burst counted", func() bool {
		return s.Stats().Received-before.Received == 31
	})
	time.Sleep(200 * time.Millisecond) // the last answers leave
	after := s.Stats()
	delta := map[string]uint64{
		"malformed":           after.Dropped["malformed"] - before.Dropped["malformed"],
		"rate_client":         after.Dropped["rate_client"] - before.Dropped["rate_client"],
		"information-request": after.Served["information-request"] - before.Served["information-request"],
	}
	// The client's bucket (burst 10) had spent 2 tokens on dhclient and
	// the Solicit (and refills 5 a second while the burst goes out).
	if delta["malformed"] != 1 || delta["rate_client"] < 15 || delta["information-request"] < 5 ||
		delta["rate_client"]+delta["information-request"] != 30 {
		t.Errorf("counted %v for 1 garbage message and 30 requests, want 1 malformed, the burst cut at about 8", delta)
	}

	// New DNS servers reach the next request (once the bucket refilled).
	isp := netip.MustParseAddr("2001:db8:64::53")
	if err := s.SetDNS([]netip.Addr{isp}, []string{"isp.example"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	got = inform(t, cli, t.TempDir())
	if want := "reason=RENEW6|dns=" + isp.String() + "|search=isp.example."; got != want {
		t.Errorf("after SetDNS dhclient was told %q, want %q", got, want)
	}
	if diff := cmp.Diff("", s.Stats().LastError); diff != "" {
		t.Errorf("last error (-want +got):\n%s", diff)
	}
}

// inform runs dhclient -6 -S on c0 until its script has been called and
// returns what it recorded.
func inform(t *testing.T, cli *netnstest.Namespace, dir string) string {
	t.Helper()
	script := filepath.Join(dir, "script")
	conf := filepath.Join(dir, "dhclient.conf")
	head := "#!/bin/sh\nEVENTS=" + filepath.Join(dir, "events") + "\n" // dhclient clears the environment
	if err := os.WriteFile(script, []byte(head+informScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("request dhcp6.name-servers, dhcp6.domain-search;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := cli.Command("dhclient", "-6", "-S", "-d", "-v", "-cf", conf, "-sf", script,
		"-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), "c0")
	out := &netnstest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var line string
	deadline := time.Now().Add(20 * time.Second)
	for line == "" {
		if time.Now().After(deadline) {
			t.Fatalf("dhclient -6 -S: no answer within 20 s; its output:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
		b, _ := os.ReadFile(filepath.Join(dir, "events"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "reason=") {
				line = l
			}
		}
	}
	return line
}

// exchange sends b from c0's port 546 to ff02::1:2 and returns the first
// answer within 3 s (nil without).
func exchange(t *testing.T, b []byte) *dhcpv6.Message {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: dhcpv6.DefaultClientPort})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo(b, &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers, Port: dhcpv6.DefaultServerPort, Zone: "c0"}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 1500)
	n, _, err := c.ReadFrom(buf)
	if err != nil {
		t.Errorf("no answer: %v", err)
		return nil
	}
	m, err := dhcpv6.MessageFromBytes(buf[:n])
	if err != nil {
		t.Errorf("the answer does not parse: %v", err)
		return nil
	}
	return m
}

// send sends b from c0 to ff02::1:2 port 547.
func send(t *testing.T, b []byte) {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo(b, &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers, Port: dhcpv6.DefaultServerPort, Zone: "c0"}); err != nil {
		t.Fatal(err)
	}
}
