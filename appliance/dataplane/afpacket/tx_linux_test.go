package afpacket

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// fakeKernel models tpacket_snd for the TX ring: it walks SEND_REQUEST
// slots from its own head, leaves a slot in SEND_REQUEST when the driver is
// busy, marks a malformed slot TP_STATUS_WRONG_FORMAT without moving its
// head, and completes sent slots at once or when told.
type fakeKernel struct {
	r          *txRing
	head       int
	maxLen     int     // longer frames are malformed (EMSGSIZE)
	busy       []error // errors returned by successive calls after accepting `accept` frames
	accept     int
	alwaysBusy error // returned by every call before taking anything
	hold       bool  // leave sent slots in SENDING until complete
	record     bool  // keep copies of sent frames in wire
	inflight   []int
	wire       [][]byte
	sent       int
	calls      int
}

func newModel(t testing.TB, frames, mtu int) (*txRing, *fakeKernel) {
	t.Helper()
	g, err := Config{NoRX: true, TxFrames: frames, TxRetryTimeout: 2 * time.Millisecond}.Geometry(mtu)
	if err != nil {
		t.Fatalf("Geometry: %v", err)
	}
	r := newTxRing(make([]byte, g.TxBytes()), g)
	k := &fakeKernel{r: r, maxLen: mtu + ethHdrLen + vlanTagLen, record: true}
	r.send = k.send
	r.sleep = func(time.Duration) {}
	return r, k
}

func (k *fakeKernel) send() error {
	k.calls++
	if k.alwaysBusy != nil {
		return k.alwaysBusy
	}
	taken := 0
	for {
		off := k.r.slots[k.head]
		if loadStatus(k.r.mem, off+offStatus) != unix.TP_STATUS_SEND_REQUEST {
			return nil
		}
		if len(k.busy) > 0 && taken == k.accept {
			err := k.busy[0]
			k.busy = k.busy[1:]
			return err
		}
		n := int(ne.Uint32(k.r.mem[off+offLen:]))
		if ne.Uint32(k.r.mem[off+offNextOffset:]) != 0 || n > k.maxLen {
			storeStatus(k.r.mem, off+offStatus, unix.TP_STATUS_WRONG_FORMAT)
			return unix.EMSGSIZE
		}
		if k.record {
			k.wire = append(k.wire, append([]byte(nil), k.r.mem[off+tpHdrLen:off+tpHdrLen+n]...))
		}
		k.sent++
		if k.hold {
			storeStatus(k.r.mem, off+offStatus, unix.TP_STATUS_SENDING)
			k.inflight = append(k.inflight, off)
		} else {
			storeStatus(k.r.mem, off+offStatus, unix.TP_STATUS_AVAILABLE)
		}
		k.head++
		if k.head == len(k.r.slots) {
			k.head = 0
		}
		taken++
	}
}

func (k *fakeKernel) complete() {
	for _, off := range k.inflight {
		storeStatus(k.r.mem, off+offStatus, unix.TP_STATUS_AVAILABLE)
	}
	k.inflight = k.inflight[:0]
}

// seqs returns the sequence numbers of the test frames on the wire.
func (k *fakeKernel) seqs() []uint32 {
	var s []uint32
	for _, f := range k.wire {
		_, seq, _ := parseTestFrame(f)
		s = append(s, seq)
	}
	return s
}

type txCounters struct{ Sent, ENOBUFS, EAGAIN, WrongFormat, Stalls uint64 }

func countersOf(r *txRing) txCounters {
	return txCounters{r.sent.Load(), r.enobufs.Load(), r.eagain.Load(), r.wrongFormat.Load(), r.stalls.Load()}
}

func TestTxFlushModel(t *testing.T) {
	seq := func(from, to int, skip ...int) []uint32 {
		var s []uint32
	next:
		for i := from; i < to; i++ {
			for _, k := range skip {
				if i == k {
					continue next
				}
			}
			s = append(s, uint32(i))
		}
		return s
	}
	tests := []struct {
		name       string
		sizes      map[int]int // frame index -> size, default 100
		busy       []error
		accept     int
		alwaysBusy error
		wantErr    []error
		wantWire   []uint32
		wantQueued int
		want       txCounters
	}{
		{name: "plain", wantWire: seq(0, 10), want: txCounters{Sent: 10}},
		{name: "ENOBUFS twice mid-batch", busy: []error{unix.ENOBUFS, unix.ENOBUFS}, accept: 3, wantWire: seq(0, 10), want: txCounters{Sent: 10, ENOBUFS: 2}},
		{name: "EAGAIN before the first frame", busy: []error{unix.EAGAIN}, wantWire: seq(0, 10), want: txCounters{Sent: 10, EAGAIN: 1}},
		{name: "EINTR", busy: []error{unix.EINTR}, accept: 5, wantWire: seq(0, 10), want: txCounters{Sent: 10}},
		{name: "kernel stops without error", busy: []error{nil}, accept: 4, wantWire: seq(0, 10), want: txCounters{Sent: 10}},
		{name: "two malformed frames dropped, order kept", sizes: map[int]int{4: 1600, 7: 1600}, wantWire: seq(0, 10, 4, 7), want: txCounters{Sent: 8, WrongFormat: 2}},
		{name: "malformed first and last", sizes: map[int]int{0: 1600, 9: 1600}, wantWire: seq(1, 9), want: txCounters{Sent: 8, WrongFormat: 2}},
		{name: "malformed after ENOBUFS", sizes: map[int]int{5: 1600}, busy: []error{unix.ENOBUFS}, accept: 2, wantWire: seq(0, 10, 5), want: txCounters{Sent: 9, WrongFormat: 1, ENOBUFS: 1}},
		{name: "stall keeps frames", alwaysBusy: unix.ENOBUFS, wantErr: []error{ErrTxStalled, unix.ENOBUFS}, wantQueued: 10, want: txCounters{Stalls: 1}},
		{name: "fatal error keeps frames", busy: []error{unix.ENETDOWN}, wantErr: []error{unix.ENETDOWN}, wantQueued: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, k := newModel(t, 16, 2000)
			k.maxLen = 1514 // the kernel's MTU shrank below the ring's
			k.busy, k.accept, k.alwaysBusy = tt.busy, tt.accept, tt.alwaysBusy
			for i := range 10 {
				size := 100
				if s, ok := tt.sizes[i]; ok {
					size = s
				}
				if !r.append(testFrame(macB, macA, 1, uint32(i), size)) {
					t.Fatalf("append %d = false", i)
				}
			}
			err := r.flush()
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("flush error %v, want it to wrap %v", err, want)
				}
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("flush: %v", err)
			}
			if diff := cmp.Diff(tt.wantWire, k.seqs()); diff != "" {
				t.Errorf("frames on the wire (-want +got):\n%s", diff)
			}
			got := countersOf(r)
			if tt.alwaysBusy != nil {
				// Retries until the timeout: how many depends on speed.
				if got.ENOBUFS < 2 {
					t.Errorf("ENOBUFS = %d, want retries", got.ENOBUFS)
				}
				got.ENOBUFS = 0
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("counters (-want +got):\n%s", diff)
			}
			if r.queued != tt.wantQueued {
				t.Errorf("queued %d, want %d", r.queued, tt.wantQueued)
			}

			// The kernel recovers; whatever was kept goes out, in order,
			// and the ring keeps working across several wrap-arounds.
			k.busy, k.alwaysBusy = nil, nil
			if err := r.flush(); err != nil {
				t.Fatalf("flush after recovery: %v", err)
			}
			before := len(k.wire)
			n := 3 * len(r.slots)
			for i := range n {
				for !r.append(testFrame(macB, macA, 1, uint32(100+i), 60+i%50)) {
					if err := r.flush(); err != nil {
						t.Fatalf("flush: %v", err)
					}
				}
			}
			if err := r.flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			wantAll := append(append([]uint32{}, tt.wantWire...), seq(0, tt.wantQueued)...)
			wantAll = append(wantAll, seq(100, 100+n)...)
			if tt.wantQueued == 0 {
				if len(k.wire)-before != n {
					t.Errorf("%d frames after recovery, want %d", len(k.wire)-before, n)
				}
			}
			if diff := cmp.Diff(wantAll, k.seqs()); diff != "" {
				t.Errorf("all frames on the wire (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTxStalledFlushTriesOnce(t *testing.T) {
	r, k := newModel(t, 16, 1500)
	k.alwaysBusy = unix.ENOBUFS
	r.append(testFrame(macB, macA, 1, 0, 60))
	if err := r.flush(); !errors.Is(err, ErrTxStalled) {
		t.Fatalf("flush: %v, want ErrTxStalled", err)
	}
	if k.calls < 2 {
		t.Errorf("first flush made %d send calls, want retries", k.calls)
	}
	calls := k.calls
	if err := r.flush(); !errors.Is(err, ErrTxStalled) {
		t.Fatalf("second flush: %v, want ErrTxStalled", err)
	}
	if k.calls != calls+1 {
		t.Errorf("stalled flush made %d send calls, want 1", k.calls-calls)
	}
	k.alwaysBusy = nil
	if err := r.flush(); err != nil || r.stalled {
		t.Fatalf("flush after recovery: %v, stalled %v", err, r.stalled)
	}
	if got := countersOf(r).Stalls; got != 1 {
		t.Errorf("stalls = %d, want 1", got)
	}
}

// TestTxRingFull: slots still in flight (SENDING) are not reused until the
// kernel completes them.
func TestTxRingFull(t *testing.T) {
	r, k := newModel(t, 16, 1500)
	k.hold = true
	n := 0
	for r.append(testFrame(macB, macA, 1, uint32(n), 60)) {
		n++
	}
	if n != len(r.slots) {
		t.Fatalf("ring took %d frames, want %d slots", n, len(r.slots))
	}
	if err := r.flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if r.append(testFrame(macB, macA, 1, 0, 60)) {
		t.Fatal("append succeeded while every slot is in flight")
	}
	if r.buffer() != nil {
		t.Fatal("buffer() returned a slot while every slot is in flight")
	}
	k.complete()
	if !r.append(testFrame(macB, macA, 1, 0, 60)) {
		t.Fatal("append failed after completion")
	}
}

func TestTxLengthRules(t *testing.T) {
	tests := []struct {
		name       string
		frame      []byte
		tagged     bool // AppendTagged with tpid
		tpid       uint16
		wantOK     bool
		wantOver   uint64
		wantRunt   uint64
		wantOnWire int
	}{
		{name: "min", frame: testFrame(macB, macA, 1, 0, 14), wantOK: true, wantOnWire: 14},
		{name: "runt", frame: make([]byte, 13), wantRunt: 1},
		{name: "empty", frame: nil, wantRunt: 1},
		{name: "mtu+14 untagged", frame: testFrame(macB, macA, 1, 0, 1514), wantOK: true, wantOnWire: 1514},
		{name: "mtu+15 untagged", frame: testFrame(macB, macA, 1, 0, 1515), wantOver: 1},
		{name: "mtu+18 inline 802.1Q", frame: insertTag(testFrame(macB, macA, 1, 0, 1514), 0x8100, 1), wantOK: true, wantOnWire: 1518},
		{name: "mtu+18 inline 802.1ad", frame: insertTag(testFrame(macB, macA, 1, 0, 1514), 0x88a8, 1), wantOver: 1},
		{name: "mtu+19 inline 802.1Q", frame: insertTag(testFrame(macB, macA, 1, 0, 1515), 0x8100, 1), wantOver: 1},
		{name: "tagged 802.1Q to mtu+18", frame: testFrame(macB, macA, 1, 0, 1514), tagged: true, tpid: 0x8100, wantOK: true, wantOnWire: 1518},
		{name: "tagged 802.1ad to mtu+18", frame: testFrame(macB, macA, 1, 0, 1514), tagged: true, tpid: 0x88a8, wantOver: 1},
		{name: "tagged 802.1ad to mtu+14", frame: testFrame(macB, macA, 1, 0, 1510), tagged: true, tpid: 0x88a8, wantOK: true, wantOnWire: 1514},
		{name: "tagged runt", frame: make([]byte, 13), tagged: true, tpid: 0x8100, wantRunt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, k := newModel(t, 4, 1500)
			var ok bool
			if tt.tagged {
				ok = r.appendTagged(tt.frame, tt.tpid, 0x0123)
			} else {
				ok = r.append(tt.frame)
			}
			if ok != tt.wantOK {
				t.Errorf("append = %v, want %v", ok, tt.wantOK)
			}
			if err := r.flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if got := r.oversize.Load(); got != tt.wantOver {
				t.Errorf("oversize = %d, want %d", got, tt.wantOver)
			}
			if got := r.runt.Load(); got != tt.wantRunt {
				t.Errorf("runt = %d, want %d", got, tt.wantRunt)
			}
			switch {
			case tt.wantOnWire == 0 && len(k.wire) != 0:
				t.Errorf("%d frames on the wire, want none", len(k.wire))
			case tt.wantOnWire != 0 && (len(k.wire) != 1 || len(k.wire[0]) != tt.wantOnWire):
				t.Errorf("wire %d frames, want one of %d bytes", len(k.wire), tt.wantOnWire)
			}
		})
	}
}

func TestAppendTaggedLayout(t *testing.T) {
	r, k := newModel(t, 4, 1500)
	f := testFrame(macB, macA, 1, 0, 100)
	if !r.appendTagged(f, 0x8100, 0xe064) {
		t.Fatal("appendTagged = false")
	}
	if err := r.flush(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{insertTag(f, 0x8100, 0xe064)}, k.wire); diff != "" {
		t.Errorf("wire (-want +got):\n%s", diff)
	}
}

// TestZeroAllocs proves that iterating received frames and appending and
// flushing frames do not allocate.
func TestZeroAllocs(t *testing.T) {
	frames := make([]synth, 0, 30)
	for i := range 30 {
		frames = append(frames, synth{data: testFrame(macB, macA, 1, uint32(i), 60+i*40), status: unix.TP_STATUS_VLAN_VALID, tci: uint16(i)})
	}
	blk := buildBlock(64<<10, frames)
	var b Block
	var p Packet
	sum := 0
	rx := testing.AllocsPerRun(100, func() {
		b.parseBlock(blk)
		for b.Next(&p) {
			sum += len(p.Data) + int(p.VLANTCI)
		}
	})
	if rx != 0 {
		t.Errorf("RX iteration: %v allocs per block, want 0", rx)
	}
	if sum == 0 {
		t.Fatal("iterated nothing")
	}

	r, k := newModel(t, 64, 1500)
	k.record = false
	f := testFrame(macB, macA, 1, 0, 1000)
	tx := testing.AllocsPerRun(100, func() {
		for range 10 {
			r.append(f)
			r.appendTagged(f, 0x8100, 7)
		}
		buf := r.buffer()
		copy(buf, f)
		r.commitBuffer(len(f))
		if err := r.flush(); err != nil {
			t.Fatal(err)
		}
	})
	if tx != 0 {
		t.Errorf("TX append+flush: %v allocs per batch, want 0", tx)
	}
	if k.sent < 100*21 {
		t.Fatalf("kernel model sent %d frames, want %d", k.sent, 100*21)
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{64, 1514} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			r, k := newModel(b, 1024, 1500)
			k.record = false
			f := testFrame(macB, macA, 1, 0, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if !r.append(f) {
					if err := r.flush(); err != nil {
						b.Fatal(err)
					}
					r.append(f)
				}
			}
		})
	}
}
