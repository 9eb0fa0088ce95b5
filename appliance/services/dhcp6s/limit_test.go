package dhcp6s

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLimiter: each client gets its burst then its rate; one client's
// flood leaves the others their share; the total is bounded whatever the
// number of clients; a full table makes new clients share one bucket.
func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := netip.MustParseAddr("fe80::a"), netip.MustParseAddr("fe80::b")
	for _, tc := range []struct {
		name      string
		rate, per float64
		max       int
		sends     func(l *limiter) map[Reason]int
		want      map[Reason]int
	}{
		{"one client, burst then nothing", 100, 5, 10, func(l *limiter) map[Reason]int {
			return count(l, t0, 0, a, 30)
		}, map[Reason]int{ReasonNone: 10, ReasonRateClient: 20}},
		{"one client refills at its rate", 100, 5, 10, func(l *limiter) map[Reason]int {
			got := count(l, t0, 0, a, 10)
			add(got, count(l, t0.Add(time.Second), 0, a, 10))
			return got
		}, map[Reason]int{ReasonNone: 15, ReasonRateClient: 5}},
		{"a flooding client leaves another its share", 100, 5, 10, func(l *limiter) map[Reason]int {
			count(l, t0, 0, a, 1000)
			return count(l, t0, 0, b, 10)
		}, map[Reason]int{ReasonNone: 10}},
		{"many clients: the total is bounded", 10, 5, 1000, func(l *limiter) map[Reason]int {
			got := map[Reason]int{}
			for i := range 100 {
				add(got, count(l, t0, 0, addr(i), 1))
			}
			return got
		}, map[Reason]int{ReasonNone: 20, ReasonRateAll: 80}},
		{"a full table: new clients share one bucket", 1000, 1, 4, func(l *limiter) map[Reason]int {
			got := map[Reason]int{}
			for i := range 20 {
				add(got, count(l, t0, 0, addr(i), 1))
			}
			return got
		}, map[Reason]int{ReasonNone: 4 + 2, ReasonRateClient: 14}},
		{"a sweep forgets refilled clients", 1000, 1, 4, func(l *limiter) map[Reason]int {
			for i := range 4 {
				count(l, t0, 0, addr(i), 1)
			}
			// 2 s later every bucket is full again: the sweep makes room.
			got := map[Reason]int{}
			for i := 4; i < 8; i++ {
				add(got, count(l, t0.Add(2*time.Second), 0, addr(i), 2))
			}
			if len(l.clients) != 4 {
				got[numReasons] = len(l.clients)
			}
			return got
		}, map[Reason]int{ReasonNone: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(tc.rate, tc.per)
			l.maxClients = tc.max
			if diff := cmp.Diff(tc.want, tc.sends(l)); diff != "" {
				t.Errorf("admitted by reason (-want +got):\n%s", diff)
			}
		})
	}
}

func addr(i int) netip.Addr {
	return netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 14: byte(i >> 8), 15: byte(i)})
}

// count sends n messages from c at now+step*i and counts the verdicts.
func count(l *limiter, now time.Time, step time.Duration, c netip.Addr, n int) map[Reason]int {
	got := map[Reason]int{}
	for i := range n {
		got[l.admit(c, now.Add(time.Duration(i)*step))]++
	}
	return got
}

func add(m, n map[Reason]int) {
	for k, v := range n {
		m[k] += v
	}
}
