package dhcpd

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeLAN stands in for the dataplane: the port each MAC is on
// (Config.PortOf) and when each device last had traffic through the box
// (Config.Activity).
type fakeLAN struct {
	mu    sync.Mutex
	ports map[string]string    // MAC → port
	def   string               // the port of every other MAC
	seen  map[string]time.Time // "ip mac" → its last traffic
	asked int                  // Activity calls
}

func newFakeLAN(def string) *fakeLAN {
	return &fakeLAN{ports: map[string]string{}, seen: map[string]time.Time{}, def: def}
}

// wire makes cfg ask f.
func (f *fakeLAN) wire(cfg *Config) {
	cfg.PortOf, cfg.Activity = f.portOf, f.activity
}

func (f *fakeLAN) portOf(hw net.HardwareAddr) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.ports[hw.String()]; ok {
		return p
	}
	return f.def
}

func (f *fakeLAN) activity(ip netip.Addr, hw net.HardwareAddr) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	return f.seen[ip.String()+" "+hw.String()]
}

// on puts the device mac on port.
func (f *fakeLAN) on(mac, port string) {
	f.mu.Lock()
	f.ports[mac] = port
	f.mu.Unlock()
}

// use notes traffic of the device mac from ip at t.
func (f *fakeLAN) use(ip netip.Addr, mac string, t time.Time) {
	f.mu.Lock()
	f.seen[ip.String()+" "+mac] = t
	f.mu.Unlock()
}

// checkQueues fails the test if the probation queues disagree with the
// table (s.mu held): every dynamic offer is in the offers', every dynamic
// unproven binding in the probation or unused queues, nothing else
// anywhere, and the bindings within their probation keep to the share.
func checkQueues(t testing.TB, s *Server) {
	t.Helper()
	for k, e := range s.byKey {
		var want []*queues
		switch {
		case e.heap == nil:
		case e.state == StateOffered:
			want = []*queues{&s.offerQ}
		case e.state == StateBound && !e.proven:
			want = []*queues{&s.probation, &s.unused}
		}
		in := e.q == nil && len(want) == 0
		for _, q := range want {
			in = in || e.q == q
		}
		if !in {
			t.Errorf("entry %s (%s, proven %v) in the wrong queue", k, e.state, e.proven)
		}
		if e.q != nil && (e.q.by[e.group] != e.ql || e.qe.Value != e) {
			t.Errorf("entry %s: not in its group %q's list", k, e.group)
		}
	}
	for _, q := range []*queues{&s.offerQ, &s.probation, &s.unused} {
		n := 0
		for g, l := range q.by {
			n += l.Len()
			for f := l.Front(); f != nil; f = f.Next() {
				e := f.Value.(*entry)
				if s.byKey[e.key] != e || e.group != g {
					t.Errorf("queued entry %s (group %q in list %q) is not in the table", e.key, e.group, g)
				}
				if p := f.Prev(); p != nil && q.key(e).Before(q.key(p.Value.(*entry))) {
					t.Errorf("queued entry %s is out of order", e.key)
				}
			}
		}
		if n != q.n {
			t.Errorf("queues count %d, hold %d", q.n, n)
		}
	}
	if s.probation.n > s.pol.unproven {
		t.Errorf("%d unproven bindings within their probation, more than the share %d", s.probation.n, s.pol.unproven)
	}
}
