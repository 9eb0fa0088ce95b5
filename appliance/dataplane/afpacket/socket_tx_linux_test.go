package afpacket

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

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
