package main

import (
	"context"
	"sync/atomic"
	"time"

	"e1kbox/appliance/diag"
	"e1kbox/webui"
)

// probeInterval is how often the Internet probe pings.
var probeInterval = 30 * time.Second

// internetProbe pings a host from the box every probeInterval (three
// echoes, any answer counts) and keeps the last result for the overview.
type internetProbe struct {
	host string
	last atomic.Pointer[webui.Reachability]
}

func newInternetProbe(host string) *internetProbe {
	p := &internetProbe{host: host}
	p.last.Store(&webui.Reachability{Probe: "ping " + host})
	return p
}

// run probes until ctx ends.
func (p *internetProbe) run(ctx context.Context) error {
	for {
		p.once(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(probeInterval):
		}
	}
}

func (p *internetProbe) once(ctx context.Context) {
	r := webui.Reachability{Probe: "ping " + p.host}
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
		r.Reachable, r.RTT = true, webui.Duration(sum.Avg)
	}
	p.last.Store(&r)
}

// Last is the last probe's result.
func (p *internetProbe) Last() webui.Reachability { return *p.last.Load() }
