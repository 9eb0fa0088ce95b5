package dhcpd

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"e1kbox/internal/dhcptest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The netns tests run the Server on a bridge in one namespace ("the
// router") and real Debian DHCP clients (isc-dhcp-client's dhclient and
// busybox's udhcpc) each in its own namespace, wired to the bridge by a
// veth pair. Nothing leaves the namespaces the tests create.

func requireNetns(t *testing.T) {
	testenv.Require(t, "root", "ip", "ss", "dhclient", "udhcpc")
}

// serve runs s.Serve in the namespace (netnstest's Go: on a thread that
// entered it for good). It returns once port 67 is bound; stop ends Serve
// and waits for it (also at cleanup).
func serve(t *testing.T, ns *netnstest.Namespace, s *Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var err error // Serve's, once ended is closed
	ended := make(chan struct{})
	wait := ns.Go(t, func() {
		defer close(ended)
		err = s.Serve(ctx)
	})
	stop = sync.OnceFunc(func() {
		cancel()
		wait()
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(stop)
	bound := func() bool {
		out, _ := ns.Command("ss", "-Huln", "sport", "=", ":67").Output()
		return len(bytes.TrimSpace(out)) > 0
	}
	netnstest.WaitFor(t, 30*time.Second, "Serve binds port 67", func() bool {
		select {
		case <-ended:
			t.Fatalf("Serve ended at once: %v", err)
		default:
		}
		return bound()
	})
	return stop
}

// testLAN is the router namespace with br0 (10.70.0.1/24) and its clients.
type testLAN struct {
	router  *netnstest.Namespace
	dir     string // scripts, configs, lease and event files
	clients int
}

func newLAN(t *testing.T) *testLAN {
	requireNetns(t)
	l := &testLAN{router: netnstest.New(t, "dhcpd-r"), dir: t.TempDir()}
	l.router.Run(t, "ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	l.router.Run(t, "ip", "addr", "add", "10.70.0.1/24", "dev", "br0")
	l.router.Run(t, "ip", "link", "set", "br0", "up")
	return l
}

// lanClient is a DHCP client in a namespace whose interface c0 (MAC mac)
// is on the LAN's bridge.
type lanClient struct {
	*dhcptest.Client
	ns  *netnstest.Namespace
	mac string
}

func (l *testLAN) client(t *testing.T, mac string) *lanClient {
	t.Helper()
	l.clients++
	ns := netnstest.New(t, "dhcpd-c")
	c := &lanClient{Client: dhcptest.New(t, ns, "c0", fmt.Sprintf("c%d", l.clients), l.dir, false), ns: ns, mac: mac}
	port := fmt.Sprintf("p%d", l.clients)
	c.ns.Run(t, "ip", "link", "add", "c0", "address", mac, "type", "veth", "peer", "name", port, "netns", l.router.Name())
	l.router.Run(t, "ip", "link", "set", port, "master", "br0", "up")
	c.ns.Run(t, "ip", "link", "set", "lo", "up")
	c.ns.Run(t, "ip", "link", "set", "c0", "up")
	// A client's first DISCOVER must not be lost to a link coming up:
	// wait for the carrier and the bridge port forwarding.
	netnstest.WaitFor(t, 30*time.Second, c.Name+": link up and forwarding", func() bool {
		up := strings.Contains(c.ns.Run(t, "ip", "link", "show", "c0"), "state UP")
		return up && strings.Contains(l.router.Run(t, "ip", "-d", "link", "show", port), "state forwarding")
	})
	return c
}

// waitLease waits until the server has a lease for mac in state st and
// returns it.
func waitLease(t *testing.T, s *Server, mac string, st State) Lease {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a loaded machine's clients are slow
	for {
		for _, l := range s.Leases() {
			if l.MAC.String() == mac && l.State == st {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s lease for %s; leases: %v", st, mac, leaseLines(s))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func netnsConfig(t *testing.T) Config {
	return Config{
		Interface: "br0", ServerIP: srvIP, Subnet: lan,
		PoolStart: netip.MustParseAddr("10.70.0.100"), PoolEnd: netip.MustParseAddr("10.70.0.199"),
		LeaseTime: time.Hour, Domain: "home.arpa", NTP: []netip.Addr{srvIP}, MTU: 1400,
		Static:    []Static{{MAC: hw("02:dc:00:00:00:05"), IP: netip.MustParseAddr("10.70.0.50"), Hostname: "printer"}},
		Exclude:   []netip.Addr{netip.MustParseAddr("10.70.0.100")},
		LeaseFile: filepath.Join(t.TempDir(), "leases.json"),
	}
}

// checkOptions checks a client's view of the configured options.
func checkOptions(t *testing.T, who string, ev dhcptest.Event, wantIP string) {
	t.Helper()
	want := dhcptest.Event{"router": "10.70.0.1", "dns": "10.70.0.1", "domain": "home.arpa", "ntp": "10.70.0.1",
		"mtu": "1400", "lease": "3600", "server": "10.70.0.1", "mask": "255.255.255.0"}
	for k, v := range want {
		if ev[k] != v {
			t.Errorf("%s: %s = %q, want %q (event %v)", who, k, ev[k], v, ev)
		}
	}
	if wantIP != "" && ev["ip"] != wantIP {
		t.Errorf("%s: address %s, want %s", who, ev["ip"], wantIP)
	}
	a, err := netip.ParseAddr(ev["ip"])
	if err != nil {
		t.Errorf("%s: address %q: %v", who, ev["ip"], err)
	}
	if wantIP == "" && (a.Less(netip.MustParseAddr("10.70.0.101")) || netip.MustParseAddr("10.70.0.199").Less(a)) {
		t.Errorf("%s: address %v outside the pool 10.70.0.101-199", who, a)
	}
}

// TestNetnsClients: dhclient and udhcpc get addresses from the pool with
// the configured options, a static lease goes to its MAC, and a dhclient -r
// RELEASE frees the address for another client.
func TestNetnsClients(t *testing.T) {
	l := newLAN(t)
	s, err := New(netnsConfig(t), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l.router, s)
	if err := s.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("a second Serve: %v, want an error", err)
	}

	dh := l.client(t, "02:dc:00:00:00:01")
	dh.Dhclient(t)
	ud := l.client(t, "02:dc:00:00:00:02")
	ud.Udhcpc(t)
	st := l.client(t, "02:dc:00:00:00:05")
	st.Udhcpc(t)

	dhEv, _ := dh.WaitEvent(t, 0, "BOUND")
	checkOptions(t, "dhclient", dhEv, "")
	udEv, _ := ud.WaitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc", udEv, "")
	stEv, _ := st.WaitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc with a static lease", stEv, "10.70.0.50")
	if dhEv["ip"] == udEv["ip"] {
		t.Errorf("dhclient and udhcpc both got %s", dhEv["ip"])
	}

	dhLease := waitLease(t, s, dh.mac, StateBound)
	if dhLease.IP.String() != dhEv["ip"] || dhLease.Hostname != "c1-dhclient" {
		t.Errorf("server's lease for dhclient: %+v, client has %s", dhLease, dhEv["ip"])
	}
	if l := waitLease(t, s, ud.mac, StateBound); l.IP.String() != udEv["ip"] || l.Hostname != "c2-udhcpc" || l.ClientID != "0102dc00000002" {
		t.Errorf("server's lease for udhcpc: %+v, client has %s", l, udEv["ip"])
	}
	if l := waitLease(t, s, st.mac, StateBound); !l.Static || l.Hostname != "printer" {
		t.Errorf("server's lease for the static device: %+v", l)
	}
	if a, ok := s.Lookup("c2-udhcpc.home.arpa."); !ok || a.String() != udEv["ip"] {
		t.Errorf("Lookup(c2-udhcpc) = %v, %v", a, ok)
	}

	// dhclient -r stops the running dhclient and sends a RELEASE.
	dh.RunOnce(t, append([]string{"dhclient", "-4", "-r", "-v"}, dh.DhclientFiles(t)...)...)
	waitLease(t, s, dh.mac, StateReleased)

	// The released address goes to the next client that asks for it.
	next := l.client(t, "02:dc:00:00:00:03")
	next.Udhcpc(t, "-r", dhEv["ip"])
	nextEv, _ := next.WaitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc asking for the released address", nextEv, dhEv["ip"])
	if got := s.Stats(); got.Acks < 4 || got.Releases != 1 {
		t.Errorf("stats %+v: want 4 ACKs and a RELEASE at least", got)
	}
}

// TestNetnsRestart: leases survive a restart of the server: a udhcpc
// renewing (SIGUSR1, unicast RENEWING) and a dhclient restarting
// (INIT-REBOOT from its lease file) keep their addresses with the new
// server, which knew them from the lease file before they spoke.
func TestNetnsRestart(t *testing.T) {
	l := newLAN(t)
	cfg := netnsConfig(t)
	s1, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	stop1 := serve(t, l.router, s1)
	ud := l.client(t, "02:dc:00:00:00:11")
	udProc := ud.Udhcpc(t)
	dh := l.client(t, "02:dc:00:00:00:12")
	dhProc := dh.Dhclient(t)
	udEv, udN := ud.WaitEvent(t, 0, "bound")
	dhEv, _ := dh.WaitEvent(t, 0, "BOUND")
	waitLease(t, s1, ud.mac, StateBound)
	waitLease(t, s1, dh.mac, StateBound)
	stop1()

	// dhclient goes away without a RELEASE while the server is down.
	dhProc.Process.Signal(syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)

	s2, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for _, le := range s2.Leases() {
		if le.State == StateBound {
			known = append(known, le.MAC.String()+" "+le.IP.String())
		}
	}
	want := []string{ud.mac + " " + udEv["ip"], dh.mac + " " + dhEv["ip"]}
	if len(known) != 2 || !(known[0] == want[0] && known[1] == want[1] || known[0] == want[1] && known[1] == want[0]) {
		t.Fatalf("the restarted server knows %v, want %v", known, want)
	}
	serve(t, l.router, s2)

	udProc.Process.Signal(syscall.SIGUSR1) // renew now
	renewEv, _ := ud.WaitEvent(t, udN+1, "renew", "bound")
	if renewEv["event"] != "renew" || renewEv["ip"] != udEv["ip"] {
		t.Errorf("udhcpc after the restart: %v, want a renewal of %s", renewEv, udEv["ip"])
	}

	// A new dhclient with the same lease file asks for its address back.
	old := len(dh.Events())
	dh.Dhclient(t)
	dhEv2, _ := dh.WaitEvent(t, old, "REBOOT", "BOUND")
	if dhEv2["ip"] != dhEv["ip"] {
		t.Errorf("dhclient after the restart: %v, want %s again", dhEv2, dhEv["ip"])
	}
	t.Logf("the restarted server: %+v", s2.Stats())
	if st := s2.Stats(); st.Acks < 2 || st.Naks != 0 {
		t.Errorf("the restarted server's stats %+v: want 2 ACKs, no NAK", st)
	}
}

// TestNetnsDecline: udhcpc -a checks the offered address with an ARP ping,
// finds a squatter on it and DECLINEs it; the server quarantines it and
// the client gets the next address.
func TestNetnsDecline(t *testing.T) {
	l := newLAN(t)
	s, err := New(netnsConfig(t), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l.router, s)
	squatter := l.client(t, "02:dc:00:00:00:21")
	squatter.ns.Run(t, "ip", "addr", "add", "10.70.0.101/24", "dev", "c0") // the first pool address
	c := l.client(t, "02:dc:00:00:00:22")
	c.Udhcpc(t, "-a", "-A", "1")
	ev, _ := c.WaitEvent(t, 0, "bound")
	if ev["ip"] == "10.70.0.101" {
		t.Fatalf("udhcpc bound the squatted address: %v", ev)
	}
	if st := s.Stats(); st.Declines != 1 {
		t.Errorf("stats %+v: want one DECLINE", st)
	}
	s.mu.Lock()
	_, quarantined := s.declined[netip.MustParseAddr("10.70.0.101")]
	s.mu.Unlock()
	if !quarantined {
		t.Error("the declined address is not quarantined")
	}
}

// TestNetnsReopen: Serve follows its interface when it is deleted and
// created again (as the supervisor recreates the host port) and when Update
// names another one.
func TestNetnsReopen(t *testing.T) {
	l := newLAN(t)
	cfg := netnsConfig(t)
	s, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l.router, s)
	c := l.client(t, "02:dc:00:00:00:31")

	l.router.Run(t, "ip", "link", "del", "br0")
	l.router.Run(t, "ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	l.router.Run(t, "ip", "addr", "add", "10.70.0.1/24", "dev", "br0")
	l.router.Run(t, "ip", "link", "set", "br0", "up")
	l.router.Run(t, "ip", "link", "set", "p1", "master", "br0", "up")
	c.Udhcpc(t, "-q")
	ev, _ := c.WaitEvent(t, 0, "bound") // within sweepEvery of the new br0
	checkOptions(t, "udhcpc after br0 was recreated", ev, "")

	// Another interface and subnet, live.
	l.router.Run(t, "ip", "link", "add", "br1", "type", "bridge", "forward_delay", "0")
	l.router.Run(t, "ip", "addr", "add", "10.71.0.1/24", "dev", "br1")
	l.router.Run(t, "ip", "link", "set", "br1", "up")
	l.router.Run(t, "ip", "link", "set", "p1", "nomaster")
	l.router.Run(t, "ip", "link", "set", "p1", "master", "br1", "up")
	cfg.Interface, cfg.Subnet, cfg.ServerIP = "br1", netip.MustParsePrefix("10.71.0.0/24"), netip.MustParseAddr("10.71.0.1")
	cfg.PoolStart, cfg.PoolEnd, cfg.Static, cfg.Exclude, cfg.NTP = netip.Addr{}, netip.Addr{}, nil, nil, nil
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	old := len(c.Events())
	c.Udhcpc(t, "-q")
	ev, _ = c.WaitEvent(t, old, "bound")
	if ev["ip"] != "10.71.0.2" || ev["router"] != "10.71.0.1" {
		t.Errorf("udhcpc on br1: %v, want 10.71.0.2 via 10.71.0.1", ev)
	}
}
