package route6

import (
	"math/rand/v2"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
)

// TestConntrackUsed: the table's count of entries in use follows every
// way an entry is taken or freed (insert into a free, expired or evicted
// way, expiry at lookup, sweep), so that count and each may skip an empty
// table; count agrees with a walk at every step.
func TestConntrackUsed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ct := newConntrack(64) // 16 buckets of 4 ways: inserts collide and evict
	var cursor uint64
	now := uint32(1000)
	key := func() connKey {
		k := connKey{lanPort: uint16(r.IntN(200)), wanPort: 443, proto: []uint8{frame.ProtoTCP, frame.ProtoUDP, frame.ProtoICMPv6}[r.IntN(3)]}
		k.lan[15], k.wan[15] = 1, 2
		return k
	}
	walk := func(live bool) int {
		n := 0
		for i := range ct.b {
			for _, e := range ct.b[i].e {
				if e.state != stFree && (!live || now < e.deadline) {
					n++
				}
			}
		}
		return n
	}
	for step := range 5000 {
		k := key()
		switch op := r.IntN(10); {
		case op < 5:
			ct.insert(&k, LAN, false, now)
		case op < 8:
			ct.lookup(&k, WAN, frame.TCPAck, now)
		case op < 9:
			ct.sweep(&cursor, 4, now)
		default:
			now += uint32(r.IntN(200)) // entries expire (UDP, ICMP, SYN sent)
		}
		if got, want := ct.used.Load(), int64(walk(false)); got != want {
			t.Fatalf("step %d: used = %d, want %d (entries not free)", step, got, want)
		}
		if got, want := ct.count(now), walk(true); got != want {
			t.Fatalf("step %d: count = %d, want %d", step, got, want)
		}
	}
	now += 1 << 30
	ct.sweep(&cursor, len(ct.b), now)
	if n := ct.used.Load(); n != 0 {
		t.Errorf("after a sweep of the whole expired table: used = %d, want 0", n)
	}
	ct.each(now, func(*Conn) bool { t.Error("each called fn on an empty table"); return false })
}

// TestTickSweep: a worker's Ticks sweep sweepBuckets buckets per 100 ms
// of its time, whether it ticks after every batch (the time carries over
// to the next Tick) or once a second when idle, at most 16 times as many
// in one Tick.
func TestTickSweep(t *testing.T) {
	e := newEnv(t, "")
	for _, tc := range []struct {
		after time.Duration
		want  uint64
	}{
		{time.Millisecond, 0},
		{50 * time.Millisecond, 0},
		{48 * time.Millisecond, 0},
		{time.Millisecond, sweepBuckets}, // 100 ms since the first
		{time.Second, 10 * sweepBuckets},
		{350 * time.Millisecond, 3 * sweepBuckets},
		{60 * time.Millisecond, sweepBuckets}, // 350 + 60 = 4 slices
		{time.Minute, 16 * sweepBuckets},
		{50 * time.Millisecond, 0}, // the minute's excess is not carried
	} {
		e.now += int64(tc.after)
		before := e.r.sweepPos.Load()
		e.w.Tick(e.now)
		if got := e.r.sweepPos.Load() - before; got != tc.want {
			t.Errorf("Tick %v after the last: swept %d buckets, want %d", tc.after, got, tc.want)
		}
	}
}
