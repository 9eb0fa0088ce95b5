package afpacket

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/frame/frametest"
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

// TestTXBurstLargerThanRing sends many more frames than the TX ring holds:
// Append reports a full ring, Flush empties it, and every frame reaches the
// peer in order with the right bytes.
func TestTXBurstLargerThanRing(t *testing.T) {
	for _, c := range []bool{false, true} {
		t.Run(fmt.Sprintf("TxCopy=%v", c), func(t *testing.T) { testTXBurstLargerThanRing(t, c) })
	}
}

func testTXBurstLargerThanRing(t *testing.T, txCopy bool) {
	v := newVeth(t, 1500)
	s := v.open(t, vethA, Config{TxFrames: 64, NoRX: true, TxCopy: txCopy})
	peer := v.plain(t, vethB)
	ring := s.Geometry().TxFrames
	n := 20 * ring
	fulls := 0
	for i := 0; i < n; {
		f := testFrame(macB, macA, 2, uint32(i), frameSize(i, 1514))
		if s.Append(f) {
			i++
			continue
		}
		fulls++
		if err := s.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if fulls < n/ring-1 {
		t.Errorf("Append reported a full ring %d times, want at least %d", fulls, n/ring-1)
	}
	got := peer.collect(t, 2, n, 10*time.Second)
	if len(got) != n {
		t.Fatalf("peer received %d of %d frames", len(got), n)
	}
	for i, r := range got {
		want := testFrame(macB, macA, 2, uint32(i), frameSize(i, 1514))
		if !bytes.Equal(r.wire, want) {
			_, seq, _ := parseTestFrame(r.wire)
			t.Fatalf("frame %d: got seq %d len %d, want len %d", i, seq, len(r.wire), len(want))
		}
	}
	if st := s.Stats(); st.TxSent != uint64(n) {
		t.Errorf("Stats.TxSent = %d, want %d", st.TxSent, n)
	}
	if q := s.Queued(); q != 0 {
		t.Errorf("Queued() = %d after Flush, want 0", q)
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

// TestAppendTagged checks that AppendTagged puts the tag back on the wire:
// the peer's kernel sees a tagged frame (it reports the tag out of band).
func TestAppendTagged(t *testing.T) {
	for _, c := range []bool{false, true} {
		t.Run(fmt.Sprintf("TxCopy=%v", c), func(t *testing.T) { testAppendTagged(t, c) })
	}
}

func testAppendTagged(t *testing.T, txCopy bool) {
	v := newVeth(t, 1500)
	s := v.open(t, vethA, Config{TxCopy: txCopy})
	peer := v.plain(t, vethB)
	frames := [][]byte{
		testFrame(macB, macA, 4, 0, 60),
		testFrame(macB, macA, 4, 1, 1514), // 1518 bytes on the wire: only allowed tagged
	}
	tcis := []uint16{0x0005, 0xa00b}
	for i, f := range frames {
		if !s.AppendTagged(f, 0x8100, tcis[i]) {
			t.Fatalf("AppendTagged(frame %d) = false", i)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	got := peer.collect(t, 4, len(frames), 5*time.Second)
	if len(got) != len(frames) {
		t.Fatalf("peer received %d of %d frames", len(got), len(frames))
	}
	for i, r := range got {
		if diff := cmp.Diff(insertTag(frames[i], 0x8100, tcis[i]), r.wire); diff != "" {
			t.Errorf("frame %d (-want +got):\n%s", i, diff)
		}
	}
	// 1514 bytes plus an 802.1ad tag exceeds MTU+14, which the kernel only
	// allows for 802.1Q: rejected and counted, never queued.
	if s.AppendTagged(frames[1], 0x88a8, 1) {
		t.Error("AppendTagged(1518-byte 802.1ad frame) = true, want false")
	}
	if st := s.Stats(); st.TxOversize != 1 {
		t.Errorf("Stats.TxOversize = %d, want 1", st.TxOversize)
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

// TestFanoutHash: two sockets in one hash fanout group together receive all
// frames of many flows, each flow on exactly one socket, and both get some.
func TestFanoutHash(t *testing.T) {
	v := newVeth(t, 1500)
	fo := Fanout{ID: 0x4a11, Mode: FanoutHash, Defrag: true}
	s1 := v.open(t, vethB, Config{Fanout: &fo})
	s2 := v.open(t, vethB, Config{})
	if err := s2.SetFanout(fo); err != nil {
		t.Fatalf("SetFanout: %v", err)
	}
	peer := v.plain(t, vethA)
	const flows, perFlow = 32, 20
	for i := range flows * perFlow {
		peer.send(t, udpFrame(uint16(i%flows), uint32(i)))
	}
	type result struct {
		seqs  map[uint32]bool
		flows map[uint16]bool
	}
	collect := func(s *Socket) result {
		r := result{seqs: map[uint32]bool{}, flows: map[uint16]bool{}}
		deadline := time.Now().Add(300 * time.Millisecond)
		var p Packet
		for time.Now().Before(deadline) {
			b, err := s.NextBlock(20 * time.Millisecond)
			if err != nil {
				t.Errorf("NextBlock: %v", err)
				return r
			}
			if b == nil {
				continue
			}
			for b.Next(&p) {
				if flow, seq, ok := parseUDPFrame(p.Data); ok {
					r.seqs[seq] = true
					r.flows[flow] = true
				}
			}
			s.ReleaseBlock()
		}
		return r
	}
	var r1, r2 result
	var wg sync.WaitGroup
	wg.Go(func() { r1 = collect(s1) })
	wg.Go(func() { r2 = collect(s2) })
	wg.Wait()
	if len(r1.seqs)+len(r2.seqs) != flows*perFlow {
		t.Errorf("sockets received %d + %d frames, want %d in total", len(r1.seqs), len(r2.seqs), flows*perFlow)
	}
	for seq := range r1.seqs {
		if r2.seqs[seq] {
			t.Errorf("frame %d delivered to both sockets", seq)
		}
	}
	for f := range r1.flows {
		if r2.flows[f] {
			t.Errorf("flow %d split over both sockets", f)
		}
	}
	if len(r1.flows) == 0 || len(r2.flows) == 0 {
		t.Errorf("flows per socket %d and %d: hash fanout did not spread %d flows", len(r1.flows), len(r2.flows), flows)
	}
}

// udpFrame is an IPv4/UDP frame of flow f (source port 10000+f), seq in the
// payload. The UDP checksum is left zero (none): nothing on the path
// verifies it.
func udpFrame(f uint16, seq uint32) []byte {
	payload := []byte{'f', 'o', byte(f >> 8), byte(f), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
	ip := frametest.IPv4{Src: [4]byte{198, 18, 0, 1}, Dst: [4]byte{198, 18, 0, 2}}
	return frametest.Frame([6]byte(macB), [6]byte(macA), frametest.EtherTypeIPv4, ip.UDPPacketNoChecksum(10000+f, 9, payload))
}

func parseUDPFrame(b []byte) (flow uint16, seq uint32, ok bool) {
	if len(b) < 50 || b[12] != 0x08 || b[13] != 0 || b[14+9] != 17 || b[42] != 'f' || b[43] != 'o' {
		return 0, 0, false
	}
	return uint16(b[44])<<8 | uint16(b[45]), uint32(b[46])<<24 | uint32(b[47])<<16 | uint32(b[48])<<8 | uint32(b[49]), true
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

// TestCloseUnblocksReader: Close wakes a goroutine blocked in NextBlock
// without a timeout, and the socket refuses use afterwards.
func TestCloseUnblocksReader(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	errc, _ := background(t, s, func(<-chan struct{}) error {
		b, err := s.NextBlock(-1)
		if b != nil {
			err = fmt.Errorf("NextBlock returned a block (%d frames) on an idle port", b.Len())
		}
		return err
	})
	time.Sleep(50 * time.Millisecond) // let it block in poll
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("NextBlock returned %v, want ErrClosed", err)
		}
		t.Logf("reader woke %v after Close", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("NextBlock still blocked 2s after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.NextBlock(0); !errors.Is(err, ErrClosed) {
		t.Errorf("NextBlock after Close: %v, want ErrClosed", err)
	}
	if s.Append(testFrame(macB, macA, 9, 0, 60)) {
		t.Error("Append after Close = true")
	}
	if s.fd != -1 || s.mem != nil {
		t.Errorf("after Close fd=%d mapped=%v, want released", s.fd, s.mem != nil)
	}
}

// TestWake: Wake ends a wait without a block, once (the next wait runs
// to its timeout), and a Close after it still ends the next wait with
// ErrClosed.
func TestWake(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	type result struct {
		b   *Block
		err error
		d   time.Duration
	}
	wait := func(timeout time.Duration) chan result {
		c := make(chan result, 1)
		background(t, s, func(<-chan struct{}) error {
			start := time.Now()
			b, err := s.NextBlock(timeout)
			c <- result{b, err, time.Since(start)}
			return nil
		})
		return c
	}
	c := wait(10 * time.Second)
	time.Sleep(50 * time.Millisecond) // let it park
	if err := s.Wake(); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	select {
	case r := <-c:
		if r.b != nil || r.err != nil {
			t.Fatalf("NextBlock after Wake = %v, %v; want no block, no error", r.b, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("NextBlock still waiting 2 s after Wake")
	}
	// The wake was taken: the next wait runs to its timeout.
	if r := <-wait(200 * time.Millisecond); r.b != nil || r.err != nil || r.d < 150*time.Millisecond {
		t.Errorf("NextBlock(200ms) after a taken Wake = %v, %v after %v; want its timeout", r.b, r.err, r.d)
	}
	// Woken and closed before the next wait: Close wins.
	if err := s.Wake(); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := <-wait(time.Second); !errors.Is(r.err, ErrClosed) {
		t.Errorf("NextBlock after Wake and Close = %v, want ErrClosed", r.err)
	}
	if err := s.Wake(); !errors.Is(err, ErrClosed) {
		t.Errorf("Wake after Close = %v, want ErrClosed", err)
	}
}

// TestCloseWhileBlockHeld: the mapping survives Close until the holder
// releases its block.
func TestCloseWhileBlockHeld(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	peer := v.plain(t, vethA)
	peer.send(t, testFrame(macB, macA, 10, 0, 100))
	var b *Block
	deadline := time.Now().Add(5 * time.Second)
	for b == nil && time.Now().Before(deadline) {
		var err error
		if b, err = s.NextBlock(50 * time.Millisecond); err != nil {
			t.Fatalf("NextBlock: %v", err)
		}
	}
	if b == nil {
		t.Fatal("no block")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.mem == nil {
		t.Fatal("ring unmapped while a block is held")
	}
	var p Packet
	if !b.Next(&p) || len(p.Data) == 0 {
		t.Fatal("held block unreadable after Close")
	}
	s.ReleaseBlock()
	if s.mem != nil || s.fd != -1 {
		t.Error("ring still mapped after the held block was released")
	}
}

// TestReflector: frames from A go into B's RX ring and come back out of B's
// TX ring, one Flush per block, as the dataplane forwards.
func TestReflector(t *testing.T) {
	v := newVeth(t, 1500)
	a := v.open(t, vethA, Config{})
	b := v.open(t, vethB, Config{})
	const n = 3000
	done, _ := background(t, b, func(stop <-chan struct{}) error {
		var p Packet
		back := 0
		deadline := time.Now().Add(10 * time.Second)
		for back < n && time.Now().Before(deadline) && !stopped(stop) {
			blk, err := b.NextBlock(20 * time.Millisecond)
			if err != nil {
				return err
			}
			if blk == nil {
				continue
			}
			for blk.Next(&p) {
				if _, _, ok := parseTestFrame(p.Data); !ok {
					continue
				}
				for !b.Append(p.Data) {
					if err := b.Flush(); err != nil {
						return err
					}
				}
				back++
			}
			b.ReleaseBlock()
			if err := b.Flush(); err != nil {
				return err
			}
		}
		return nil
	})
	sent, stopSending := background(t, nil, func(stop <-chan struct{}) error {
		for i := 0; i < n && !stopped(stop); {
			if a.Append(testFrame(macB, macA, 11, uint32(i), frameSize(i, 1514))) {
				i++
				if i%200 == 0 {
					if err := a.Flush(); err != nil {
						return fmt.Errorf("Flush: %w", err)
					}
				}
				continue
			}
			if err := a.Flush(); err != nil {
				return fmt.Errorf("Flush: %w", err)
			}
		}
		if err := a.Flush(); err != nil {
			return fmt.Errorf("Flush: %w", err)
		}
		return nil
	})
	seen := make([]bool, n)
	got := drain(t, a, 11, n, 10*time.Second, func(p *Packet) {
		_, seq, _ := parseTestFrame(p.Data)
		if int(seq) >= n || seen[seq] {
			t.Errorf("unexpected or duplicate frame %d", seq)
			return
		}
		seen[seq] = true
		if want := testFrame(macB, macA, 11, seq, frameSize(int(seq), 1514)); !bytes.Equal(p.Data, want) {
			t.Errorf("frame %d came back altered", seq)
		}
	})
	stopSending()
	if err := <-sent; err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("reflector: %v", err)
	}
	if got != n {
		t.Fatalf("A received %d of %d reflected frames; A stats %+v, B stats %+v", got, n, a.Stats(), b.Stats())
	}
}

// TestWrongFormatRecovery lowers the MTU under an open socket so that the
// kernel rejects a queued frame (TP_STATUS_WRONG_FORMAT). The frame is
// dropped and counted, and the frames queued behind it still go out in
// order.
func TestWrongFormatRecovery(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethA, Config{NoRX: true, TxFrames: 16})
	peer := v.plain(t, vethB)
	v.ns.IP(t, "link", "set", vethA, "mtu", "1000")
	sizes := []int{100, 1400, 200, 300, 1400, 400}
	for i, n := range sizes {
		if !s.Append(testFrame(macB, macA, 12, uint32(i), n)) {
			t.Fatalf("Append %d = false", i)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	// Wrap around the ring a few times to prove the slots are sane.
	g := s.Geometry()
	for i := len(sizes); i < len(sizes)+3*g.TxFrames; i++ {
		for !s.Append(testFrame(macB, macA, 12, uint32(i), 100)) {
			if err := s.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	want := []uint32{0, 2, 3, 5}
	for i := len(sizes); i < len(sizes)+3*g.TxFrames; i++ {
		want = append(want, uint32(i))
	}
	rs := peer.collect(t, 12, len(want), 5*time.Second)
	var got []uint32
	for _, r := range rs {
		_, seq, _ := parseTestFrame(r.wire)
		got = append(got, seq)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sequence at the peer (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.TxWrongFormat != 2 {
		t.Errorf("Stats.TxWrongFormat = %d, want 2 (%+v)", st.TxWrongFormat, st)
	}
}

// TestTxSlotCommit builds a frame in place.
func TestTxSlotCommit(t *testing.T) {
	for _, c := range []bool{false, true} {
		t.Run(fmt.Sprintf("TxCopy=%v", c), func(t *testing.T) { testTxSlotCommit(t, c) })
	}
}

func testTxSlotCommit(t *testing.T, txCopy bool) {
	v := newVeth(t, 1500)
	s := v.open(t, vethA, Config{NoRX: true, TxCopy: txCopy})
	peer := v.plain(t, vethB)
	want := testFrame(macB, macA, 13, 0, 300)
	buf := s.TxSlot()
	if len(buf) < s.Geometry().MaxFrameLen() {
		t.Fatalf("TxSlot len %d < MaxFrameLen %d", len(buf), s.Geometry().MaxFrameLen())
	}
	copy(buf, want)
	if !s.TxCommit(len(want)) {
		t.Fatal("TxCommit = false")
	}
	if s.TxCommit(10) {
		t.Error("TxCommit(10) = true for a runt frame")
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	rs := peer.collect(t, 13, 1, 5*time.Second)
	if len(rs) != 1 || !bytes.Equal(rs[0].wire, want) {
		t.Fatalf("peer got %d frames, want the built one", len(rs))
	}
	if st := s.Stats(); st.TxRunt != 1 {
		t.Errorf("Stats.TxRunt = %d, want 1", st.TxRunt)
	}
}

func TestOpenErrors(t *testing.T) {
	requireNetAdmin(t)
	if _, err := Open("afpt-no-such-if", Config{}); err == nil {
		t.Error("Open(missing interface) succeeded")
	}
	v := newVeth(t, 1500)
	var err error
	v.ns.Do(t, func() { _, err = Open(vethA, Config{BlockSize: 1000}) })
	if !errors.Is(err, ErrConfig) {
		t.Errorf("Open with a 1000-byte block: %v, want ErrConfig", err)
	}
	s := v.open(t, vethA, Config{NoTX: true})
	if s.Append(testFrame(macB, macA, 0, 0, 60)) {
		t.Error("Append on an RX-only socket = true")
	}
	if err := s.Flush(); !errors.Is(err, ErrNoRing) {
		t.Errorf("Flush on an RX-only socket: %v, want ErrNoRing", err)
	}
	s2 := v.open(t, vethA, Config{NoRX: true})
	if _, err := s2.NextBlock(0); !errors.Is(err, ErrNoRing) {
		t.Errorf("NextBlock on a TX-only socket: %v, want ErrNoRing", err)
	}
}

// TestLinkDown: taking the interface down wakes the reader with ENETDOWN.
func TestLinkDown(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	errc, _ := background(t, s, func(<-chan struct{}) error {
		_, err := s.NextBlock(5 * time.Second)
		return err
	})
	time.Sleep(50 * time.Millisecond)
	v.ns.IP(t, "link", "set", vethB, "down")
	if err := <-errc; !errors.Is(err, unix.ENETDOWN) {
		t.Fatalf("NextBlock after link down: %v, want ENETDOWN", err)
	}
}

// TestENOBUFSKeepsFrames: without carrier the kernel answers ENOBUFS and
// leaves frames in SEND_REQUEST. Flush retries, gives up with ErrTxStalled
// keeping every frame queued, and sends them all once the link is back.
func TestENOBUFSKeepsFrames(t *testing.T) {
	for _, c := range []bool{false, true} {
		t.Run(fmt.Sprintf("TxCopy=%v", c), func(t *testing.T) { testENOBUFSKeepsFrames(t, c) })
	}
}

func testENOBUFSKeepsFrames(t *testing.T, txCopy bool) {
	v := newVeth(t, 1500)
	s := v.open(t, vethA, Config{NoRX: true, TxRetryTimeout: 5 * time.Millisecond, TxCopy: txCopy})
	v.ns.IP(t, "link", "set", vethB, "down")
	const n = 10
	for i := range n {
		if !s.Append(testFrame(macB, macA, 14, uint32(i), 200)) {
			t.Fatalf("Append %d = false", i)
		}
	}
	err := s.Flush()
	if !errors.Is(err, ErrTxStalled) || !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Flush without carrier: %v, want ErrTxStalled wrapping ENOBUFS", err)
	}
	st := s.Stats()
	if st.TxENOBUFS < 2 || st.TxStalls != 1 || st.TxSent != 0 || s.Queued() != n {
		t.Fatalf("after stall: %+v, Queued %d; want retries, 1 stall, 0 sent, %d queued", st, s.Queued(), n)
	}
	// A stalled ring tries once per Flush.
	if err := s.Flush(); !errors.Is(err, ErrTxStalled) {
		t.Fatalf("second Flush: %v, want ErrTxStalled", err)
	}
	if st2 := s.Stats(); st2.TxENOBUFS != st.TxENOBUFS+1 || st2.TxStalls != 1 {
		t.Errorf("second Flush: ENOBUFS %d -> %d, stalls %d; want one attempt, still 1 stall", st.TxENOBUFS, st2.TxENOBUFS, st2.TxStalls)
	}
	v.ns.IP(t, "link", "set", vethB, "up")
	peer := v.plain(t, vethB)
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush with carrier back: %v", err)
	}
	rs := peer.collect(t, 14, n, 5*time.Second)
	if len(rs) != n {
		t.Fatalf("peer received %d of %d kept frames", len(rs), n)
	}
	for i, r := range rs {
		if _, seq, _ := parseTestFrame(r.wire); seq != uint32(i) {
			t.Errorf("frame %d has seq %d", i, seq)
		}
	}
	if st := s.Stats(); st.TxSent != n {
		t.Errorf("TxSent = %d, want %d", st.TxSent, n)
	}
}

// TestSocketZeroAllocs proves the real socket's per-batch paths do not
// allocate: Append, AppendTagged and Flush on the TX side, NextBlock (with
// and without waiting in ppoll), Next and ReleaseBlock on the RX side.
func TestSocketZeroAllocs(t *testing.T) {
	for _, c := range []bool{false, true} {
		t.Run(fmt.Sprintf("TxCopy=%v", c), func(t *testing.T) { testSocketZeroAllocs(t, c) })
	}
}

func testSocketZeroAllocs(t *testing.T, txCopy bool) {
	v := newVeth(t, 1500)
	a := v.open(t, vethA, Config{TxCopy: txCopy})
	b := v.open(t, vethB, Config{})
	f := testFrame(macB, macA, 15, 0, 500)
	tx := testing.AllocsPerRun(50, func() {
		for range 10 {
			a.Append(f)
			a.AppendTagged(f, 0x8100, 3)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if tx != 0 {
		t.Errorf("TX: %v allocs per batch of 20, want 0", tx)
	}
	var p Packet
	frames := 0
	rx := testing.AllocsPerRun(50, func() {
		blk, err := b.NextBlock(2 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if blk == nil {
			return
		}
		for blk.Next(&p) {
			frames++
		}
		b.ReleaseBlock()
	})
	if rx != 0 {
		t.Errorf("RX: %v allocs per NextBlock/Next/ReleaseBlock round, want 0", rx)
	}
	if frames == 0 {
		t.Fatal("RX rounds saw no frames")
	}
}

// BenchmarkVethTXToRX pushes frames through A's TX ring into B's RX ring
// over a veth pair and reports the rate B received (rx-frames/s) and the
// share lost on the way (loss-%). One op is one frame.
func BenchmarkVethTXToRX(b *testing.B) {
	for _, size := range []int{64, 1514} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			v := newVeth(b, 1500)
			tx := v.open(b, vethA, Config{NoRX: true})
			rx := v.open(b, vethB, Config{NoTX: true})
			var got atomic.Int64
			done, stop := background(b, rx, func(stop <-chan struct{}) error {
				var p Packet
				for !stopped(stop) {
					blk, err := rx.NextBlock(10 * time.Millisecond)
					if err != nil {
						return err
					}
					if blk == nil {
						continue
					}
					n := 0
					for blk.Next(&p) {
						n++
					}
					got.Add(int64(n))
					rx.ReleaseBlock()
				}
				return nil
			})
			f := testFrame(macB, macA, 16, 0, size)
			sent := 0
			start := time.Now()
			for b.Loop() {
				for !tx.Append(f) {
					if err := tx.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				sent++
			}
			if err := tx.Flush(); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(2 * time.Second)
			for got.Load() < int64(sent) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(start)
			stop()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(got.Load())/elapsed.Seconds(), "rx-frames/s")
			b.ReportMetric(100*float64(int64(sent)-got.Load())/float64(sent), "loss-%")
			st := rx.Stats()
			b.ReportMetric(float64(st.RxDrops), "ring-drops")
		})
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
