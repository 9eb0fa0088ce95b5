package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// LatencyRow is the summary of the latency samples of one path at one
// load (or of its new flows' first packets).
type LatencyRow struct {
	Path string  `json:"path"`
	Kind string  `json:"kind"` // KindLatency or KindNewFlow
	Load float64 `json:"load,omitempty"`
	Runs int     `json:"runs"`
	Rate float64 `json:"rate"` // median offered rate
	// P50, P99 and P999 are medians over the runs, µs; MinP99 and MaxP99
	// their spread.
	P50, P99, P999 float64
	MinP99, MaxP99 float64
	Samples        int `json:"samples"`
	// Baseline is the kernel path of the same kind; AddedP99 is P99 minus
	// its P99 (NaN without one).
	Baseline string  `json:"baseline,omitempty"`
	AddedP99 float64 `json:"-"`
}

// ConnRow is one path's new connections per second: the median over the
// runs of the highest rate that lost under connLoss.
type ConnRow struct {
	Path     string  `json:"path"`
	Runs     int     `json:"runs"`
	Rate     float64 `json:"rate"`
	Min, Max float64 `json:"-"`
	Ratio    float64 `json:"-"` // against kernel NAT
}

// latencyBaseline is the kernel path whose latency a path's is compared
// with.
func latencyBaseline(path string) string {
	if strings.Contains(path, "nat") || strings.Contains(path, "NAT") {
		return kernelNATName
	}
	return kernelName
}

// SummarizeLatency groups the latency and connection-rate samples of the
// paths (in order) into rows.
func SummarizeLatency(samples []Sample, paths []string) ([]LatencyRow, []ConnRow) {
	type key struct {
		path, kind string
		load       float64
	}
	groups := map[key][]Sample{}
	var order []key
	conn := map[string]map[int][]Sample{} // path → rep → steps
	for _, s := range samples {
		switch s.Kind {
		case KindLatency, KindNewFlow:
			k := key{s.Path, s.Kind, s.Load}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], s)
		case KindConnRate:
			if conn[s.Path] == nil {
				conn[s.Path] = map[int][]Sample{}
			}
			conn[s.Path][s.Rep] = append(conn[s.Path][s.Rep], s)
		}
	}
	pathIndex := func(p string) int {
		if i := slices.Index(paths, p); i >= 0 {
			return i
		}
		return len(paths)
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(pathIndex(a.path), pathIndex(b.path)), strings.Compare(a.kind, b.kind), cmp.Compare(a.load, b.load))
	})
	var rows []LatencyRow
	p99 := map[key]float64{}
	for _, k := range order {
		ss := groups[k]
		r := LatencyRow{Path: k.path, Kind: k.kind, Load: k.load, Runs: len(ss),
			Rate: medianOf(ss, func(s Sample) float64 { return s.Offered }),
			P50:  medianOf(ss, func(s Sample) float64 { return s.P50 }), P99: medianOf(ss, func(s Sample) float64 { return s.P99 }),
			P999:     medianOf(ss, func(s Sample) float64 { return s.P999 }),
			AddedP99: math.NaN()}
		r.MinP99, r.MaxP99 = rangeOf(ss, func(s Sample) float64 { return s.P99 })
		for _, s := range ss {
			r.Samples += s.Samples
		}
		p99[k] = r.P99
		rows = append(rows, r)
	}
	for i := range rows {
		r := &rows[i]
		b := latencyBaseline(r.Path)
		if b == r.Path {
			continue
		}
		if v, ok := p99[key{b, r.Kind, r.Load}]; ok {
			r.Baseline, r.AddedP99 = b, r.P99-v
		}
	}
	return rows, summarizeConns(conn, paths)
}

// summarizeConns makes the connection-rate rows (in the order of paths)
// of each path's repetitions' steps, with ratios against kernel NAT.
func summarizeConns(conn map[string]map[int][]Sample, paths []string) []ConnRow {
	var conns []ConnRow
	for _, p := range paths {
		reps := conn[p]
		if len(reps) == 0 {
			continue
		}
		var rates []float64
		for _, ss := range reps {
			rates = append(rates, connRateOf(ss))
		}
		conns = append(conns, ConnRow{Path: p, Runs: len(rates), Rate: Median(rates), Min: slices.Min(rates), Max: slices.Max(rates), Ratio: math.NaN()})
	}
	for i := range conns {
		for _, b := range conns {
			if b.Path == kernelNATName {
				conns[i].Ratio = Ratio(conns[i].Rate, b.Rate)
			}
		}
	}
	return conns
}

// writeLatency writes the latency and connection-rate tables.
func writeLatency(b *strings.Builder, r *Report) {
	if len(r.LatencyRows) > 0 {
		b.WriteString("\nOne-way latency, generator to sink (send time in the payload, the sink's packet tap's receive time), " +
			"64B frames; load is the rate as a share of the path's own throughput in the same repetition, or of its kernel path's " +
			"when that is lower, so that both are offered the same rates; \"new flows\" are frames " +
			"that each open a NAT connection, at 2000/s:\n\n")
		b.WriteString("| path | load | rate | p50 µs | p99 µs | p99.9 µs | p99 min – max | p99 vs kernel | samples |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range r.LatencyRows {
			load := fmt.Sprintf("%.0f%%", 100*row.Load)
			if row.Kind == KindNewFlow {
				load = "new flows"
			}
			added := "—"
			if !math.IsNaN(row.AddedP99) {
				added = fmt.Sprintf("%+.0f µs", row.AddedP99)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f – %.0f | %s | %d |\n", row.Path, load, FormatPPS(row.Rate),
				row.P50, row.P99, row.P999, row.MinP99, row.MaxP99, added, row.Samples)
		}
	}
	if len(r.ConnRows) > 0 {
		fmt.Fprintf(b, "\nNew NAT connections per second (every frame a new 5-tuple; the highest rate that lost under %.0f%% of the steps %v/s "+
			"and %d bisections between the best step and the lowest above it that lost more; "+
			"an e1kbox path's worker forwards every such frame, so they and the new flows' first packets are measured with the "+
			"placement of its fast path off row, the generator on the box's receive CPU):\n\n",
			100*connLoss, connRateSteps, connRefine)
		b.WriteString("| path | connections/s (median) | min – max | vs kernel NAT |\n|---|---:|---:|---:|\n")
		for _, c := range r.ConnRows {
			fmt.Fprintf(b, "| %s | %.0f | %.0f – %.0f | %s |\n", c.Path, c.Rate, c.Min, c.Max, FormatRatio(c.Ratio))
		}
	}
}
