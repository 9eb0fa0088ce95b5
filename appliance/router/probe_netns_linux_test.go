package router

import (
	"context"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestInternetProbe pings from a namespace: its own address answers; an
// address it has no route to is reported unreachable with the reason.
func TestInternetProbe(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := netnstest.New(t, "probe")
	ns.IP(t, "link", "set", "lo", "up")
	for _, tt := range []struct {
		host      string
		reachable bool
	}{{"127.0.0.1", true}, {"192.0.2.1", false}} {
		p := NewProbe(tt.host)
		if got := p.Last(); got.Probe != "ping "+tt.host || !got.Checked.IsZero() {
			t.Errorf("before the first probe: %+v, want not checked", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ns.Do(t, func() { p.once(ctx) })
		cancel()
		got := p.Last()
		if got.Reachable != tt.reachable || got.Checked.IsZero() || (got.Error == "") != tt.reachable || (tt.reachable && got.RTT <= 0) {
			t.Errorf("probe of %s: %+v, want reachable %v (an error when not, an RTT when so)", tt.host, got, tt.reachable)
		}
	}
}
