package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Target is one of the fast path or dashboard issue's goals, measured in
// this run.
type Target struct {
	Name  string `json:"name"`
	Goal  string `json:"goal"`
	Value string `json:"value"`
	// Met is false also when a row it needs is missing (Value says so).
	Met bool `json:"met"`
}

// EvalTargets measures the goals against the report's rows (the first
// frame size).
func EvalTargets(r *Report) []Target {
	if len(r.Settings.Sizes) == 0 {
		return nil
	}
	size := r.Settings.Sizes[0]
	box := map[string]float64{}
	for _, c := range r.CPURows {
		if c.Size == size && c.Runs > 0 {
			box[c.Path] = c.BoxNsPerPkt
		}
	}
	pps := map[string]float64{}
	for _, row := range r.Rows {
		if row.Size == size && row.Runs > 0 {
			pps[row.Path] = row.PPS
		}
	}
	var out []Target
	ratio := func(name, goal string, limit float64, atMost bool, m map[string]float64, a, b, unit string) {
		t := Target{Name: name, Goal: goal}
		va, oka := m[a]
		vb, okb := m[b]
		v := Ratio(va, vb)
		switch {
		case !oka || !okb:
			t.Value = "not measured"
		case math.IsNaN(v):
			t.Value = fmt.Sprintf("n/a (%s %.0f, %s %.0f %s)", a, va, b, vb, unit)
		default:
			t.Value = fmt.Sprintf("%.2fx (%.0f / %.0f %s)", v, va, vb, unit)
			t.Met = atMost && v <= limit || !atMost && v >= limit
		}
		out = append(out, t)
	}
	// The box targets also show the ratio repetition by repetition: the
	// rows of one repetition run back to back, so a slow spell of the
	// host falls on both. Met stays the ratio of the medians.
	boxRatio := func(name, goal string, limit float64, a, b string) {
		ratio(name, goal, limit, true, box, a, b, "ns")
		if rs := PairedBoxRatios(r.Samples, size, a, b); len(rs) > 1 {
			t := &out[len(out)-1]
			t.Value += fmt.Sprintf("; by repetition %.2fx (%.2f – %.2f, %d repetitions)", Median(rs), slices.Min(rs), slices.Max(rs), len(rs))
		}
	}
	boxRatio("box CPU per packet, NAT", "e1kbox nat ≤ 0.7x kernel NAT", 0.7, "e1kbox nat", kernelNATName)
	boxRatio("box CPU per packet, bridge", "e1kbox bridge ≤ 0.7x kernel bridge", 0.7, e1kboxName, kernelName)
	boxRatio("box CPU per packet, fw4-like rules", "e1kbox nat + fw4 rules ≤ 0.5x kernel NAT + fw4 rules", 0.5,
		"e1kbox nat"+fw4Suffix, kernelNATName+fw4Suffix)
	// The PPPoE issue's: the fast path frames the session at little cost.
	for _, p := range []string{"e1kbox nat" + wanPPPoESuffix, "e1kbox nat" + wanPPPoESuffix + inVLANSuffix} {
		if _, ok := box[p]; ok {
			boxRatio("box CPU per packet, "+p, p+" ≤ 1.15x e1kbox nat", 1.15, p, "e1kbox nat")
		}
	}
	// The box figures above must hold still: each is a difference of two
	// all-CPU figures, paired per repetition.
	for _, c := range r.CPURows {
		if c.Size != size || c.Runs == 0 {
			continue
		}
		switch c.Path {
		case "e1kbox nat", kernelNATName, e1kboxName, kernelName, "e1kbox nat" + fw4Suffix, kernelNATName + fw4Suffix:
			t := Target{Name: "box CPU spread, " + c.Path, Goal: "(max − min) / median of the repetitions' box figures < 5%"}
			if sp := c.BoxSpread(); math.IsNaN(sp) {
				t.Value = "not measured (needs 2 or more repetitions and the direct path)"
			} else {
				t.Value = fmt.Sprintf("%.1f%% (%.0f – %.0f ns, median %.0f, %d repetitions)", 100*sp, c.MinBoxNsPerPkt, c.MaxBoxNsPerPkt, c.BoxNsPerPkt, c.Runs)
				t.Met = sp < 0.05
			}
			out = append(out, t)
		}
	}
	ratio("IPv6 vs kernel IPv6+nft", e1kbox6Name+" ≥ 1.0x "+kernel6Name, 1.0, false, pps, e1kbox6Name, kernel6Name, "pps")
	for _, base := range []string{"e1kbox nat", e1kboxName, e1kbox6Name} {
		for _, p := range r.Rows {
			if p.Size == size && strings.HasPrefix(p.Path, base+" + ") && strings.HasSuffix(p.Path, "k rules") {
				ratio("10k rules, "+base, p.Path+" ≥ 0.9x of its 0-rule rate", 0.9, false, pps, p.Path, base, "pps")
				// The rate can be the generator's: the CPU per packet
				// says it too (0-rule cost over the rules' cost).
				ratio("10k rules, "+base+", CPU", "box CPU per packet of "+base+" ≥ 0.9x of "+p.Path+"'s", 0.9, false, box, base, p.Path, "ns")
			}
		}
	}
	for _, row := range r.LatencyRows {
		if row.Kind == KindLatency && (row.Load == 0.1 || row.Load == 0.5) && !strings.Contains(row.Path, "off") && row.Baseline != "" {
			t := Target{Name: fmt.Sprintf("p99 latency at %.0f%%, %s", 100*row.Load, row.Path), Goal: "≤ kernel's + 50 µs"}
			t.Value = fmt.Sprintf("%+.0f µs (%.0f vs %.0f µs)", row.AddedP99, row.P99, row.P99-row.AddedP99)
			t.Met = row.AddedP99 <= 50
			out = append(out, t)
		}
		if row.Kind == KindNewFlow && row.Baseline != "" {
			t := Target{Name: "first packets of new flows, " + row.Path, Goal: "p99 ≤ kernel's + 1 ms"}
			t.Value = fmt.Sprintf("%+.0f µs (%.0f vs %.0f µs)", row.AddedP99, row.P99, row.P99-row.AddedP99)
			t.Met = row.AddedP99 <= 1000
			out = append(out, t)
		}
	}
	for _, c := range r.ConnRows {
		if c.Path != kernelNATName {
			out = append(out, Target{Name: "new connections/s, " + c.Path, Goal: "≥ 2x kernel NAT",
				Value: fmt.Sprintf("%s (%.0f/s)", FormatRatio(c.Ratio), c.Rate), Met: c.Ratio >= 2})
		}
	}
	// The dashboard issue's: WebSocket clients cost at most 5 % of the
	// rate (and, where the generator sets the rate, of the CPU).
	all := map[string]float64{}
	for _, c := range r.CPURows {
		if c.Size == size && c.Runs > 0 {
			all[c.Path] = c.NsPerPkt
		}
	}
	for _, row := range r.Rows {
		if row.Size == size && row.Baseline != "" && strings.HasSuffix(row.Path, " ws clients") {
			ratio("dashboard clients, "+row.Path, "≥ 0.95x of "+row.Baseline, 0.95, false, pps, row.Path, row.Baseline, "pps")
			ratio("dashboard clients, "+row.Path+", CPU", "all CPUs per packet of "+row.Baseline+" ≥ 0.95x of "+row.Path+"'s", 0.95, false, all,
				row.Baseline, row.Path, "ns")
		}
	}
	for _, p := range []string{"e1kbox bridge same", "e1kbox bridge same" + fastPathOffSuffix} {
		if _, ok := pps[p]; ok {
			ratio("worker on the RX CPU, "+p, "≥ 0.5x kernel bridge", 0.5, false, pps, p, kernelName, "pps")
		}
	}
	return out
}

// PairedBoxRatios is row a's box CPU per packet over row b's in each
// repetition both measured it (CPU samples of this size), in repetition
// order.
func PairedBoxRatios(ss []Sample, size int, a, b string) []float64 {
	byRep := map[int]float64{}
	for _, s := range ss {
		if s.Kind == KindCPU && s.Size == size && s.Path == b && s.BoxNsPerPacket > 0 {
			byRep[s.Rep] = s.BoxNsPerPacket
		}
	}
	var out []float64
	for _, s := range ss {
		if s.Kind == KindCPU && s.Size == size && s.Path == a && s.BoxNsPerPacket > 0 {
			if d, ok := byRep[s.Rep]; ok {
				out = append(out, s.BoxNsPerPacket/d)
			}
		}
	}
	return out
}

// writeTargets writes the targets table.
func writeTargets(b *strings.Builder, r *Report) {
	if len(r.Targets) == 0 {
		return
	}
	b.WriteString("\nThe fast path and dashboard issues' targets, measured in this run:\n\n| target | goal | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", t.Name, t.Goal, t.Value, met)
	}
}
