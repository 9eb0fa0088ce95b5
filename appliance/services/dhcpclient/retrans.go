package dhcpclient

import (
	"math/rand/v2"
	"time"
)

// Backoff is a DHCPv4 retransmission schedule (RFC 2131 section 4.1): the
// wait after a message doubles from Base with every transmission of the
// exchange, up to Max; Jitter is added to each wait.
type Backoff struct {
	Base, Max time.Duration
}

// Wait is the wait after the (n+1)th transmission: Base×2^n, at most Max.
func (b Backoff) Wait(n int) time.Duration {
	d := b.Base
	for ; n > 0 && d < b.Max; n-- {
		d *= 2
	}
	return min(d, b.Max)
}

// Jitter is RFC 2131 section 4.1's randomization of a wait: uniform in
// [-1 s, +1 s].
func Jitter() time.Duration {
	return time.Duration(rand.Int64N(int64(2*time.Second)+1)) - time.Second
}

// Retrans is a DHCPv6 message type's retransmission parameters (RFC 8415
// section 7.6): the initial and the maximum retransmission time, and the
// maximum count of transmissions (0: unbounded).
type Retrans struct {
	IRT, MRT time.Duration
	MRC      int
}

// Next is the retransmission time after one of prev (0 before the first
// transmission), with rand the RAND of RFC 8415 section 15 (in [-0.1,
// 0.1]): RT = IRT + RAND×IRT first, then 2×RTprev + RAND×RTprev, and
// MRT + RAND×MRT where that passes MRT.
func (r Retrans) Next(prev time.Duration, rand float64) time.Duration {
	if prev == 0 {
		return r.IRT + time.Duration(rand*float64(r.IRT))
	}
	rt := 2*prev + time.Duration(rand*float64(prev))
	if rt > r.MRT {
		rt = r.MRT + time.Duration(rand*float64(r.MRT))
	}
	return rt
}

// Exhausted says whether tries transmissions used up the count.
func (r Retrans) Exhausted(tries int) bool { return r.MRC > 0 && tries >= r.MRC }
