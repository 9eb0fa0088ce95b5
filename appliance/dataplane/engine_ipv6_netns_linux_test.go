package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/services/ra"
	"e1kbox/internal/keatest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/internal/vlanpeer"
	"e1kbox/rules"
)

// TestEngineIPv6 routes IPv6 through the NAT-mode engine: h2 is the ISP
// (radvd announcing itself as the WAN's default router, a server at
// 2001:db8:43::1, a route to the delegated prefix via the box's WAN
// link-local address, a 1400-byte link); the box's RA daemon on the host
// port announces 2001:db8:42::/64 and h1 (LAN) autoconfigures with the
// kernel's SLAAC, pings and fetches from the server with its own address
// (no NAT66), is unreachable from the WAN until an allow rule admits its
// service, gets packet too big for a packet over 1400 bytes, and moves to
// a new prefix when the delegation changes.
func TestEngineIPv6(t *testing.T) {
	l := newIPv6Lab(t)
	if out, err := l.h1.Output("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "2001:db8:43::1"); err != nil {
		t.Fatalf("h1 ping -6 to the ISP's server: %v\n%s", err, out)
	}
	serve(t, l.h2, "[2001:db8:43::1]:8080")
	if out, err := l.h1.Output("curl", "-6", "-s", "--max-time", "5", "http://[2001:db8:43::1]:8080/"); err != nil ||
		!strings.HasPrefix(out, "from ["+l.addr.String()+"]:") {
		t.Errorf("h1 curl -6 to the server: %v %q, want it seen from %v", err, out, l.addr)
	}
	l.inbound(t)
	l.tooBig(t)
	l.renumber(t)
}

// ipv6Lab is TestEngineIPv6's topology with the engine running and h1
// autoconfigured at addr.
type ipv6Lab struct {
	tp     *topo
	h1, h2 *netnstest.Namespace
	cfg    *Config
	e      *Engine
	v6     *route6.Router
	rad    *ra.Server
	first  netip.Prefix
	addr   netip.Addr
	peer   *vlanpeer.Peer // h2's VLAN, if the WAN is tagged
}

func newIPv6Lab(t *testing.T) *ipv6Lab { return newIPv6LabOn(t, WANVLAN{}) }

// newIPv6LabOn is newIPv6Lab with the WAN on VLAN vlan (0: untagged),
// h2's end of the cable speaking it (vlanpeer; l.peer).
func newIPv6LabOn(t *testing.T, vlan WANVLAN) *ipv6Lab {
	testenv.Require(t, "radvd", "curl")
	tp := newTopo(t, 2)
	l := &ipv6Lab{tp: tp, h1: tp.hosts[0], h2: tp.hosts[1], first: netip.MustParsePrefix("2001:db8:42::/64")}
	tp.box.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	for _, p := range []string{"p1", "p2"} {
		tp.box.Sysctl(t, "net.ipv4.conf."+p+".arp_ignore=8")
	}
	tp.box.IP(t, "link", "set", "p2", "mtu", "1400")
	l.h2.IP(t, "link", "set", "eth0", "mtu", "1400")
	l.h2.Sysctl(t, "net.ipv6.conf.all.forwarding=1")
	l.h2.IP(t, "addr", "add", "2001:db8:43::1/64", "dev", "eth0", "nodad")
	wanMAC, _ := net.ParseMAC(strings.Fields(tp.box.IP(t, "-br", "link", "show", "p2"))[2])
	l.h2.IP(t, "-6", "route", "add", "2001:db8:42::/56", "via", LinkLocal([6]byte(wanMAC)).String(), "dev", "eth0")
	if vlan.ID != 0 {
		l.peer = vlanpeer.In(t, l.h2, "eth0", vlan.ID, 3)
	}
	keatest.StartRadvd(t, l.h2, "eth0", netip.MustParsePrefix("2001:db8:43::/64"))
	l.cfg = &Config{
		Mode:     ModeNAT,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		HostPort: &HostPort{Interface: "dphost0"},
		NAT: &NAT{
			LANAddr: netip.MustParsePrefix("10.42.0.254/24"),
			WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			IPv6:    true,
			WANVLAN: vlan,
		},
	}
	l.e = tp.engine(l.cfg)
	l.v6 = l.e.IPv6()
	if err := l.v6.SetPrefixes([]netip.Prefix{l.first}, []netip.Prefix{netip.MustParsePrefix("2001:db8:42::/56")}, nil); err != nil {
		t.Fatal(err)
	}
	l.rad = startRA(t, tp.box, l.first)
	netnstest.WaitFor(t, 10*time.Second, "the WAN gateway from radvd's RA", func() bool {
		_, ok := l.v6.Gateway(time.Now().UnixNano())
		return ok
	})
	l.addr = waitSLAAC(t, l.h1, l.first)
	return l
}

// inbound: unsolicited inbound TCP is dropped; an allow rule admits it.
func (l *ipv6Lab) inbound(t *testing.T) {
	serve(t, l.h1, "[::]:9000")
	url := "http://[" + l.addr.String() + "]:9000/"
	before := l.v6.Stats().Drops[route6.ReasonFirewall]
	if out, err := l.h2.Output("curl", "-s", "--max-time", "2", url); err == nil {
		t.Errorf("h2 reached h1's unexposed service: %q", out)
	}
	if l.v6.Stats().Drops[route6.ReasonFirewall] == before {
		t.Error("no firewall drop counted for the inbound SYN")
	}
	if st := l.e.Snapshot().IPv6; st == nil || st.Drops["firewall"] == 0 || len(st.LAN) != 1 || st.LAN[0] != l.first || st.Gateway == "" {
		t.Errorf("the snapshot's ipv6 section %+v, want %v, a gateway and the firewall drop", st, l.first)
	}
	rs, err := rules.Parse("ip6 daddr " + l.addr.String() + " tcp dport 9000 accept")
	if err != nil {
		t.Fatal(err)
	}
	withRule := *l.cfg
	withRule.Rules = rs
	if err := l.e.Apply(&withRule); err != nil {
		t.Fatalf("Apply with the allow rule: %v", err)
	}
	if out, err := l.h2.Output("curl", "-6", "-s", "--max-time", "5", url); err != nil || !strings.HasPrefix(out, "from [2001:db8:43::1]:") {
		t.Errorf("h2 to h1's service with the allow rule: %v %q", err, out)
	}
}

// tooBig: the box's packet too big makes h1 learn the WAN's 1400 bytes.
func (l *ipv6Lab) tooBig(t *testing.T) {
	l.h1.Output("ping", "-6", "-c", "1", "-W", "2", "-s", "1452", "-M", "do", "2001:db8:43::1")
	if out := l.h1.Run(t, "ip", "-6", "route", "get", "2001:db8:43::1"); !strings.Contains(out, "mtu 1400") {
		t.Errorf("h1's route after a 1500-byte ping: %q, want mtu 1400 from the box's packet too big", out)
	}
	if out, err := l.h1.Output("ping", "-6", "-c", "1", "-W", "2", "-s", "1352", "-M", "do", "2001:db8:43::1"); err != nil {
		t.Errorf("a 1400-byte ping after PMTU discovery: %v\n%s", err, out)
	}
}

// renumber: the new prefix is routed and announced, h1 moves to it and
// its old address is deprecated.
func (l *ipv6Lab) renumber(t *testing.T) {
	second := netip.MustParsePrefix("2001:db8:42:1::/64")
	if err := l.v6.SetPrefixes([]netip.Prefix{second, l.first}, []netip.Prefix{netip.MustParsePrefix("2001:db8:42::/56")}, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	l.rad.SetPrefixes([]ra.Prefix{{Prefix: second, Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)}})
	moved := waitSLAAC(t, l.h1, second)
	if out, err := l.h1.Output("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "-I", moved.String(), "2001:db8:43::1"); err != nil {
		t.Errorf("h1 from its new address %v: %v\n%s", moved, err, out)
	}
	if out := l.h1.IP(t, "-6", "addr", "show", "dev", "eth0"); !strings.Contains(out, l.addr.String()+"/64 scope global deprecated") {
		t.Errorf("h1's old address not deprecated:\n%s", out)
	}
}

// startRA runs the box's RA daemon on the host port with prefix p.
func startRA(t *testing.T, box *netnstest.Namespace, p netip.Prefix) *ra.Server {
	s, err := ra.New(ra.Config{Interface: "dphost0", MaxInterval: 30 * time.Second, MTU: 1500}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.SetPrefixes([]ra.Prefix{{Prefix: p, Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)}})
	ctx, cancel := context.WithCancel(context.Background())
	wait := box.Go(t, func() {
		if err := s.Serve(ctx); err != nil {
			t.Errorf("ra: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wait() })
	return s
}

// waitSLAAC waits for ns's eth0 to have a preferred address in p that
// passed duplicate address detection.
func waitSLAAC(t *testing.T, ns *netnstest.Namespace, p netip.Prefix) netip.Addr {
	t.Helper()
	var got netip.Addr
	netnstest.WaitFor(t, 15*time.Second, "a SLAAC address in "+p.String(), func() bool {
		for _, line := range strings.Split(ns.IP(t, "-6", "addr", "show", "dev", "eth0", "scope", "global"), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && f[0] == "inet6" && !strings.Contains(line, "deprecated") && !strings.Contains(line, "tentative") {
				if a, err := netip.ParsePrefix(f[1]); err == nil && p.Contains(a.Addr()) {
					got = a.Addr()
					return true
				}
			}
		}
		return false
	})
	return got
}

// serve runs an HTTP server in ns on addr that answers with the client's
// address.
func serve(t *testing.T, ns *netnstest.Namespace, addr string) {
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
