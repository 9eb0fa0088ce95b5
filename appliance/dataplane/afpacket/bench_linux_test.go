package afpacket

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

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
