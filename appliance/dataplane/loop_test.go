package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
)

// withLoopGuard gives every port's fwd of b the engine's loop protection,
// each its port's prober, as the engine wires them.
func withLoopGuard(t *testing.T, b *testBridge) *loopGuard {
	t.Helper()
	g, err := newLoopGuard()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range b.fwds[1:] {
		w.loop, w.prober = g, true
	}
	return g
}

// sendProbe runs a batch of port from's fwd at a new generation and returns
// the probe it sent out of its own port (nil if none).
func sendProbe(b *testBridge, g *loopGuard, from uint16) []byte {
	g.gen.Add(1)
	w := b.fwds[from]
	tx := b.tx[from][from]
	n := tx.n
	b.clock += int64(time.Millisecond)
	w.begin(time.Now().UnixNano(), b.clock)
	w.probe()
	if tx.n == n {
		return nil
	}
	p := slices.Clone(tx.slots[n][:tx.lens[n]])
	tx.n = n
	return p
}

func TestLoopProtection(t *testing.T) {
	tests := []struct {
		name        string
		probeFrom   uint16
		probeIn     uint16
		foreign     bool // a probe of another engine
		off         bool
		wantBlocked []uint16
	}{
		{name: "a probe of port 1 back on port 2 blocks port 2", probeFrom: 1, probeIn: 2, wantBlocked: []uint16{2}},
		{name: "a probe of port 2 back on port 1 blocks port 2 too", probeFrom: 2, probeIn: 1, wantBlocked: []uint16{2}},
		{name: "a probe back on its own port blocks that port", probeFrom: 1, probeIn: 1, wantBlocked: []uint16{1}},
		{name: "another box's probe is forwarded", probeFrom: 1, probeIn: 2, foreign: true},
		{name: "loop protection off", probeFrom: 1, probeIn: 3, off: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBridge(t, 3, true, "", false, nil) // ports 1-3, host 4
			g := withLoopGuard(t, b)
			g.off.Store(tt.off)
			p := sendProbe(b, g, tt.probeFrom)
			if tt.off {
				if p != nil {
					t.Fatalf("loop protection off, but port %d sent a probe", tt.probeFrom)
				}
				g.off.Store(false)
				p = sendProbe(b, g, tt.probeFrom)
				g.off.Store(true)
			}
			if p == nil {
				t.Fatalf("port %d sent no probe", tt.probeFrom)
			}
			if tt.foreign {
				for _, w := range b.fwds[1:] {
					w.loop = &loopGuard{nonce: [8]byte{1}}
				}
			}
			out := b.rx(tt.probeIn, p, false, frame.VLANTag{})
			wantOut := []int{}
			if tt.foreign {
				wantOut = []int{1, 3, 4}
			}
			if diff := cmp.Diff(wantOut, got(out)); diff != "" {
				t.Errorf("the probe went to (-want +got):\n%s", diff)
			}
			var blocked []uint16
			for _, pi := range b.ports[1:] {
				if pi.loop.blocked() {
					blocked = append(blocked, pi.id)
				}
			}
			if diff := cmp.Diff(tt.wantBlocked, blocked); diff != "" {
				t.Errorf("blocked ports (-want +got):\n%s", diff)
			}
			if !tt.foreign && b.drops()[DropLoop] != 1 {
				t.Errorf("drops %v, want the probe counted as loop", b.drops())
			}
		})
	}
}

// TestBlockedPort checks what a blocked port does and that it opens again
// loopHold after the last probe came back.
func TestBlockedPort(t *testing.T) {
	b := newTestBridge(t, 3, true, "", false, nil)
	g := withLoopGuard(t, b)
	b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{}) // macB is behind port 2
	b.rx(3, sendProbe(b, g, 2), false, frame.VLANTag{})    // a loop between 2 and 3 blocks 3
	b.rx(2, sendProbe(b, g, 1), false, frame.VLANTag{})    // and one between 1 and 2 blocks 2
	steps := []struct {
		name     string
		in       uint16
		frame    []byte
		wantOut  []int
		wantDrop Drop
	}{
		{"a broadcast from port 1 skips the blocked ports", 1, arpFrame(bcast, macA), []int{4}, 0},
		{"a frame received on a blocked port is dropped", 3, arpFrame(bcast, macC), []int{}, DropLoop},
		{"unicast to a MAC behind a blocked port is dropped", 1, tcpFrame(macB, macA, 1, 2, frame.TCPSyn), []int{}, DropLoop},
	}
	for _, s := range steps {
		before := b.drops()
		out := b.rx(s.in, s.frame, false, frame.VLANTag{})
		if diff := cmp.Diff(s.wantOut, got(out)); diff != "" {
			t.Errorf("%s: output ports (-want +got):\n%s", s.name, diff)
		}
		if after := b.drops(); s.wantDrop != 0 && after[s.wantDrop] != before[s.wantDrop]+1 {
			t.Errorf("%s: drops %v, want one more %s", s.name, after, s.wantDrop)
		}
	}
	// A blocked port keeps probing: the loop's probes keep it blocked.
	if sendProbe(b, g, 3) == nil {
		t.Fatal("blocked port 3 sent no probe")
	}
	b.clock += int64(loopHold) - int64(100*time.Millisecond)
	b.rx(3, sendProbe(b, g, 2), false, frame.VLANTag{})
	b.clock += int64(loopHold) - int64(100*time.Millisecond)
	b.openExpired() // the monitor's poll
	if !b.ports[3].loop.blocked() || b.ports[2].loop.blocked() {
		t.Fatalf("after %v: port 3 blocked %v (probes kept coming), port 2 blocked %v (none came); want true, false",
			2*loopHold, b.ports[3].loop.blocked(), b.ports[2].loop.blocked())
	}
	b.clock += int64(200 * time.Millisecond)
	b.openExpired()
	if out := b.rx(1, arpFrame(bcast, macA), false, frame.VLANTag{}); !slices.Equal(got(out), []int{2, 3, 4}) {
		t.Errorf("after the loop went, a broadcast went to %v, want [2 3 4]", got(out))
	}
}

func TestProbeSending(t *testing.T) {
	b := newTestBridge(t, 2, true, "", false, nil) // ports 1-2, host 3
	g := withLoopGuard(t, b)
	p := sendProbe(b, g, 1)
	var f frame.Frame
	if err := frame.Parse(p, &f); err != nil {
		t.Fatal(err)
	}
	lp, ok := frame.ParseLoopProbe(p, &f)
	if !ok || lp != (frame.LoopProbe{Nonce: g.nonce, Port: 1}) || f.Src != g.mac {
		t.Fatalf("probe %+v, %v from %x; want port 1, this engine's nonce, from %x", lp, ok, f.Src, g.mac)
	}
	w := b.fwds[1]
	w.probe() // same generation: nothing more
	if n := b.tx[1][1].n; n != 0 {
		t.Errorf("a second probe in one generation: %d frames queued", n)
	}
	if sendProbe(b, g, 3) != nil {
		t.Error("the host port sent a probe")
	}
	b.ports[2].up.Store(false)
	if sendProbe(b, g, 2) != nil {
		t.Error("a port whose link is down sent a probe")
	}
	w.prober = false
	if sendProbe(b, g, 1) != nil {
		t.Error("a worker that is not its port's prober sent a probe")
	}
}

// TestLoopProbeVLAN: a probe goes out untagged on an access port or a
// trunk with a native VLAN, and tagged with the lowest allowed VLAN on a
// trunk without one; coming back tagged on another port, it is found.
func TestLoopProbeVLAN(t *testing.T) {
	b := newTestBridge(t, 3, false, "", false, func(c *Config) {
		c.Ports[0].VLANs = &VLANs{Allowed: []uint16{30, 20, 40}}
		c.Ports[1].VLANs = &VLANs{Native: 10, Allowed: []uint16{20}}
	})
	g := withLoopGuard(t, b)
	for _, tt := range []struct {
		port uint16
		vid  uint16 // 0: untagged
	}{{1, 20}, {2, 0}, {3, 0}} {
		p := sendProbe(b, g, tt.port)
		var f frame.Frame
		if err := frame.Parse(p, &f); err != nil {
			t.Fatalf("port %d's probe: %v", tt.port, err)
		}
		var vid uint16
		if f.NTags > 0 {
			vid = f.Tags[0].TCI & 0xfff
		}
		if vid != tt.vid || f.EtherType != frame.EtherTypeLoopback {
			t.Errorf("port %d's probe on VLAN %d (ethertype %#x), want %d", tt.port, vid, f.EtherType, tt.vid)
		}
		if tt.port == 1 {
			// Back in on port 3 (VLAN-unaware: it keeps its tag).
			b.rx(3, p, false, frame.VLANTag{})
			if !b.ports[3].loop.blocked() {
				t.Errorf("port 1's tagged probe back on port 3 did not block port 3")
			}
		}
	}
}

// openExpired is the monitor's turn (settleLoops) on b's ports.
func (b *testBridge) openExpired() {
	settleLoops(b.ports, b.clock, false, func() { b.fdb.Flush(0, false) })
}

// TestBlockedPortOpensAfterFlush: a port whose hold is over stays blocked
// until the monitor has made the FDB forget what it learned while the
// loop stood, so that no frame follows an entry learned on the detour.
func TestBlockedPortOpensAfterFlush(t *testing.T) {
	b := newTestBridge(t, 3, false, "", false, nil)
	g := withLoopGuard(t, b)
	b.rx(3, sendProbe(b, g, 2), false, frame.VLANTag{}) // a loop between 2 and 3 blocks 3
	b.openExpired()
	if !b.ports[3].loop.blocked() || !b.ports[3].loop.wasBlocked {
		t.Fatal("port 3 not blocked after its probe came back")
	}
	// While the loop stands, macB's frames come in by the detour, on port 1.
	b.rx(1, arpFrame(bcast, macB), false, frame.VLANTag{})
	b.clock += int64(loopHold) + int64(time.Millisecond)
	if !b.ports[3].loop.blocked() {
		t.Fatal("port 3 opened by itself when its hold was over; want the monitor to open it")
	}
	if out := b.rx(2, tcpFrame(macB, macA, 1, 2, frame.TCPSyn), false, frame.VLANTag{}); !slices.Equal(got(out), []int{1}) {
		t.Fatalf("before the monitor's turn, a frame to macB went to %v, want [1] (port 3 still blocked)", got(out))
	}
	changed := settleLoops(b.ports, b.clock, false, func() { b.fdb.Flush(0, false) })
	if len(changed) != 1 || changed[0].id != 3 || b.ports[3].loop.blocked() {
		t.Fatalf("the monitor's turn changed %d ports, port 3 blocked %v; want port 3 opened", len(changed), b.ports[3].loop.blocked())
	}
	if out := b.rx(2, tcpFrame(macB, macA, 1, 2, frame.TCPSyn), false, frame.VLANTag{}); !slices.Equal(got(out), []int{1, 3}) {
		t.Errorf("after the port opened, a frame to macB went to %v, want flooded to [1 3] (the detour's entry forgotten)", got(out))
	}
}
