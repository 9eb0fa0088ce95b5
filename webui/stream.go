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
	FastPath       *FastPathRates    `json:"fast_path"`
	Config         *ConfigState      `json:"config"`
	// Alarms are what the owner should look at now (none: empty).
	Alarms []Alarm `json:"alarms"`
	// Router is the router's status, refreshed every few seconds; null
	// without a router (bridge mode).
	Router *RouterStatus `json:"router"`
	// IPv6 is the IPv6 router's counters; absent without one.
	IPv6 *IPv6Counters `json:"ipv6,omitempty"`
}

// FastPathRates are the fast path's state and the frames it forwards per
// second.
type FastPathRates struct {
	FastPathSummary
	PerSecond float64 `json:"per_s"`
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
		IPv6:           cur.IPv6,
	}
	var dt float64
	if prev != nil {
		dt = cur.Time.Sub(prev.Time).Seconds()
		if dt < 0 {
			dt = 0
		}
	}
	m.Interval = dt
	if f := cur.FastPath; f != nil {
		m.FastPath = &FastPathRates{FastPathSummary: *f}
		if prev != nil && prev.FastPath != nil {
			m.FastPath.PerSecond = rate(f.Packets, prev.FastPath.Packets, dt)
		}
	}
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

// marshalMessage encodes a message once for every client.
func marshalMessage(m *StatsMessage) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding stats message: %w", err)
	}
	return b, nil
}
