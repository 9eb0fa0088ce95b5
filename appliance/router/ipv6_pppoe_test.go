package router

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/pppoe"
)

// TestPPPoEDHCP6: the DHCPv6 client runs over the session only while one
// with IPv6CP is up, from IPv6CP's link-local address and the endpoint's
// MAC, on the session's transport; a new session binds it anew.
func TestPPPoEDHCP6(t *testing.T) {
	link := &fakeLink{in6: make(chan []byte)}
	ll, peer := netip.MustParseAddr("fe80::1c:2d:3e:4f"), netip.MustParseAddr("fe80::a:b:c:d")
	up := pppoe.Status{Phase: pppoe.PhaseUp, SessionID: 7, MTU: 1492, LocalIPv4: netip.MustParseAddr("203.0.113.9"),
		PeerIPv4: netip.MustParseAddr("203.0.113.1"), LocalLinkLocal: ll, PeerLinkLocal: peer}
	with := func(f func(*pppoe.Status)) *pppoe.Status { s := up; f(&s); return &s }
	for _, tc := range []struct {
		name string
		st   *pppoe.Status
		up   bool
	}{
		{"no PPPoE status", nil, false},
		{"discovery", &pppoe.Status{Phase: pppoe.PhaseDiscovery}, false},
		{"up without IPv6CP", with(func(s *pppoe.Status) { s.LocalLinkLocal, s.PeerLinkLocal = netip.Addr{}, netip.Addr{} }), false},
		{"up with IPv6CP", &up, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Router{opts: Options{PPPoELink: func() (PPPoELink, error) { return link, nil }}, pppoe: tc.st}
			cfg := dhcp6c.Config{Interface: "wan", MAC: net.HardwareAddr{2, 9, 9, 9, 9, 9}}
			at, ok := r.pppoeDHCP6(&cfg)
			if ok != tc.up {
				t.Fatalf("bound %v (%q), want %v", ok, at, tc.up)
			}
			if !ok {
				if cfg.Open != nil || cfg.LinkLocal.IsValid() {
					t.Errorf("config %+v changed without a session", cfg)
				}
				return
			}
			if cfg.LinkLocal != ll || cfg.MAC.String() != link.MAC().String() || cfg.VLAN.ID != 0 {
				t.Errorf("source %v MAC %v VLAN %d, want %v %v untagged (the endpoint tags)", cfg.LinkLocal, cfg.MAC, cfg.VLAN.ID, ll, link.MAC())
			}
			tr, mtu, err := cfg.Open()
			if err != nil || mtu != 1492 {
				t.Fatalf("Open() = %T, %d, %v; want the session's transport, MTU 1492", tr, mtu, err)
			}
			if err := tr.Write([]byte("solicit"), nil); err != nil || len(link.sent6) != 1 {
				t.Errorf("Write: %v, %d frames on the endpoint, want 1", err, len(link.sent6))
			}
			tr.Close()
			// Another session, another link-local: bound anew.
			r.pppoe = with(func(s *pppoe.Status) { s.SessionID = 8 })
			if at2, _ := r.pppoeDHCP6(&dhcp6c.Config{}); at2 == at {
				t.Errorf("a new session binds the client to the same %q", at)
			}
			r.pppoe = with(func(s *pppoe.Status) { s.LocalLinkLocal = netip.MustParseAddr("fe80::99") })
			if at2, _ := r.pppoeDHCP6(&dhcp6c.Config{}); at2 == at {
				t.Errorf("a new link-local binds the client to the same %q", at)
			}
		})
	}
}

// TestLANMTUPPPoE: the LAN's RAs advertise the session's MTU when it is
// below the LAN ports'.
func TestLANMTUPPPoE(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pppoe   bool
		lanMTU  int
		session int
		want    int
	}{
		{"Ethernet WAN", false, 0, 1492, 1500},
		{"PPPoE, no session yet", true, 0, 0, 1500},
		{"PPPoE 1492", true, 0, 1492, 1492},
		{"PPPoE, RFC 4638", true, 0, 1500, 1500},
		{"PPPoE under a jumbo LAN", true, 9000, 1492, 1492},
		{"a LAN below the session", true, 1400, 1492, 1400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := `{"version": 2, "mode": "nat", "ports": [{"interface": "wan0", "role": "wan"}, {"interface": "lan0", "role": "lan", "mtu": ` +
				strconv.Itoa(tc.lanMTU) + `}]`
			if tc.pppoe {
				js += `, "nat": {"wan": {"pppoe": {"username": "u", "password": "p"}}}`
			}
			c, err := config.Parse([]byte(js + "}"))
			if err != nil {
				t.Fatal(err)
			}
			r := &Router{cfg: c}
			r.v6.pppMTU = tc.session
			if got := r.lanMTU(); got != tc.want {
				t.Errorf("lanMTU() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLiveDHCP6: the DHCPv6 transport follows the engine's endpoint: a
// Read blocked on the old one gets the new one's frames, writes go to
// the new one, Close ends a blocked Read.
func TestLiveDHCP6(t *testing.T) {
	a, b := &fakeLink{in6: make(chan []byte)}, &fakeLink{in6: make(chan []byte)}
	var mu sync.Mutex
	cur := a
	l := newLiveDHCP6(func() (PPPoELink, error) {
		mu.Lock()
		defer mu.Unlock()
		return cur, nil
	}, 10*time.Millisecond)
	got := make(chan string)
	errs := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := l.Read(buf)
			if err != nil {
				errs <- err
				return
			}
			got <- string(buf[:n])
		}
	}()
	a.in6 <- []byte("from a")
	if g := <-got; g != "from a" {
		t.Fatalf("read %q", g)
	}
	mu.Lock()
	cur = b
	mu.Unlock()
	select {
	case b.in6 <- []byte("from b"):
	case <-time.After(5 * time.Second):
		t.Fatal("nothing reads from the new endpoint")
	}
	if g := <-got; g != "from b" {
		t.Errorf("read %q, want from b", g)
	}
	if err := l.Write([]byte("to b"), nil); err != nil {
		t.Fatal(err)
	}
	if na, nb := len(a.sent6), len(b.sent6); na != 0 || nb != 1 {
		t.Errorf("wrote %d on the old endpoint and %d on the new, want 0 and 1", na, nb)
	}
	l.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Close did not end the blocked Read")
	}
}
