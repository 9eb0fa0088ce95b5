package router

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/appliance/services/pppoe"
)

// fakeLink is a PPPoE endpoint that records what the client sends and
// hands Receive the frames put in in.
type fakeLink struct {
	mu    sync.Mutex
	sent  [][]byte
	in    chan []byte
	sent6 [][]byte    // DHCPv6 written
	in6   chan []byte // DHCPv6 to read
}

func (l *fakeLink) Send(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, slices.Clone(b))
	return nil
}

func (l *fakeLink) Receive(ctx context.Context, input func([]byte)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-l.in:
			input(b)
		}
	}
}

func (l *fakeLink) MAC() net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, 1} }

// DHCPv6 is a transport that reads from l.in6 and records writes in
// l.sent6.
func (l *fakeLink) DHCPv6() dhcpclient.Transport {
	return &fakeTransport{link: l, done: make(chan struct{})}
}

type fakeTransport struct {
	link *fakeLink
	done chan struct{}
	once sync.Once
}

func (f *fakeTransport) Read(b []byte) (int, bool, error) {
	select {
	case p := <-f.link.in6:
		return copy(b, p), false, nil
	case <-f.done:
		return 0, false, net.ErrClosed
	}
}

func (f *fakeTransport) Write(b []byte, _ net.HardwareAddr) error {
	f.link.mu.Lock()
	defer f.link.mu.Unlock()
	f.link.sent6 = append(f.link.sent6, slices.Clone(b))
	return nil
}

func (f *fakeTransport) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}

func (l *fakeLink) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// codes are the PPPoE discovery codes of the frames sent.
func (l *fakeLink) codes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cs []byte
	for _, b := range l.sent {
		if len(b) > 15 && binary.BigEndian.Uint16(b[12:]) == 0x8863 {
			cs = append(cs, b[15])
		}
	}
	return cs
}

const codePADI = 0x09

func pppoeConfig(t *testing.T, password string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(`{"version": 2, "mode": "nat", "dhcp": {"enabled": false}, "dns": {"enabled": false}, "ipv6": {"enabled": false}, "time": {"servers": ["127.0.0.1"]},
		"nat": {"wan": {"pppoe": {"username": "u", "password": "` + password + `"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRouterPPPoE: nat.wan.pppoe runs the client on the dataplane's link
// (the plane hears of the PPPoE WAN before the first PADI); its session
// feeds the plane and the DNS upstreams; a stale run's status is
// dropped; a config without it stops the client and tells the plane.
func TestRouterPPPoE(t *testing.T) {
	link := &fakeLink{in: make(chan []byte)}
	var mu sync.Mutex
	var got []*pppoe.Status
	r := New(Options{Log: slog.New(slog.DiscardHandler), State: t.TempDir(), Hostname: "box",
		PPPoELink: func() (PPPoELink, error) { return link, nil },
		OnPPPoE: func(s *pppoe.Status) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}})
	t.Cleanup(r.Close)
	if err := r.Apply(pppoeConfig(t, "p")); err != nil {
		t.Fatal(err)
	}
	if l := r.Live(); l == nil || l.PPPoE == nil {
		t.Fatalf("Live %+v: want the PPPoE client", l)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(link.codes(), codePADI) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(link.codes(), codePADI) {
		t.Fatalf("no PADI sent: %x", link.codes())
	}
	mu.Lock()
	if len(got) != 1 || got[0] == nil || got[0].Phase == pppoe.PhaseUp {
		t.Errorf("the plane got %+v first, want one status not up", got)
	}
	mu.Unlock()

	dns := netip.MustParseAddr("198.51.100.53")
	up := pppoe.Status{Phase: pppoe.PhaseUp, SessionID: 7, LocalIPv4: netip.MustParseAddr("203.0.113.9"),
		PeerIPv4: netip.MustParseAddr("203.0.113.1"), DNS1: dns}
	r.mu.Lock()
	gen := r.ppp.gen
	r.mu.Unlock()
	r.pppoeChanged(gen-1, &pppoeState{up}) // a stopped run's
	r.pppoeChanged(gen, &pppoeState{up})
	r.mu.Lock()
	ups := r.upstreams()
	r.mu.Unlock()
	if diff := cmp.Diff([]netip.Addr{dns}, ups, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("DNS upstreams (-want +got):\n%s", diff)
	}
	mu.Lock()
	if len(got) != 2 || got[1].SessionID != 7 {
		t.Errorf("the plane got %+v, want the session once (the stale one dropped)", got)
	}
	mu.Unlock()

	// A new password restarts the client.
	if err := r.Apply(pppoeConfig(t, "q")); err != nil {
		t.Fatal(err)
	}
	if r.Live().PPPoE == nil {
		t.Error("no PPPoE client after the password changed")
	}
	noPPPoE, err := config.Parse([]byte(`{"version": 2, "mode": "nat", "dhcp": {"enabled": false}, "dns": {"enabled": false}, "ipv6": {"enabled": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(noPPPoE); err != nil {
		t.Fatal(err)
	}
	if l := r.Live(); l.PPPoE != nil {
		t.Errorf("Live.PPPoE %v after nat.wan.pppoe was removed", l.PPPoE)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(got); n == 0 || got[n-1] != nil {
		t.Errorf("the plane's last status %+v, want nil (no PPPoE WAN)", got[n-1])
	}
}

// TestLiveLink: the client's link follows the engine's endpoint when the
// dataplane restarts: sends go to the new one, and its frames are
// received.
func TestLiveLink(t *testing.T) {
	a, b := &fakeLink{in: make(chan []byte)}, &fakeLink{in: make(chan []byte)}
	var mu sync.Mutex
	cur := a
	l := &liveLink{get: func() (PPPoELink, error) {
		mu.Lock()
		defer mu.Unlock()
		return cur, nil
	}, every: 10 * time.Millisecond}
	got := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Receive(ctx, func(f []byte) { got <- string(f) }); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	a.in <- []byte("from a")
	if g := <-got; g != "from a" {
		t.Fatalf("received %q", g)
	}
	mu.Lock()
	cur = b
	mu.Unlock()
	if err := l.Send([]byte("to b")); err != nil {
		t.Fatal(err)
	}
	if na, nb := a.count(), b.count(); na != 0 || nb != 1 {
		t.Errorf("sent %d on the old endpoint and %d on the new, want 0 and 1", na, nb)
	}
	select {
	case b.in <- []byte("from b"):
	case <-time.After(5 * time.Second):
		t.Fatal("nothing receives from the new endpoint")
	}
	if g := <-got; g != "from b" {
		t.Errorf("received %q, want from b", g)
	}
}
