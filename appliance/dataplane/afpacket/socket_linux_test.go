package afpacket

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// frameSize varies test frame sizes over 60..limit bytes.
func frameSize(seq, limit int) int { return 60 + seq*37%(limit-60+1) }

// rxKinds are the RX rings the receive tests run with: TPACKET_V3 blocks
// and a TPACKET_V2 FrameRing.
var rxKinds = []struct {
	name string
	cfg  Config
}{{"blocks", Config{}}, {"frames", Config{FrameRing: true}}}

func TestRXFromPeer(t *testing.T) {
	for _, k := range rxKinds {
		t.Run(k.name, func(t *testing.T) { testRXFromPeer(t, k.cfg) })
	}
}

func testRXFromPeer(t *testing.T, cfg Config) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, cfg)
	peer := v.plain(t, vethA)
	const n = 2000
	// Build the expected frames before sending: the ring must be drained
	// while the peer sends, or its blocks (each retired after at most a
	// timer tick) run out.
	want := make(map[uint32][]byte, n)
	for i := range n {
		want[uint32(i)] = testFrame(macB, macA, 1, uint32(i), frameSize(i, 1514))
	}
	background(t, nil, func(stop <-chan struct{}) error {
		for i := 0; i < n && !stopped(stop); i++ {
			peer.send(t, testFrame(macB, macA, 1, uint32(i), frameSize(i, 1514)))
		}
		return nil
	})
	start := time.Now()
	got := 0
	drain(t, s, 1, n, 10*time.Second, func(p *Packet) {
		_, seq, _ := parseTestFrame(p.Data)
		w, ok := want[seq]
		if !ok {
			t.Errorf("frame %d received twice", seq)
			return
		}
		delete(want, seq)
		got++
		if !bytes.Equal(p.Data, w) {
			t.Errorf("frame %d: data differs (len %d, want %d)", seq, len(p.Data), len(w))
		}
		if p.Len != len(w) || p.Truncated() || p.HasVLAN {
			t.Errorf("frame %d: Len %d Truncated %v HasVLAN %v, want %d false false", seq, p.Len, p.Truncated(), p.HasVLAN, len(w))
		}
		if p.Type != unix.PACKET_OTHERHOST {
			t.Errorf("frame %d: pkttype %d, want PACKET_OTHERHOST", seq, p.Type)
		}
		if ts := p.Time(); ts.Before(start.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("frame %d: timestamp %v outside the test run", seq, ts)
		}
	})
	if got != n {
		t.Fatalf("received %d of %d frames; %+v", got, n, s.Stats())
	}
	st := s.Stats()
	if st.RxPackets < n || st.RxDrops != 0 {
		t.Errorf("Stats: RxPackets %d (want >= %d), RxDrops %d (want 0)", st.RxPackets, n, st.RxDrops)
	}
}

// TestVLANReceive sends tagged frames from the peer. The kernel strips the
// outer tag (veth has rx-vlan offload, and the stack untags in software
// otherwise): it must be reported in the Packet, and Data plus the tag must
// be the frame that was sent. A tag left inline is also accepted.
func TestVLANReceive(t *testing.T) {
	for _, k := range rxKinds {
		t.Run(k.name, func(t *testing.T) { testVLANReceive(t, k.cfg) })
	}
}

func testVLANReceive(t *testing.T, cfg Config) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, cfg)
	peer := v.plain(t, vethA)
	tests := []struct {
		name  string
		frame []byte
		tpid  uint16
		tci   uint16
	}{
		{"dot1q", insertTag(testFrame(macB, macA, 3, 0, 100), 0x8100, 0x2064), 0x8100, 0x2064},
		{"dot1q full size", insertTag(testFrame(macB, macA, 3, 1, 1514), 0x8100, 0xe00a), 0x8100, 0xe00a},
		{"qinq", insertTag(insertTag(testFrame(macB, macA, 3, 2, 200), 0x8100, 7), 0x88a8, 0x0123), 0x88a8, 0x0123},
	}
	for _, tt := range tests {
		peer.send(t, tt.frame)
	}
	got := map[uint32]Packet{}
	drain(t, s, 3, len(tests), 5*time.Second, func(p *Packet) {
		_, seq, _ := parseTestFrame(p.Data)
		q := *p
		q.Data = append([]byte(nil), p.Data...)
		got[seq] = q
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := got[uint32(i)]
			if !ok {
				t.Fatal("frame not received")
			}
			wire := p.Data
			if p.HasVLAN {
				if p.VLANTPID != tt.tpid || p.VLANTCI != tt.tci {
					t.Errorf("tag %#04x/%#04x, want %#04x/%#04x", p.VLANTPID, p.VLANTCI, tt.tpid, tt.tci)
				}
				wire = insertTag(p.Data, p.VLANTPID, p.VLANTCI)
			} else {
				t.Logf("tag arrived inline")
			}
			if diff := cmp.Diff(tt.frame, wire); diff != "" {
				t.Errorf("frame (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIgnoreOutgoing: with the default config a ring does not see frames
// transmitted on its own port; a socket with KeepOutgoing (the control)
// does. The sender goes through the qdisc so that taps see its frames.
func TestIgnoreOutgoing(t *testing.T) {
	v := newVeth(t, 1500)
	tx := v.open(t, vethA, Config{UseQdisc: true, NoRX: true})
	ignoring := v.open(t, vethA, Config{})
	control := v.open(t, vethA, Config{KeepOutgoing: true})
	peer := v.plain(t, vethB)
	const n = 50
	for i := range n {
		if !tx.Append(testFrame(macB, macA, 5, uint32(i), 100)) {
			t.Fatalf("Append %d = false", i)
		}
	}
	if err := tx.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := len(peer.collect(t, 5, n, 5*time.Second)); got != n {
		t.Fatalf("peer received %d of %d frames", got, n)
	}
	outgoing := 0
	if got := drain(t, control, 5, n, 5*time.Second, func(p *Packet) {
		if p.Type == unix.PACKET_OUTGOING {
			outgoing++
		}
	}); got != n || outgoing != n {
		t.Fatalf("control socket saw %d frames (%d outgoing), want %d", got, outgoing, n)
	}
	if got := drain(t, ignoring, 5, 1, 50*time.Millisecond, nil); got != 0 {
		t.Errorf("socket with PACKET_IGNORE_OUTGOING saw %d outgoing frames, want 0", got)
	}
}

// TestJumbo runs 9000-byte MTU frames through both rings.
func TestJumbo(t *testing.T) {
	for _, k := range rxKinds {
		t.Run(k.name, func(t *testing.T) { testJumbo(t, k.cfg) })
	}
}

func testJumbo(t *testing.T, cfg Config) {
	v := newVeth(t, 9000)
	a := v.open(t, vethA, cfg)
	b := v.open(t, vethB, cfg)
	if g := a.Geometry(); g.MTU != 9000 || g.TxFrameSize < 9018+tpHdrLen {
		t.Fatalf("Geometry %+v does not fit MTU 9000", g)
	}
	pa, pb := v.plain(t, vethA), v.plain(t, vethB)

	// RX: the peer sends full-size jumbo frames.
	const n = 50
	for i := range n {
		pa.send(t, testFrame(macB, macA, 6, uint32(i), 9014))
	}
	got := drain(t, b, 6, n, 5*time.Second, func(p *Packet) {
		_, seq, _ := parseTestFrame(p.Data)
		if want := testFrame(macB, macA, 6, seq, 9014); !bytes.Equal(p.Data, want) {
			t.Errorf("jumbo frame %d: %d bytes differ from the %d sent", seq, len(p.Data), len(want))
		}
	})
	if got != n {
		t.Fatalf("received %d of %d jumbo frames", got, n)
	}

	// TX: untagged 9014 and tagged 9018-byte frames through the ring.
	for i := range n {
		f := testFrame(macB, macA, 7, uint32(i), 9014)
		ok := false
		if i%2 == 0 {
			ok = a.Append(f)
		} else {
			ok = a.AppendTagged(f, 0x8100, uint16(i))
		}
		if !ok {
			t.Fatalf("append jumbo frame %d = false", i)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	rs := pb.collect(t, 7, n, 5*time.Second)
	if len(rs) != n {
		t.Fatalf("peer received %d of %d jumbo frames", len(rs), n)
	}
	for i, r := range rs {
		want := testFrame(macB, macA, 7, uint32(i), 9014)
		if i%2 == 1 {
			want = insertTag(want, 0x8100, uint16(i))
		}
		if !bytes.Equal(r.wire, want) {
			t.Errorf("jumbo frame %d: peer got %d bytes, want %d", i, len(r.wire), len(want))
		}
	}
	if a.Append(testFrame(macB, macA, 7, 0, 9015)) {
		t.Error("Append(9015-byte untagged frame) = true with MTU 9000")
	}
}

// TestStatsDrops: a tiny ring that nobody drains overflows; the kernel's
// drop counter shows it, and Stats keeps accumulating across reads.
func TestStatsDrops(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{BlockSize: 4096, BlockCount: 2, NoTX: true})
	peer := v.plain(t, vethA)
	for i := range 100 {
		peer.send(t, testFrame(macB, macA, 8, uint32(i), 1000))
	}
	var first Stats
	deadline := time.Now().Add(5 * time.Second)
	for {
		first = s.Stats()
		if first.RxPackets+first.RxDrops >= 100 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if first.RxDrops == 0 || first.RxFreezes == 0 {
		t.Fatalf("Stats after overflowing a 2-block ring: %+v, want drops and freezes", first)
	}
	// A 4 KiB block holds 3 frames of 1000 bytes (1088 bytes each with the
	// kernel's per-frame header, after the 48-byte block header).
	if capacity := uint64(2 * ((4096 - blockHdrLen) / alignUp(rxMacOff+1000, tpAlign))); first.RxPackets > capacity {
		t.Errorf("RxPackets = %d, more than the %d frames a 2x4KiB ring can hold", first.RxPackets, capacity)
	}
	for i := range 20 {
		peer.send(t, testFrame(macB, macA, 8, uint32(100+i), 1000))
	}
	time.Sleep(50 * time.Millisecond)
	second := s.Stats()
	if second.RxDrops < first.RxDrops+20 {
		t.Errorf("RxDrops %d after 20 more frames, want >= %d (accumulated)", second.RxDrops, first.RxDrops+20)
	}
}

// TestFrameRingLatency: a FrameRing hands a lone frame over at once; a
// block ring holds it until its block retires.
func TestFrameRingLatency(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		min  time.Duration // the least the frame must wait
		max  time.Duration
	}{
		{"blocks", Config{BlockTimeout: 300 * time.Millisecond}, 0, time.Second},
		{"frames", Config{FrameRing: true, RxFrames: 64}, 0, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVeth(t, 1500)
			s := v.open(t, vethB, tc.cfg)
			peer := v.plain(t, vethA)
			var worst, total time.Duration
			const n = 5
			for i := range n {
				time.Sleep(20 * time.Millisecond)
				sent := time.Now()
				peer.send(t, testFrame(macB, macA, 9, uint32(i), 100))
				if got := drain(t, s, 9, 1, 2*time.Second, func(*Packet) {}); got != 1 {
					t.Fatalf("frame %d not received", i)
				}
				d := time.Since(sent)
				worst, total = max(worst, d), total+d
			}
			t.Logf("%s: %d lone frames, mean %v, worst %v", tc.name, n, total/n, worst)
			if tc.cfg.FrameRing && worst > tc.max {
				t.Errorf("a lone frame waited %v in a FrameRing, want under %v", worst, tc.max)
			}
			if !tc.cfg.FrameRing && total/n < 20*time.Millisecond {
				t.Errorf("lone frames waited %v on average in a ring of blocks retired every 300 ms: the test does not see the retire timeout", total/n)
			}
		})
	}
}
