package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"time"
)

// Resolutions of the history: every sample for the live charts (Options.History,
// default 5 minutes), one point a minute for 24 hours and one per 15 minutes for
// 7 days. The two long tiers are what the history file keeps.
const (
	MinuteStep   = 60
	QuarterStep  = 15 * 60
	minutePoints = 24 * 60
	quarterPts   = 7 * 24 * 4
	historyVer   = 1
)

// point is one sample of the history, or the average of a bucket of them.
type point struct {
	T     int64       `json:"t"` // Unix milliseconds: the sample's time, or its bucket's start
	Ports []portPoint `json:"p"`
	Drops float64     `json:"d"`           // frames dropped per second, all reasons
	CPUs  []cpuPoint  `json:"c,omitempty"` // busy share per core
	Conns float64     `json:"n"`           // connections; -1 without a table
}

type portPoint struct {
	Name  string  `json:"n"`
	RxPPS float64 `json:"rp"`
	TxPPS float64 `json:"tp"`
	RxBPS float64 `json:"rb"`
	TxBPS float64 `json:"tb"`
}

type cpuPoint struct {
	CPU  int     `json:"i"`
	Busy float64 `json:"b"`
}

func pointOf(m *StatsMessage) point {
	p := point{T: m.Time.UnixMilli(), Conns: -1}
	for _, r := range m.Ports {
		p.Ports = append(p.Ports, portPoint{Name: r.Name, RxPPS: r.RxPPS, TxPPS: r.TxPPS, RxBPS: r.RxBPS, TxBPS: r.TxBPS})
	}
	for _, d := range m.Drops {
		p.Drops += d.PerSecond
	}
	for _, c := range m.CPUs {
		p.CPUs = append(p.CPUs, cpuPoint(c))
	}
	if m.Conntrack != nil {
		p.Conns = float64(m.Conntrack.Entries)
	}
	return p
}

// ring keeps the newest points of one resolution.
type ring struct {
	pts  []point
	next int
	n    int
}

func newRing(size int) *ring { return &ring{pts: make([]point, size)} }

func (r *ring) push(p point) {
	if r.n > 0 {
		if i := (r.next - 1 + len(r.pts)) % len(r.pts); r.pts[i].T >= p.T {
			r.pts[i] = p // a bucket restored from the file, continued after a restart
			return
		}
	}
	r.pts[r.next] = p
	r.next = (r.next + 1) % len(r.pts)
	if r.n < len(r.pts) {
		r.n++
	}
}

// ordered returns the points oldest first.
func (r *ring) ordered() []point {
	out := make([]point, 0, r.n)
	start := (r.next - r.n + len(r.pts)) % len(r.pts)
	for i := range r.n {
		out = append(out, r.pts[(start+i)%len(r.pts)])
	}
	return out
}

// acc averages the points of one bucket.
type acc struct {
	step   int64 // milliseconds
	bucket int64 // start of the bucket being filled; 0: none
	n      int
	sum    point
}

// findOrAdd returns the element of *list that match picks, the first,
// after appending fresh when there is none.
func findOrAdd[T any](list *[]T, match func(T) bool, fresh T) *T {
	i := slices.IndexFunc(*list, match)
	if i < 0 {
		*list = append(*list, fresh)
		i = len(*list) - 1
	}
	return &(*list)[i]
}

// add adds p; when p belongs to a later bucket it first closes the open
// one and returns its average.
func (a *acc) add(p point) (point, bool) {
	b := p.T - p.T%a.step
	var out point
	closed := false
	if a.n > 0 && b != a.bucket {
		out, closed = a.average(), true
		a.n = 0
	}
	if a.n == 0 {
		a.bucket = b
		a.sum = point{T: b, Conns: 0}
	}
	a.n++
	s := &a.sum
	for _, pp := range p.Ports {
		q := findOrAdd(&s.Ports, func(q portPoint) bool { return q.Name == pp.Name }, portPoint{Name: pp.Name})
		q.RxPPS += pp.RxPPS
		q.TxPPS += pp.TxPPS
		q.RxBPS += pp.RxBPS
		q.TxBPS += pp.TxBPS
	}
	s.Drops += p.Drops
	for _, c := range p.CPUs {
		findOrAdd(&s.CPUs, func(q cpuPoint) bool { return q.CPU == c.CPU }, cpuPoint{CPU: c.CPU}).Busy += c.Busy
	}
	if p.Conns < 0 || s.Conns < 0 {
		s.Conns = -1
	} else {
		s.Conns += p.Conns
	}
	return out, closed
}

// average is the open bucket's mean (a port or CPU missing from some
// samples is averaged over all of them: it counted zero there).
func (a *acc) average() point {
	k := float64(a.n)
	p := point{T: a.bucket, Drops: a.sum.Drops / k, Conns: a.sum.Conns}
	if p.Conns >= 0 {
		p.Conns /= k
	}
	for _, q := range a.sum.Ports {
		p.Ports = append(p.Ports, portPoint{Name: q.Name, RxPPS: q.RxPPS / k, TxPPS: q.TxPPS / k, RxBPS: q.RxBPS / k, TxBPS: q.TxBPS / k})
	}
	for _, c := range a.sum.CPUs {
		p.CPUs = append(p.CPUs, cpuPoint{CPU: c.CPU, Busy: c.Busy / k})
	}
	return p
}

// history keeps the three resolutions.
type history struct {
	live, minute, quarter *ring
	accMin, accQuarter    acc
	liveStep              float64
}

func newHistory(liveSamples int, interval time.Duration) *history {
	return &history{
		live: newRing(liveSamples), minute: newRing(minutePoints), quarter: newRing(quarterPts),
		accMin: acc{step: MinuteStep * 1000}, accQuarter: acc{step: QuarterStep * 1000}, liveStep: interval.Seconds(),
	}
}

// add records a published message (the first, without rates, is left out).
func (h *history) add(m *StatsMessage) {
	if m.Interval == 0 {
		return
	}
	p := pointOf(m)
	h.live.push(p)
	if mp, ok := h.accMin.add(p); ok {
		h.minute.push(mp)
		if qp, ok := h.accQuarter.add(mp); ok {
			h.quarter.push(qp)
		}
	}
}

// HistoryMessage is the answer of GET /api/stats/history: rates over time
// in columns, ready for a chart. Times are Unix seconds; null marks a gap
// (the box was off, or a port did not exist then).
type HistoryMessage struct {
	Range    string        `json:"range"`
	Interval float64       `json:"interval_s"`
	Time     []float64     `json:"time"`
	Ports    []PortHistory `json:"ports"`
	// Drops are frames dropped per second (all reasons).
	Drops []*float64 `json:"drops"`
	// CPUs are the busy share (0..1) of each core.
	CPUs []CPUHistory `json:"cpus"`
	// Conns are the connections in the NAT table; absent in bridge mode.
	Conns []*float64 `json:"conns,omitempty"`
}

// PortHistory is one port's rates over time.
type PortHistory struct {
	Name  string     `json:"name"`
	RxPPS []*float64 `json:"rx_pps"`
	TxPPS []*float64 `json:"tx_pps"`
	RxBPS []*float64 `json:"rx_bps"`
	TxBPS []*float64 `json:"tx_bps"`
}

// CPUHistory is one core's load over time.
type CPUHistory struct {
	CPU  int        `json:"cpu"`
	Busy []*float64 `json:"busy"`
}

// History ranges of GET /api/stats/history?range=.
const (
	RangeLive = "live"
	Range24h  = "24h"
	Range7d   = "7d"
)

// columns renders a range; the open bucket of a long range is its last
// point, so that a fresh box shows something.
func (h *history) columns(rng string) (HistoryMessage, error) {
	var pts []point
	var step float64
	switch rng {
	case "", RangeLive, "5m":
		rng, pts, step = RangeLive, h.live.ordered(), h.liveStep
	case Range24h:
		pts, step = h.minute.ordered(), MinuteStep
		if h.accMin.n > 0 {
			pts = append(pts, h.accMin.average())
		}
	case Range7d:
		pts, step = h.quarter.ordered(), QuarterStep
		if h.accQuarter.n > 0 {
			pts = append(pts, h.accQuarter.average())
		}
	default:
		return HistoryMessage{}, fmt.Errorf("range: want live, 24h or 7d, not %q", rng)
	}
	return render(rng, pts, step), nil
}

func f64(v float64) *float64 { return &v }

// render turns points into columns with the ports and CPUs of the newest
// point, and a null row where points are missing.
func render(rng string, pts []point, step float64) HistoryMessage {
	hm := HistoryMessage{Range: rng, Interval: step, Time: []float64{}, Ports: []PortHistory{}, Drops: []*float64{}, CPUs: []CPUHistory{}}
	if len(pts) == 0 {
		return hm
	}
	last := pts[len(pts)-1]
	for _, p := range last.Ports {
		hm.Ports = append(hm.Ports, PortHistory{Name: p.Name})
	}
	for _, c := range last.CPUs {
		hm.CPUs = append(hm.CPUs, CPUHistory{CPU: c.CPU})
	}
	hasConns := false
	for _, p := range pts {
		hasConns = hasConns || p.Conns >= 0
	}
	row := func(t float64, p *point) {
		hm.Time = append(hm.Time, t)
		var d, n *float64
		if p != nil {
			d = f64(p.Drops)
			if p.Conns >= 0 {
				n = f64(p.Conns)
			}
		}
		hm.Drops = append(hm.Drops, d)
		if hasConns {
			hm.Conns = append(hm.Conns, n)
		}
		for i := range hm.Ports {
			ph := &hm.Ports[i]
			var rp, tp, rb, tb *float64
			if p != nil {
				for _, q := range p.Ports {
					if q.Name == ph.Name {
						rp, tp, rb, tb = f64(q.RxPPS), f64(q.TxPPS), f64(q.RxBPS), f64(q.TxBPS)
						break
					}
				}
			}
			ph.RxPPS, ph.TxPPS = append(ph.RxPPS, rp), append(ph.TxPPS, tp)
			ph.RxBPS, ph.TxBPS = append(ph.RxBPS, rb), append(ph.TxBPS, tb)
		}
		for i := range hm.CPUs {
			var b *float64
			if p != nil {
				for _, c := range p.CPUs {
					if c.CPU == hm.CPUs[i].CPU {
						b = f64(c.Busy)
					}
				}
			}
			hm.CPUs[i].Busy = append(hm.CPUs[i].Busy, b)
		}
	}
	for i := range pts {
		if i > 0 && float64(pts[i].T-pts[i-1].T)/1000 > 2.5*step {
			row(float64(pts[i-1].T)/1000+step, nil) // the line breaks here
		}
		row(float64(pts[i].T)/1000, &pts[i])
	}
	return hm
}

// historyFile is what is saved: the long tiers and their open buckets.
type historyFile struct {
	Version int       `json:"version"`
	Saved   time.Time `json:"saved"`
	Minute  []point   `json:"minute"`
	Quarter []point   `json:"quarter"`
	// Open are the averages of the open minute and quarter buckets.
	OpenMinute  *point `json:"open_minute,omitempty"`
	OpenQuarter *point `json:"open_quarter,omitempty"`
}

func (h *history) marshal(now time.Time) ([]byte, error) {
	f := historyFile{Version: historyVer, Saved: now, Minute: h.minute.ordered(), Quarter: h.quarter.ordered()}
	if h.accMin.n > 0 {
		p := h.accMin.average()
		f.OpenMinute = &p
	}
	if h.accQuarter.n > 0 {
		p := h.accQuarter.average()
		f.OpenQuarter = &p
	}
	return json.Marshal(&f)
}

// load restores the long tiers from a saved file: points older than their
// tier's reach are left out, and out-of-order or bad ones refused.
func (h *history) load(b []byte, now time.Time) error {
	var f historyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("history file: %w", err)
	}
	if f.Version != historyVer {
		return fmt.Errorf("history file: version %d, want %d", f.Version, historyVer)
	}
	restore := func(r *ring, pts []point, open *point, reach int64) {
		var prev int64
		for _, p := range append(pts, derefPoint(open)...) {
			if p.T <= prev || p.T < now.UnixMilli()-reach*1000 || p.T > now.UnixMilli()+reach*1000 || !finite(p) {
				continue
			}
			prev = p.T
			r.push(p)
		}
	}
	restore(h.minute, f.Minute, f.OpenMinute, minutePoints*MinuteStep)
	restore(h.quarter, f.Quarter, f.OpenQuarter, quarterPts*QuarterStep)
	return nil
}

func derefPoint(p *point) []point {
	if p == nil {
		return nil
	}
	return []point{*p}
}

func finite(p point) bool {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !ok(p.Drops) || !ok(p.Conns) {
		return false
	}
	for _, q := range p.Ports {
		if !ok(q.RxPPS) || !ok(q.TxPPS) || !ok(q.RxBPS) || !ok(q.TxBPS) {
			return false
		}
	}
	for _, c := range p.CPUs {
		if !ok(c.Busy) {
			return false
		}
	}
	return true
}

// loadHistory reads the history file, if there is one.
func (s *Server) loadHistory() {
	if s.opts.HistoryFile == "" {
		return
	}
	b, err := os.ReadFile(s.opts.HistoryFile)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = s.history.load(b, time.Now())
	}
	if err != nil {
		s.log.Warn("dashboard history not restored", "file", s.opts.HistoryFile, "err", err)
		return
	}
	s.log.Info("dashboard history restored", "file", s.opts.HistoryFile,
		"minutes", s.history.minute.n, "quarters", s.history.quarter.n)
}

// saveHistory writes the history file (atomically).
func (s *Server) saveHistory(now time.Time) {
	if s.opts.HistoryFile == "" {
		return
	}
	s.mu.Lock()
	b, err := s.history.marshal(now)
	s.mu.Unlock()
	if err == nil {
		err = WriteFileAtomic(s.opts.HistoryFile, b, 0o644)
	}
	if err != nil {
		s.log.Warn("dashboard history not saved", "err", err)
	}
}
