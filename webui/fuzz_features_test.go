package webui

import (
	"net/url"
	"testing"
	"time"
)

// FuzzHistoryFile: a history file of any content loads or is refused, and
// what loads is in time order and renders.
func FuzzHistoryFile(f *testing.F) {
	h := newHistory(10, time.Second)
	now := time.Unix(1782900000, 0)
	for i := range 130 {
		m := StatsMessage{Time: now.Add(time.Duration(i) * 10 * time.Second), Interval: 10,
			Ports: []PortRates{{PortStats: PortStats{Name: "p1"}, RxPPS: float64(i)}}, Conntrack: &ConntrackSummary{Entries: i}}
		h.add(&m)
	}
	b, _ := h.marshal(now)
	f.Add(b)
	f.Add([]byte(`{"version":1,"minute":[{"t":1,"p":null}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := newHistory(10, time.Second)
		if err := g.load(b, now); err != nil {
			return
		}
		for _, r := range []*ring{g.minute, g.quarter} {
			pts := r.ordered()
			for i := 1; i < len(pts); i++ {
				if pts[i].T <= pts[i-1].T {
					t.Fatalf("points out of order: %d after %d", pts[i].T, pts[i-1].T)
				}
			}
		}
		for _, rng := range []string{Range24h, Range7d} {
			if _, err := g.columns(rng); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzParseLogQuery: any query string parses or is refused, and what
// parses is within bounds.
func FuzzParseLogQuery(f *testing.F) {
	f.Add("after=12&level=warn&source=rule&q=10.0.0.1&limit=50")
	f.Add("level=LOUD&limit=-1")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseLogQuery(v)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxLogLimit || len(q.Text) > 200 {
			t.Fatalf("query out of bounds: %+v", q)
		}
		if _, ok := levelRank[q.Level]; !ok && q.Level != "" {
			t.Fatalf("level %q accepted", q.Level)
		}
	})
}
