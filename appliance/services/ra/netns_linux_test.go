package ra

import (
	"context"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

var routerMAC = net.HardwareAddr{0x02, 0x86, 0x00, 0x00, 0x01, 0x01}

// lab is a "router" namespace whose veth l0 the server runs on and a
// "host" namespace whose veth h0 autoconfigures with the kernel's SLAAC
// (accept_ra=2).
type lab struct {
	router, host *netnstest.Namespace
}

func newLab(t *testing.T) *lab {
	t.Helper()
	testenv.Require(t, "root", "ip", "rdisc6")
	l := &lab{router: netnstest.New(t, "ipv6-rtr"), host: netnstest.New(t, "ipv6-host")}
	for _, ns := range []*netnstest.Namespace{l.router, l.host} {
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	l.host.Sysctl(t, "net.ipv6.conf.default.accept_ra=2", "net.ipv6.conf.default.autoconf=1")
	netnstest.Veth(t,
		netnstest.End{NS: l.router, Name: "l0", MAC: routerMAC.String(), Up: true},
		netnstest.End{NS: l.host, Name: "h0", MAC: "02:86:00:00:01:02"})
	return l
}

// hostAddrs is the host's global addresses on h0: address → deprecated.
func (l *lab) hostAddrs(t *testing.T) map[netip.Addr]bool {
	t.Helper()
	out := l.host.IP(t, "-6", "addr", "show", "dev", "h0", "scope", "global")
	m := map[netip.Addr]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "inet6" {
			continue
		}
		if p, err := netip.ParsePrefix(f[1]); err == nil {
			m[p.Addr()] = strings.Contains(line, "deprecated")
		}
	}
	return m
}

// TestNetnsSLAAC: a Linux host autoconfigures from the RAs (address in the
// /64, default route via the router's link-local address, MTU), rdisc6
// sees the prefix, RDNSS and DNSSL, a solicitation with hop limit 64 is
// dropped, and a new prefix moves the host while the old one's address is
// deprecated.
func TestNetnsSLAAC(t *testing.T) {
	l := newLab(t)
	s, err := New(Config{Interface: "l0", MTU: 1400, MaxInterval: 30 * time.Second,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8:8600::1")}, Domains: []string{"lan.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	first := netip.MustParsePrefix("2001:db8:8600::/64")
	if err := s.SetPrefixes([]Prefix{{first, now.Add(time.Hour), now.Add(2 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.router.Go(t, func() {
		if err := s.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wait() })
	time.Sleep(200 * time.Millisecond) // the socket listens before the host's first RS
	l.host.IP(t, "link", "set", "h0", "up")

	slaac := netip.MustParseAddr("2001:db8:8600::86:ff:fe00:102") // EUI-64 of 02:86:00:00:01:02
	netnstest.WaitFor(t, 10*time.Second, "the host's SLAAC address in "+first.String(), func() bool {
		dep, ok := l.hostAddrs(t)[slaac]
		return ok && !dep
	})
	route := l.host.IP(t, "-6", "route", "show", "default")
	if !strings.Contains(route, "via fe80::86:ff:fe00:101 dev h0") {
		t.Errorf("host's default route %q, want via the router's link-local address", route)
	}
	if mtu := l.host.Run(t, "cat", "/proc/sys/net/ipv6/conf/h0/mtu"); strings.TrimSpace(mtu) != "1400" {
		t.Errorf("host's IPv6 MTU %s, want 1400 from the RA", mtu)
	}
	// rdisc6 solicits and prints the answer.
	out := l.host.Run(t, "rdisc6", "-1", "-w", "3000", "h0")
	if st := s.Stats(); st.Solicitations == 0 || st.Sent["solicited"] == 0 {
		t.Errorf("stats %+v: want rdisc6's RS counted and answered", st)
	}
	for _, want := range []string{
		`Prefix\s*:\s*2001:db8:8600::/64`, `Recursive DNS server\s*:\s*2001:db8:8600::1`,
		`DNS search list\s*:\s*lan\.example`, `MTU\s*:\s*1400 bytes`, `Router lifetime\s*:\s*90 \(0x`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("rdisc6 output lacks %s:\n%s", want, out)
		}
	}

	// An RS with hop limit 64 (it may have come from off link) is dropped.
	before := s.Stats()
	l.host.Do(t, func() { sendRS(t, 64) })
	netnstest.WaitFor(t, 3*time.Second, "the hop-limit-64 RS dropped", func() bool {
		return s.Stats().Dropped["hop_limit"] > before.Dropped["hop_limit"]
	})
	if got := s.Stats().Solicitations; got != before.Solicitations {
		t.Errorf("solicitations %d after a hop-limit-64 RS, want %d", got, before.Solicitations)
	}

	// Renumbering: the new prefix is announced at once, the old one with
	// lifetimes 0.
	second := netip.MustParsePrefix("2001:db8:8700::/64")
	now = time.Now()
	s.SetPrefixes([]Prefix{{second, now.Add(time.Hour), now.Add(2 * time.Hour)}})
	moved := netip.MustParseAddr("2001:db8:8700::86:ff:fe00:102")
	netnstest.WaitFor(t, 10*time.Second, "the host on the new prefix, the old address deprecated", func() bool {
		a := l.hostAddrs(t)
		dNew, okNew := a[moved]
		dOld, okOld := a[slaac]
		return okNew && !dNew && (!okOld || dOld)
	})
	if cur, dep := s.Prefixes(); len(cur) != 1 || cur[0].Prefix != second || len(dep) != 1 || dep[0].Prefix != first {
		t.Errorf("Prefixes() = %v, %v; want %v announced and %v deprecated", cur, dep, second, first)
	}
}

// sendRS sends a router solicitation from h0 with the given hop limit.
func sendRS(t *testing.T, hops int) {
	t.Helper()
	c, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc := c.IPv6PacketConn()
	if err := pc.SetMulticastHopLimit(hops); err != nil {
		t.Fatal(err)
	}
	b, err := ndp.MarshalMessage(&ndp.RouterSolicitation{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetChecksum(true, 2); err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName("h0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WriteTo(b, &ipv6.ControlMessage{IfIndex: ifi.Index, HopLimit: hops}, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: "h0"}); err != nil {
		t.Fatal(err)
	}
}
