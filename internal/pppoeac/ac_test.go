package pppoeac

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"e1kbox/appliance/services/pppoe"
)

// linkFunc is a pppoe.Link that hands the client's frames to a function.
type linkFunc func([]byte) error

func (f linkFunc) Send(b []byte) error { return f(b) }

// TestSessionWithClient brings a session up between the AC and the
// appliance's PPPoE client, in memory: the client gets the session, the
// address, peer and DNS server the AC hands out, and its echoes are
// answered.
func TestSessionWithClient(t *testing.T) {
	cfg := Config{MAC: [6]byte{0x02, 0xac, 0, 0, 0, 1}, Name: "bench-ac", Session: 0x4242,
		Addr: [4]byte{100, 64, 0, 2}, Peer: [4]byte{100, 64, 0, 1}, DNS: [4]byte{100, 64, 0, 53}}
	var c *pppoe.Client
	toClient := make(chan []byte, 64)
	ac := New(cfg, func(b []byte) { toClient <- append([]byte(nil), b...) })
	events := make(chan pppoe.Event, 16)
	c, err := pppoe.New(linkFunc(func(b []byte) error { ac.Input(b); return nil }), pppoe.Config{User: "u", Password: "p",
		MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 9}, EchoInterval: 100 * time.Millisecond, Backoff: 50 * time.Millisecond,
		OnEvent: func(ev pppoe.Event) {
			select {
			case events <- ev:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	go func() {
		for {
			select {
			case b := <-toClient:
				c.Input(b)
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			st := ev.Status
			if !ev.Up {
				continue
			}
			want := netip.AddrFrom4(cfg.Addr)
			if st.SessionID != cfg.Session || st.LocalIPv4 != want || st.PeerIPv4 != netip.AddrFrom4(cfg.Peer) || st.DNS1 != netip.AddrFrom4(cfg.DNS) {
				t.Fatalf("session up as %+v, want session %#04x, address %v, peer %v, DNS %v", st, cfg.Session, want, cfg.Peer, cfg.DNS)
			}
			time.Sleep(350 * time.Millisecond)
			if n := ac.Echoes(); n < 2 {
				t.Errorf("the AC answered %d echoes in 350 ms at 100 ms", n)
			}
			if st := c.Status(); st.Phase != pppoe.PhaseUp {
				t.Errorf("session not up after the echoes: %+v", st)
			}
			return
		case <-deadline:
			t.Fatalf("no session within 10 s: %+v", c.Status())
		}
	}
}
