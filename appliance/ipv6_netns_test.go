package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/internal/keatest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The IPv6 suite runs the appliance in NAT mode with IPv6 left at its
// default (on) behind an ISP that delegates prefixes:
//
//	isp (2001:db8:64::1/64, MTU 1400): kea-dhcp6 delegating /56s, radvd (the WAN's default router), a web server
//	  └─ p1 [box: wan 100.64.0.2/24 | lan 192.168.8.1/24, RAs for the delegation's first /64] p2
//	                                                                                   └─ h1, kernel SLAAC

const v6Config = `{
  "version": 3,
  "mode": "nat",
  "ports": [
    {"name": "wan", "interface": "p1", "role": "wan", "addresses": ["100.64.0.2/24"], "mtu": 1400},
    {"name": "lan", "interface": "p2", "role": "lan", "addresses": ["192.168.8.1/24"]}
  ],
  "nat": {"gateway": "100.64.0.1"},
  "rules": {"rules": [{"iif": "wan", "l4proto": "tcp", "dport": "9000", "action": "accept", "comment": "h1's service"}]},
  "time": {"servers": ["100.64.0.1"]}
}
`

type v6Lab struct {
	*lab
	isp     *netnstest.Namespace
	kea     *keatest.Server
	cfgPath string
	wanLL   netip.Addr
}

func ispKea(pool string) keatest.Config {
	return keatest.Config{Iface: "eth0", Subnet: netip.MustParsePrefix("2001:db8:64::/64"),
		PDPool: netip.MustParsePrefix(pool), DelegatedLen: 56, T1: 3, T2: 5, Preferred: 3600, Valid: 7200,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8:64::53")}}
}

func newV6Lab(t *testing.T) *v6Lab {
	t.Helper()
	requireNetns(t)
	testenv.Require(t, "kea-dhcp6", "radvd", "curl")
	l := &v6Lab{lab: &lab{t: t, dir: t.TempDir()}}
	l.box = netnstest.New(t, "ipv6-b")
	l.isp = netnstest.New(t, "ipv6-i")
	h := netnstest.New(t, "ipv6-h")
	for _, ns := range []*netnstest.Namespace{l.box, l.isp, h} {
		ns.IP(t, "link", "set", "lo", "up")
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	l.isp.Sysctl(t, "net.ipv6.conf.all.forwarding=1")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, MTU: 1400, Up: true},
		netnstest.End{NS: l.isp, Name: "eth0", Off: noOff, MTU: 1400, Addrs: []string{"100.64.0.1/24", "2001:db8:64::1/64"}, Up: true})
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:78:00:00:00:01", Up: true})
	l.hosts = []*netnstest.Namespace{h}
	mac, _ := net.ParseMAC(strings.Fields(l.box.IP(t, "-br", "link", "show", "p1"))[2])
	l.wanLL = dataplane.LinkLocal([6]byte(mac))
	l.kea = keatest.Start(t, l.isp, filepath.Join(l.dir, "kea"), ispKea("2001:db8:6600::/48"))
	keatest.StartRadvd(t, l.isp, "eth0", netip.MustParsePrefix("2001:db8:64::/64"))
	serveHTTP(t, l.isp, "[2001:db8:64::1]:8080")
	serveHTTP(t, h, "[::]:9000")
	serveHTTP(t, h, "[::]:9001")
	l.cfgPath = filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(l.cfgPath, []byte(v6Config), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	return l
}

// delegation waits for the box's lease file to hold a prefix other than
// not, and routes it from the ISP to the box (kea installs no routes).
func (l *v6Lab) delegation(t *testing.T, not netip.Prefix) netip.Prefix {
	t.Helper()
	var got netip.Prefix
	eventually(t, 15*time.Second, "a delegated prefix in the box's lease file", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(l.dir, "dhcp6-lease.json"))
		var f struct {
			Prefixes []struct{ Prefix netip.Prefix }
		}
		if err != nil || json.Unmarshal(b, &f) != nil || len(f.Prefixes) == 0 {
			return false, fmt.Sprintf("%v %s", err, b)
		}
		got = f.Prefixes[0].Prefix
		return got != not, string(b)
	})
	l.isp.IP(t, "-6", "route", "replace", got.String(), "via", l.wanLL.String(), "dev", "eth0")
	return got
}

// slaac waits for h1 to have a preferred address in the first /64 of d.
func (l *v6Lab) slaac(t *testing.T, d netip.Prefix) netip.Addr {
	t.Helper()
	lan := netip.PrefixFrom(d.Addr(), 64)
	want := netip.MustParseAddr(strings.TrimSuffix(lan.Addr().String(), "::") + "::78:ff:fe00:1") // EUI-64 of 02:78:00:00:00:01
	eventually(t, 15*time.Second, "h1's SLAAC address "+want.String(), func() (bool, string) {
		out, _ := l.hosts[0].Output("ip", "-6", "addr", "show", "dev", "eth0", "scope", "global")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, want.String()+"/64") && !strings.Contains(line, "deprecated") && !strings.Contains(line, "tentative") {
				return true, out
			}
		}
		return false, out
	})
	return want
}

// TestIPv6 is the routed IPv6 suite: the default config gets a /56 from
// kea, h1 autoconfigures in its first /64 and reaches the ISP's server
// with its own address, unsolicited inbound is dropped but the allow
// rule's service answers, packet too big comes through the 1400-byte WAN,
// the ISP's renumbering moves h1, and the delegation survives a restart
// with the ISP's DHCPv6 server gone.
func TestIPv6(t *testing.T) {
	l := newV6Lab(t)
	d := l.delegation(t, netip.Prefix{})
	if d.Bits() != 56 || !netip.MustParsePrefix("2001:db8:6600::/48").Contains(d.Addr()) {
		t.Fatalf("delegation %v, want a /56 of kea's pool", d)
	}
	h1 := l.slaac(t, d)
	l.reach(t, h1)
	before, _ := os.ReadFile(filepath.Join(l.dir, "dhcp6-duid"))

	// Inbound: only the allowed service.
	if out, err := l.isp.Output("curl", "-s", "--max-time", "2", "http://["+h1.String()+"]:9001/"); err == nil {
		t.Errorf("the ISP reached h1's unexposed port 9001: %q", out)
	}
	if out, err := l.isp.Output("curl", "-s", "--max-time", "5", "http://["+h1.String()+"]:9000/"); err != nil ||
		!strings.HasPrefix(out, "from [2001:db8:64::1]:") {
		t.Errorf("the ISP to h1's allowed port 9000: %v %q", err, out)
	}

	if st := l.stats(t).IPv6; st == nil || st.Drops["firewall"] == 0 || len(st.LAN) != 1 || st.LAN[0] != netip.PrefixFrom(d.Addr(), 64) || st.Gateway == "" {
		t.Errorf("the snapshot's ipv6 section %+v, want the LAN /64 of %v, a gateway and the firewall's drops", st, d)
	}

	// Packet too big from the box.
	l.hosts[0].Output("ping", "-6", "-c", "1", "-W", "2", "-s", "1452", "-M", "do", "2001:db8:64::1")
	if out := l.mustHost(t, 1, "ip", "-6", "route", "get", "2001:db8:64::1"); !strings.Contains(out, "mtu 1400") {
		t.Errorf("h1's route after a 1500-byte ping: %q, want mtu 1400", out)
	}

	// Renumbering: kea takes the prefix back at the next renewal (T1 3 s).
	l.kea.Reconfigure(ispKea("2001:db8:6700::/48"))
	d2 := l.delegation(t, d)
	h1b := l.slaac(t, d2)
	l.reach(t, h1b)
	if out := l.mustHost(t, 1, "ip", "-6", "addr", "show", "dev", "eth0"); !strings.Contains(out, h1.String()+"/64 scope global deprecated") {
		t.Errorf("h1's old address is not deprecated:\n%s", out)
	}

	// Restart with the ISP's DHCPv6 server gone: the kept delegation is
	// announced and routed again.
	l.kea.Stop()
	l.stop()
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	l.reach(t, h1b)
	if after, _ := os.ReadFile(filepath.Join(l.dir, "dhcp6-duid")); string(after) != string(before) || len(before) == 0 {
		t.Errorf("DUID %q after restart, want the kept %q", after, before)
	}
}

// reach checks that h1 pings and fetches from the ISP's server from addr.
func (l *v6Lab) reach(t *testing.T, addr netip.Addr) {
	t.Helper()
	eventually(t, 10*time.Second, "h1 pings the ISP's server from "+addr.String(), func() (bool, string) {
		out, err := l.host(1, "ping", "-6", "-c", "1", "-W", "1", "-I", addr.String(), "2001:db8:64::1")
		return err == nil, out
	})
	out, err := l.host(1, "curl", "-6", "-s", "--max-time", "5", "--interface", addr.String(), "http://[2001:db8:64::1]:8080/")
	if err != nil || !strings.HasPrefix(out, "from ["+addr.String()+"]:") {
		t.Errorf("h1 curl -6 to the server: %v %q, want it seen from %v", err, out, addr)
	}
}

// serveHTTP answers with the client's address on addr inside ns.
func serveHTTP(t *testing.T, ns *netnstest.Namespace, addr string) {
	t.Helper()
	var ln net.Listener
	var err error
	ns.Do(t, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from %s", r.RemoteAddr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestIPv6FastPath: with the fast path on (the default), h1's pings to
// the ISP's server go through the kernel's fast path once their echo
// connection is established: /api/dataplane's fastPath counts them, and
// holds both directions as IPv6 flows.
func TestIPv6FastPath(t *testing.T) {
	l := newV6Lab(t)
	h1 := l.slaac(t, l.delegation(t, netip.Prefix{}))
	l.reach(t, h1)
	before := l.stats(t).FastPath
	if before == nil || before.Mode == "off" {
		t.Fatalf("the fast path is off: %+v", before)
	}
	const n = 300
	if out, err := l.host(1, "ping", "-6", "-c", fmt.Sprint(n), "-i", "0.005", "-s", "1000", "-I", h1.String(), "2001:db8:64::1"); err != nil ||
		!strings.Contains(out, fmt.Sprintf("%d received", n)) {
		t.Fatalf("h1's %d pings to the ISP's server: %v\n%s", n, err, out)
	}
	after := l.stats(t).FastPath
	if got := after.Packets - before.Packets; got < n {
		t.Errorf("the fast path forwarded %d frames during %d pings and their replies, want most of %d", got, n, 2*n)
	}
	if after.IPv6Flows < 2 {
		t.Errorf("%d IPv6 flows in the fast path after the pings, want the echo's two directions: %+v", after.IPv6Flows, after)
	}
	t.Logf("fast path: %d frames during the pings, %d IPv6 flows, punts %v", after.Packets-before.Packets, after.IPv6Flows, after.Punts)
}
