package webui

import (
	"encoding/json"
	"fmt"
	"time"
)

// StatsMessage is what the server publishes every interval on the
// WebSocket stream (and serves at GET /api/stats): the counters of one
// Snapshot plus the rates since the previous one. The schema is documented
// in docs/api.md.
type StatsMessage struct {
	Type string    `json:"type"` // "stats"
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Interval is the time since the previous sample in seconds, 0 for the
	// first one (its rates are 0).
	Interval       float64           `json:"interval_s"`
	Ports          []PortRates       `json:"ports"`
	Drops          []DropRates       `json:"drops"`
	CPUs           []CPURates        `json:"cpus"`
	IRQs           []IRQRates        `json:"irqs"`
	WorkerRestarts uint64            `json:"worker_restarts"`
	Conntrack      *ConntrackSummary `json:"conntrack"`
	Config         *ConfigState      `json:"config"`
}

// PortRates are a port's counters and rates.
type PortRates struct {
	PortStats
	RxPPS float64 `json:"rx_pps"`
	TxPPS float64 `json:"tx_pps"`
	RxBPS float64 `json:"rx_bps"` // bits per second
	TxBPS float64 `json:"tx_bps"`
}

// DropRates are the drops of one reason, total and per second.
type DropRates struct {
	DropStat
	PerSecond float64 `json:"per_s"`
}

// CPURates is one core's load over the last interval.
type CPURates struct {
	CPU  int     `json:"cpu"`
	Busy float64 `json:"busy"` // 0..1
}

// IRQRates is one interrupt vector's count and rate.
type IRQRates struct {
	IRQStat
	PerSecond float64 `json:"per_s"`
}

// ConfigState is the running config version and the change waiting for
// confirmation, if any.
type ConfigState struct {
	Version Version      `json:"version"`
	Pending *PendingInfo `json:"pending"`
}

// rate returns the per-second increase of a counter, 0 if it went backwards
// (a restart) or no time passed.
func rate(cur, prev uint64, dt float64) float64 {
	if dt <= 0 || cur < prev {
		return 0
	}
	return float64(cur-prev) / dt
}

// buildMessage derives a StatsMessage from two consecutive snapshots; prev
// may be nil.
func buildMessage(seq uint64, prev, cur *Snapshot) StatsMessage {
	m := StatsMessage{
		Type:           "stats",
		Seq:            seq,
		Time:           cur.Time,
		Ports:          make([]PortRates, len(cur.Ports)),
		Drops:          make([]DropRates, len(cur.Drops)),
		CPUs:           make([]CPURates, len(cur.CPUs)),
		IRQs:           make([]IRQRates, len(cur.IRQs)),
		WorkerRestarts: cur.WorkerRestarts,
		Conntrack:      cur.Conntrack,
	}
	var dt float64
	if prev != nil {
		dt = cur.Time.Sub(prev.Time).Seconds()
		if dt < 0 {
			dt = 0
		}
	}
	m.Interval = dt
	for i, p := range cur.Ports {
		r := PortRates{PortStats: p}
		if prev != nil {
			if q, ok := findPort(prev.Ports, p.Name, i); ok {
				r.RxPPS = rate(p.RxPackets, q.RxPackets, dt)
				r.TxPPS = rate(p.TxPackets, q.TxPackets, dt)
				r.RxBPS = 8 * rate(p.RxBytes, q.RxBytes, dt)
				r.TxBPS = 8 * rate(p.TxBytes, q.TxBytes, dt)
			}
		}
		m.Ports[i] = r
	}
	for i, d := range cur.Drops {
		r := DropRates{DropStat: d}
		if prev != nil {
			for _, q := range prev.Drops {
				if q.Reason == d.Reason {
					r.PerSecond = rate(d.Packets, q.Packets, dt)
					break
				}
			}
		}
		m.Drops[i] = r
	}
	for i, c := range cur.CPUs {
		r := CPURates{CPU: c.CPU}
		if prev != nil {
			for _, q := range prev.CPUs {
				if q.CPU != c.CPU {
					continue
				}
				busy, idle := c.BusySeconds-q.BusySeconds, c.IdleSeconds-q.IdleSeconds
				if busy >= 0 && idle >= 0 && busy+idle > 0 {
					r.Busy = busy / (busy + idle)
				}
				break
			}
		}
		m.CPUs[i] = r
	}
	for i, q := range cur.IRQs {
		r := IRQRates{IRQStat: q}
		if prev != nil {
			for _, p := range prev.IRQs {
				if p.IRQ == q.IRQ && p.Name == q.Name {
					r.PerSecond = rate(q.Count, p.Count, dt)
					break
				}
			}
		}
		m.IRQs[i] = r
	}
	return m
}

// findPort finds a port by name, trying the same index first.
func findPort(ports []PortStats, name string, hint int) (PortStats, bool) {
	if hint < len(ports) && ports[hint].Name == name {
		return ports[hint], true
	}
	for _, p := range ports {
		if p.Name == name {
			return p, true
		}
	}
	return PortStats{}, false
}

// history keeps the per-port rates of the last samples for the charts.
type history struct {
	size    int
	samples []StatsMessage // ring
	next    int
	full    bool
}

func newHistory(size int) *history {
	return &history{size: size, samples: make([]StatsMessage, size)}
}

func (h *history) add(m StatsMessage) {
	h.samples[h.next] = m
	h.next = (h.next + 1) % h.size
	if h.next == 0 {
		h.full = true
	}
}

// ordered returns the samples oldest first.
func (h *history) ordered() []StatsMessage {
	if !h.full {
		return h.samples[:h.next]
	}
	out := make([]StatsMessage, 0, h.size)
	out = append(out, h.samples[h.next:]...)
	return append(out, h.samples[:h.next]...)
}

// HistoryMessage is the answer of GET /api/stats/history: the per-port
// rates of the last minutes in columns, ready for a chart. Times are Unix
// seconds; a port missing from a sample has null there.
type HistoryMessage struct {
	Interval float64       `json:"interval_s"`
	Time     []float64     `json:"time"`
	Ports    []PortHistory `json:"ports"`
}

// PortHistory is one port's rates over time.
type PortHistory struct {
	Name  string     `json:"name"`
	RxPPS []*float64 `json:"rx_pps"`
	TxPPS []*float64 `json:"tx_pps"`
	RxBPS []*float64 `json:"rx_bps"`
	TxBPS []*float64 `json:"tx_bps"`
}

// columns turns the samples into a HistoryMessage with the ports of the
// newest sample.
func (h *history) columns(interval time.Duration) HistoryMessage {
	samples := h.ordered()
	hm := HistoryMessage{Interval: interval.Seconds(), Time: make([]float64, 0, len(samples)), Ports: []PortHistory{}}
	// The first sample has no rates; leave it out.
	if len(samples) > 0 && samples[0].Interval == 0 {
		samples = samples[1:]
	}
	if len(samples) == 0 {
		return hm
	}
	for _, p := range samples[len(samples)-1].Ports {
		hm.Ports = append(hm.Ports, PortHistory{Name: p.Name})
	}
	for _, s := range samples {
		hm.Time = append(hm.Time, float64(s.Time.UnixMilli())/1000)
		for i := range hm.Ports {
			ph := &hm.Ports[i]
			var rx, tx, rxb, txb *float64
			for _, p := range s.Ports {
				if p.Name == ph.Name {
					rx, tx, rxb, txb = &p.RxPPS, &p.TxPPS, &p.RxBPS, &p.TxBPS
					break
				}
			}
			ph.RxPPS = append(ph.RxPPS, rx)
			ph.TxPPS = append(ph.TxPPS, tx)
			ph.RxBPS = append(ph.RxBPS, rxb)
			ph.TxBPS = append(ph.TxBPS, txb)
		}
	}
	return hm
}

// marshalMessage encodes a message once for every client.
func marshalMessage(m *StatsMessage) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding stats message: %w", err)
	}
	return b, nil
}
