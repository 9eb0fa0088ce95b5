package bridge

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestConcurrent learns and looks up from several goroutines while
// another sweeps and lists; run with -race. Every lookup must answer
// a port that was really learned for that MAC.
func TestConcurrent(t *testing.T) {
	f := newFDB(t, Options{Capacity: 1024, AgingTime: time.Hour})
	const workers, macs, rounds = 4, 200, 20000
	// The sweeper runs until the workers are done, or the test is (its
	// context ends before the cleanup joins the goroutines).
	ctx, cancel := context.WithCancel(t.Context())
	var wg, bg sync.WaitGroup
	t.Cleanup(func() {
		wg.Wait()
		bg.Wait()
	})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range rounds {
				mi := rng.IntN(macs)
				m := mac(mi)
				// MAC mi lives on port 1+mi%5 or 10+mi%5: both are valid.
				p := Port(1 + mi%5)
				if rng.IntN(2) == 0 {
					p += 9
				}
				now := int64(i) * int64(time.Millisecond)
				f.Learn(&m, 0, p, now)
				m2 := mac(rng.IntN(macs))
				if got, ok := f.Lookup(&m2, 0, now); ok {
					base := 1 + (int(m2[4])<<8|int(m2[5]))%5 // m2 is mac(mi) with mi < 256
					if int(got) != base && int(got) != base+9 {
						t.Errorf("Lookup(%v) = %d, not a port it was learned on (%d or %d)", MAC(m2), got, base, base+9)
						return
					}
				}
			}
		})
	}
	bg.Go(func() {
		var buf []Entry
		for ctx.Err() == nil {
			f.Sweep(0)
			buf = f.Entries(buf[:0], 0)
			if len(buf) > macs {
				t.Errorf("Entries lists %d entries for %d MACs", len(buf), macs)
			}
		}
	})
	wg.Wait()
	cancel()
	bg.Wait()
	if n := f.Len(); n != macs {
		t.Errorf("Len = %d, want %d", n, macs)
	}
}
