package dataplane

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/internal/netnstest"
)

// TestEngineNAT routes h1 (LAN, 10.42.0.1/24 behind 10.42.0.254) to h2
// (the WAN gateway, 10.43.0.1/24) and applies a new router configuration
// while a connection is tracked: the connection survives.
func TestEngineNAT(t *testing.T) {
	// Both ring loops: the plain one (a small table) and the one that
	// prefetches conntrack lines ahead (big tables; forced here).
	for _, min := range []int{natPrefetchMin, 0} {
		t.Run(fmt.Sprintf("prefetch from %d conns", min), func(t *testing.T) {
			old := natPrefetchMin
			t.Cleanup(func() { natPrefetchMin = old }) // runs last, after the engine closed
			natPrefetchMin = min
			testEngineNAT(t)
		})
	}
}

func testEngineNAT(t *testing.T) {
	tp := newTopo(t, 2)
	h1, h2 := tp.hosts[0], tp.hosts[1]
	// What the tuning plan's quiet sysctls do on the appliance: the
	// kernel must not answer ARP on the data ports for the host port's
	// address (Linux's weak host model would, with the router's MAC).
	for _, p := range []string{"p1", "p2"} {
		tp.box.Sysctl(t, "net.ipv4.conf."+p+".arp_ignore=8")
	}
	h1.IP(t, "route", "add", "default", "via", "10.42.0.254")
	h2.IP(t, "addr", "flush", "dev", "eth0")
	h2.IP(t, "addr", "add", "10.43.0.1/24", "dev", "eth0")
	cfg := &Config{
		Mode:     ModeNAT,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		HostPort: &HostPort{Interface: "dphost0", Addresses: []netip.Prefix{netip.MustParsePrefix("10.42.0.100/24")}},
		NAT: &NAT{
			LANAddr: netip.MustParsePrefix("10.42.0.254/24"),
			WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			Gateway: netip.MustParseAddr("10.43.0.1"),
		},
	}
	e := tp.engine(cfg)
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(1, "10.42.0.100"); err != nil {
		t.Errorf("host port on the LAN segment: %v", err)
	}
	before, err := ListConns(e.NAT(), ConnFilter{Proto: "icmp"}, 0, 0)
	if err != nil || before.Total != 1 || before.Conns[0].Reply.Dst.Addr() != netip.MustParseAddr("10.43.0.2") {
		t.Fatalf("ICMP connection after ping: %+v, %v", before, err)
	}
	s := e.Snapshot()
	if s.Mode != ModeNAT || s.NAT == nil || s.NAT.NewConns == 0 || s.NAT.EchoReplies == 0 && s.NAT.Forwarded == 0 {
		t.Errorf("snapshot: mode %q, nat %+v", s.Mode, s.NAT)
	}
	cfg2 := *cfg
	n := *cfg.NAT
	n.Forwards = []nat.PortForward{{Proto: frame.ProtoTCP, Port: 2222, To: netip.MustParseAddrPort("10.42.0.1:22")}}
	n.Timeouts.ICMP = 60
	cfg2.NAT = &n
	if err := e.Apply(&cfg2); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	after, err := ListConns(e.NAT(), ConnFilter{Proto: "icmp"}, 0, 0)
	if err != nil || after.Total != 1 || after.Conns[0].ID != before.Conns[0].ID {
		t.Errorf("ICMP connection after Apply: %+v, %v (before %+v)", after, err, before)
	}
	if got := e.NAT().Config().Forwards; len(got) != 1 || got[0].Port != 2222 {
		t.Errorf("router forwards after Apply: %+v", got)
	}
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Errorf("after Apply: %v", err)
	}

	cfg3 := cfg2
	n3 := n
	n3.MaxConns = 1024
	cfg3.NAT = &n3
	if err := e.Apply(&cfg3); err != ErrRestartRequired {
		t.Errorf("Apply with a new table size = %v, want ErrRestartRequired", err)
	}
	bad := cfg2
	nb := n
	nb.Gateway = netip.MustParseAddr("10.99.0.1")
	bad.NAT = &nb
	if err := e.Apply(&bad); err == nil {
		t.Errorf("Apply with a gateway off the WAN: no error")
	}
	if got := e.NAT().Config().Gateway; got != netip.MustParseAddr("10.43.0.1") {
		t.Errorf("a refused Apply changed the gateway to %v", got)
	}
	// The kernel's stack gets none of the data ports' frames (ingressdrop):
	// routed traffic to the router's MAC adds nothing to the box's IP
	// input counter (without the drop each frame would: ip_rcv counts it,
	// routes it and drops it).
	// With the fast path at tcx the data ports' rings are bound to
	// EtherTypes after tcx, and the kernel drop demotes (the frames reach
	// ip_rcv as PACKET_OTHERHOST, dropped before it counts them).
	snap := e.Snapshot()
	tcx := snap.FastPath != nil && snap.FastPath.Mode == string(FastPathTCX)
	if !tcx {
		t.Errorf("fast path %+v, want tcx", snap.FastPath)
	}
	for _, p := range snap.Ports {
		if want := p.Kind == "data"; p.KernelDrop != want {
			t.Errorf("port %s (%s): kernelDrop = %v (%q), want %v", p.Name, p.Kind, p.KernelDrop, p.KernelDropError, want)
		}
		if want := p.Kind == "data" && tcx; p.AfterTCX != want {
			t.Errorf("port %s (%s): afterTcx = %v, want %v", p.Name, p.Kind, p.AfterTCX, want)
		}
	}
	inReceives := func() uint64 { return snmpIPInReceives(t, tp.box) }
	in0 := inReceives()
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Fatal(err)
	}
	if d := inReceives() - in0; d != 0 {
		t.Errorf("the box kernel's Ip InReceives grew by %d while h1 pinged through the router; want 0 (frames for the dataplane reach the kernel's stack)", d)
	}
	testBoxStack(t, tp)
}

// snmpIPInReceives reads Ip: InReceives from /proc/net/snmp in namespace ns.
func snmpIPInReceives(t *testing.T, ns *netnstest.Namespace) uint64 {
	t.Helper()
	var names, values []string
	for _, line := range strings.Split(ns.Run(t, "cat", "/proc/net/snmp"), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Ip:" {
			if names == nil {
				names = f
			} else {
				values = f
			}
		}
	}
	for i, n := range names {
		if n == "InReceives" && i < len(values) {
			v, err := strconv.ParseUint(values[i], 10, 64)
			if err != nil {
				t.Fatalf("/proc/net/snmp InReceives %q: %v", values[i], err)
			}
			return v
		}
	}
	t.Fatalf("no Ip InReceives in /proc/net/snmp of %s", ns)
	return 0
}

// testBoxStack checks the box's own stack behind the router: a service on
// the router's LAN address answers a LAN host, and the box reaches the
// WAN through the router, masqueraded.
func testBoxStack(t *testing.T, tp *topo) {
	var ln net.Listener
	var err error
	tp.box.Do(t, func() { ln, err = net.Listen("tcp", "10.42.0.254:8081") })
	if err != nil {
		t.Fatalf("listen on the router's address in the box: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "box sees %s", r.RemoteAddr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	out, err := tp.hosts[0].Output("curl", "-s", "--max-time", "5", "http://10.42.0.254:8081/")
	if err != nil || !strings.HasPrefix(out, "box sees 10.42.0.1:") {
		t.Errorf("h1 to a service on the router's address: %v %q", err, out)
	}
	out, err = tp.box.Output("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.43.0.1")
	if err != nil {
		t.Errorf("the box to the WAN gateway through the router: %v\n%s", err, out)
	}
	if out := tp.box.Run(t, "ip", "route", "get", "10.43.0.1"); !strings.Contains(out, "via 169.254.0.1 dev dphost0") || !strings.Contains(out, "src 10.42.0.254") {
		t.Errorf("the box's route to the WAN: %s", out)
	}
}
