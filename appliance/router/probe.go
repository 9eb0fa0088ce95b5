package router

import (
	"context"
	"sync/atomic"
	"time"

	"e1kbox/appliance/diag"
)

// probeInterval is how often the Internet probe pings.
var probeInterval = 30 * time.Second

// Probe pings a host from the box every probeInterval (three echoes, any
// answer counts) and keeps the last result for the overview.
type Probe struct {
	host string
	last atomic.Pointer[Reachability]
}

// Reachability is a probe's result.
type Reachability struct {
	// Probe says what was probed, e.g. "ping 1.1.1.1".
	Probe string
	// Checked is when; zero before the first probe.
	Checked   time.Time
	Reachable bool          // the probe got an answer
	RTT       time.Duration // the answer's round-trip time
	Error     string        // why there was none
}

// NewProbe returns a probe of host that has not probed yet.
func NewProbe(host string) *Probe {
	p := &Probe{host: host}
	p.last.Store(&Reachability{Probe: "ping " + host})
	return p
}

// Run probes until ctx ends.
func (p *Probe) Run(ctx context.Context) error {
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(probeInterval):
		}
	}
}

func (p *Probe) once(ctx context.Context) {
	r := Reachability{Probe: "ping " + p.host}
	sum, err := diag.Ping(ctx, diag.PingOptions{Host: p.host, Count: 3, Interval: 200 * time.Millisecond, Timeout: 2 * time.Second}, func(diag.Reply) {})
	if ctx.Err() != nil {
		return
	}
	r.Checked = time.Now()
	switch {
	case err != nil:
		r.Error = err.Error()
	case sum.Received == 0:
		r.Error = "no answer to 3 echo requests"
	default:
		r.Reachable, r.RTT = true, sum.Avg
	}
	p.last.Store(&r)
}

// Last is the last probe's result.
func (p *Probe) Last() Reachability { return *p.last.Load() }
