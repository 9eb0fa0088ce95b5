package dhcpd

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// The test LAN: 10.70.0.0/24 with the router on .1.
var (
	srvIP = netip.MustParseAddr("10.70.0.1")
	lan   = netip.MustParsePrefix("10.70.0.0/24")
)

// Test clients' MACs.
const (
	macA = "02:00:00:00:00:0a"
	macB = "02:00:00:00:00:0b"
	macC = "02:00:00:00:00:0c"
	macD = "02:00:00:00:00:0d"
	macS = "02:00:00:00:00:05" // has a static lease where a case configures one
)

func testConfig() Config {
	return Config{Interface: "lan0", ServerIP: srvIP, Subnet: lan}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testLog logs to the test at Info level.
func testLog(t testing.TB) *slog.Logger { return testLogAt(t, slog.LevelInfo) }

// testLogAt logs to the test from level lvl up.
func testLogAt(t testing.TB, lvl slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{
		Level: lvl,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// newTestServer builds a server for cfg on a fake clock.
func newTestServer(t testing.TB, cfg Config) (*Server, *fakeClock) {
	t.Helper()
	clk := newClock()
	s, err := newServer(cfg, testLog(t), clk.Now)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, clk
}

func hw(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ip(s string) net.IP { return net.ParseIP(s).To4() }

// Modifiers of client messages.
func requested(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip(a)))
}
func serverID(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptServerIdentifier(ip(a)))
}
func ciaddr(a string) dhcpv4.Modifier { return dhcpv4.WithClientIP(ip(a)) }
func giaddr(a string) dhcpv4.Modifier { return dhcpv4.WithGatewayIP(ip(a)) }
func clientID(id ...byte) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientIdentifier, id))
}
func hostname(h string) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptHostName(h)) }

// msg builds a client message of type mt from chaddr.
func msg(t testing.TB, mt dhcpv4.MessageType, chaddr string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw(chaddr)), dhcpv4.WithMessageType(mt)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The client messages of RFC 2131 §4.3/4.4, per client state.
func discover(t testing.TB, mac string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeDiscover, mac, mods...)
}
func selecting(t testing.TB, mac, a string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeRequest, mac, append([]dhcpv4.Modifier{requested(a), serverID(srvIP.String())}, mods...)...)
}
func initReboot(t testing.TB, mac, a string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeRequest, mac, append([]dhcpv4.Modifier{requested(a)}, mods...)...)
}
func renew(t testing.TB, mac, a string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeRequest, mac, append([]dhcpv4.Modifier{ciaddr(a)}, mods...)...)
}
func release(t testing.TB, mac, a string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeRelease, mac, append([]dhcpv4.Modifier{ciaddr(a), serverID(srvIP.String())}, mods...)...)
}
func decline(t testing.TB, mac, a string, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeDecline, mac, append([]dhcpv4.Modifier{requested(a), serverID(srvIP.String())}, mods...)...)
}
func inform(t testing.TB, mac, a string) *dhcpv4.DHCPv4 {
	return msg(t, dhcpv4.MessageTypeInform, mac, ciaddr(a))
}

// summary is a reply in one line: "" (no reply), "NAK", "OFFER 10.70.0.2",
// "ACK 10.70.0.2", or "ACK ciaddr=10.70.0.9" for an INFORM's answer.
func summary(r *dhcpv4.DHCPv4) string {
	if r == nil {
		return ""
	}
	s := r.MessageType().String()
	switch r.MessageType() {
	case dhcpv4.MessageTypeOffer:
		s = "OFFER"
	case dhcpv4.MessageTypeAck:
		s = "ACK"
	case dhcpv4.MessageTypeNak:
		return "NAK"
	}
	if y := ip4(r.YourIPAddr); y.IsValid() {
		return s + " " + y.String()
	}
	if c := ip4(r.ClientIPAddr); c.IsValid() {
		return s + " ciaddr=" + c.String()
	}
	return s
}

// leaseLines is Leases in one line per lease: "mac ip state[ static[
// config]][ unproven][ hostname]".
func leaseLines(s *Server) []string {
	var out []string
	for _, l := range s.Leases() {
		line := fmt.Sprintf("%s %s %s", l.MAC, l.IP, l.State)
		if l.Static {
			line += " static"
		}
		if l.InConfig {
			line += " config"
		}
		if l.Unproven {
			line += " unproven"
		}
		if l.Hostname != "" {
			line += " " + l.Hostname
		}
		out = append(out, line)
	}
	return out
}

// dora runs DISCOVER, REQUEST (SELECTING) for mac and returns the address
// acknowledged, failing the test if there is none.
func dora(t testing.TB, s *Server, mac string, mods ...dhcpv4.Modifier) netip.Addr {
	t.Helper()
	offer := s.Handle(discover(t, mac, mods...))
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("%s: DISCOVER answered %q", mac, summary(offer))
	}
	a := ip4(offer.YourIPAddr)
	ack := s.Handle(selecting(t, mac, a.String(), mods...))
	if got := summary(ack); got != "ACK "+a.String() {
		t.Fatalf("%s: REQUEST %v answered %q", mac, a, got)
	}
	return a
}

// checkInvariants fails the test if the table's indexes disagree or its
// bound is broken.
func checkInvariants(t testing.TB, s *Server) {
	t.Helper()
	checkInvariantsBound(t, s, s.pol.maxLeases)
}

// checkInvariantsBound is checkInvariants with the dynamic entries bounded
// by bound (above MaxLeases after an Update lowered it).
func checkInvariantsBound(t testing.TB, s *Server, bound int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byIP) != len(s.byKey) {
		t.Errorf("byIP has %d entries, byKey %d", len(s.byIP), len(s.byKey))
	}
	dyn := 0
	for k, e := range s.byKey {
		if e.key != k || s.byIP[e.ip] != e {
			t.Errorf("entry %s (%v) is not indexed by its key and address", k, e.ip)
		}
		if (e.heap == nil) != s.holdsStatic(e) {
			t.Errorf("entry %s: in a heap %v, holds its static address %v", k, e.heap != nil, s.holdsStatic(e))
		}
		if e.heap != nil {
			dyn++
			if (*e.heap)[e.hidx] != e {
				t.Errorf("entry %s: wrong heap index", k)
			}
			if (e.heap == &s.offers) != (e.state == StateOffered) {
				t.Errorf("entry %s (%s) in the wrong heap", k, e.state)
			}
		}
	}
	if dyn != s.dynamic() {
		t.Errorf("%d dynamic entries, heaps hold %d", dyn, s.dynamic())
	}
	if s.dynamic() > bound {
		t.Errorf("%d dynamic entries, more than %d", s.dynamic(), bound)
	}
	if n := len(s.byKey) - s.dynamic(); n > len(s.static) {
		t.Errorf("%d static holds, more than %d statics", n, len(s.static))
	}
	checkQueues(t, s)
	if len(s.declined) > s.pol.maxLeases {
		t.Errorf("%d quarantined addresses, more than MaxLeases %d", len(s.declined), s.pol.maxLeases)
	}
}

func joinIPs(ips []net.IP) string {
	var out []string
	for _, a := range ips {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

func netipMask(m net.IPMask) string { return net.IP(m).String() }
