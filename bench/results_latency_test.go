package main

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQuantile(t *testing.T) {
	ns := []int64{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := quantile(ns, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v µs, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of nothing = %v, want 0", got)
	}
}

func TestSummarizeLatency(t *testing.T) {
	lat := func(path string, rep int, load, p99 float64) Sample {
		return Sample{Path: path, Kind: KindLatency, Rep: rep, Load: load, P50: p99 / 2, P99: p99, P999: 2 * p99, Samples: 100, Offered: 1000}
	}
	step := func(path string, rep int, rate, pps float64) Sample {
		return Sample{Path: path, Kind: KindConnRate, Rep: rep, Offered: rate, PPS: pps}
	}
	samples := []Sample{
		lat("e1kbox nat", 1, 0.1, 40), lat(kernelNATName, 1, 0.1, 30), lat("e1kbox nat", 2, 0.1, 60), lat(kernelNATName, 2, 0.1, 30),
		lat("e1kbox bridge", 1, 0.5, 25), lat(kernelName, 1, 0.5, 20),
		{Path: "e1kbox nat", Kind: KindNewFlow, Rep: 1, P99: 900}, {Path: kernelNATName, Kind: KindNewFlow, Rep: 1, P99: 100},
		step(kernelNATName, 1, 50000, 50000), step(kernelNATName, 1, 100000, 90000),
		step("e1kbox nat", 1, 50000, 50000), step("e1kbox nat", 1, 100000, 99500), step("e1kbox nat", 1, 150000, 100000),
		{Path: "e1kbox nat", Kind: KindThroughput, PPS: 1},
	}
	rows, conns := SummarizeLatency(samples, []string{kernelName, "e1kbox bridge", kernelNATName, "e1kbox nat"})
	type got struct {
		Path, Kind string
		Load, P99  float64
		Runs       int
		Added      float64
	}
	var g []got
	for _, r := range rows {
		a := r.AddedP99
		if math.IsNaN(a) {
			a = -1
		}
		g = append(g, got{r.Path, r.Kind, r.Load, r.P99, r.Runs, a})
	}
	want := []got{
		{kernelName, KindLatency, 0.5, 20, 1, -1},
		{"e1kbox bridge", KindLatency, 0.5, 25, 1, 5},
		{kernelNATName, KindLatency, 0.1, 30, 2, -1},
		{kernelNATName, KindNewFlow, 0, 100, 1, -1},
		{"e1kbox nat", KindLatency, 0.1, 50, 2, 20},
		{"e1kbox nat", KindNewFlow, 0, 900, 1, 800},
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("latency rows (-want +got):\n%s", diff)
	}
	if len(conns) != 2 || conns[0].Rate != 50000 || conns[1].Rate != 100000 || conns[1].Ratio != 2 {
		t.Errorf("connection rows %+v, want kernel 50000/s, e1kbox 100000/s (2x)", conns)
	}
	var b strings.Builder
	writeLatency(&b, &Report{LatencyRows: rows, ConnRows: conns})
	for _, s := range []string{"| e1kbox nat | 10% |", "+20 µs", "| e1kbox nat | new flows |", "| e1kbox nat | 100000 | 100000 – 100000 | 2.00x |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, b.String())
		}
	}
}

func TestEvalTargets(t *testing.T) {
	r := &Report{Settings: Settings{Sizes: []int{64}},
		CPURows: []CPURow{
			{Path: kernelNATName, Size: 64, Runs: 3, BoxNsPerPkt: 1000, MinBoxNsPerPkt: 950, MaxBoxNsPerPkt: 1020},
			{Path: "e1kbox nat", Size: 64, Runs: 3, BoxNsPerPkt: 600, MinBoxNsPerPkt: 590, MaxBoxNsPerPkt: 610},
			{Path: kernelName, Size: 64, Runs: 3, BoxNsPerPkt: 1000, MinBoxNsPerPkt: math.NaN(), MaxBoxNsPerPkt: math.NaN()},
			{Path: e1kboxName, Size: 64, Runs: 3, BoxNsPerPkt: 800, MinBoxNsPerPkt: 790, MaxBoxNsPerPkt: 820, NsPerPkt: 5000},
			{Path: e1kboxName + " + 100 ws clients", Size: 64, Runs: 3, NsPerPkt: 5500},
		},
		Rows: []Row{
			{Path: kernelName, Size: 64, Runs: 3, PPS: 1e6}, {Path: "e1kbox bridge same", Size: 64, Runs: 3, PPS: 0.6e6},
			{Path: "e1kbox nat", Size: 64, Runs: 3, PPS: 1e6}, {Path: "e1kbox nat + 10k rules", Size: 64, Runs: 3, PPS: 0.95e6},
			{Path: e1kboxName, Size: 64, Runs: 3, PPS: 1e6}, {Path: e1kboxName + " + 100 ws clients", Size: 64, Runs: 3, PPS: 0.97e6, Baseline: e1kboxName},
		},
		LatencyRows: []LatencyRow{{Path: "e1kbox nat", Kind: KindLatency, Load: 0.1, P99: 70, Baseline: kernelNATName, AddedP99: 40}},
		ConnRows:    []ConnRow{{Path: kernelNATName, Rate: 1e5, Ratio: 1}, {Path: "e1kbox nat", Rate: 1.5e5, Ratio: 1.5}},
	}
	met := map[string]bool{}
	for _, tg := range EvalTargets(r) {
		met[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"box CPU per packet, NAT":                                true,
		"box CPU per packet, bridge":                             false,
		"box CPU per packet, fw4-like rules":                     false, // not measured
		"10k rules, e1kbox nat":                                  true,
		"10k rules, e1kbox nat, CPU":                             false, // not measured
		"p99 latency at 10%, e1kbox nat":                         true,
		"new connections/s, e1kbox nat":                          false,
		"worker on the RX CPU, e1kbox bridge same":               true,
		"dashboard clients, e1kbox bridge + 100 ws clients":      true,
		"dashboard clients, e1kbox bridge + 100 ws clients, CPU": false, // 5000/5500 = 0.91
		"IPv6 vs kernel IPv6+nft":                                false, // not measured
		"box CPU spread, kernel NAT":                             false, // 70 / 1000
		"box CPU spread, e1kbox nat":                             true,  // 20 / 600
		"box CPU spread, kernel bridge":                          false, // not paired
		"box CPU spread, e1kbox bridge":                          true,  // 30 / 800
	}
	if diff := cmp.Diff(want, met); diff != "" {
		t.Errorf("targets met (-want +got):\n%s", diff)
	}
}

func TestEvalTargetsIPv6(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		kernel, e1k, e1k10k      float64           // pps
		ns, ns10k                float64           // box ns per packet
		want                     map[string]string // target name: measured value
		met, metRules, metRules2 bool
	}{
		{"met", 1e6, 1.05e6, 0.95e6, 500, 520, map[string]string{
			"IPv6 vs kernel IPv6+nft":     "1.05x (1050000 / 1000000 pps)",
			"10k rules, e1kbox ipv6":      "0.90x (950000 / 1050000 pps)",
			"10k rules, e1kbox ipv6, CPU": "0.96x (500 / 520 ns)",
		}, true, true, true},
		{"missed", 1e6, 0.8e6, 0.6e6, 500, 800, map[string]string{
			"IPv6 vs kernel IPv6+nft":     "0.80x (800000 / 1000000 pps)",
			"10k rules, e1kbox ipv6":      "0.75x (600000 / 800000 pps)",
			"10k rules, e1kbox ipv6, CPU": "0.62x (500 / 800 ns)",
		}, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Settings: Settings{Sizes: []int{64}},
				Rows: []Row{{Path: kernel6Name, Size: 64, Runs: 1, PPS: tc.kernel}, {Path: e1kbox6Name, Size: 64, Runs: 1, PPS: tc.e1k},
					{Path: e1kbox6Name + " + 10k rules", Size: 64, Runs: 1, PPS: tc.e1k10k}},
				CPURows: []CPURow{{Path: e1kbox6Name, Size: 64, Runs: 1, BoxNsPerPkt: tc.ns}, {Path: e1kbox6Name + " + 10k rules", Size: 64, Runs: 1, BoxNsPerPkt: tc.ns10k}},
			}
			got := map[string]string{}
			met := map[string]bool{}
			for _, tg := range EvalTargets(r) {
				if _, ok := tc.want[tg.Name]; ok {
					got[tg.Name], met[tg.Name] = tg.Value, tg.Met
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			wantMet := map[string]bool{"IPv6 vs kernel IPv6+nft": tc.met, "10k rules, e1kbox ipv6": tc.metRules, "10k rules, e1kbox ipv6, CPU": tc.metRules2}
			if diff := cmp.Diff(wantMet, met); diff != "" {
				t.Errorf("met (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConnBracket(t *testing.T) {
	step := func(offered, pps float64) Sample {
		return Sample{Kind: KindConnRate, Offered: offered, PPS: pps}
	}
	type bracket struct {
		Lo, Hi float64
		OK     bool
	}
	for _, tc := range []struct {
		name string
		ss   []Sample
		want bracket
	}{
		{"between two steps", []Sample{step(100e3, 100e3), step(200e3, 199e3), step(300e3, 250e3), step(400e3, 260e3)}, bracket{200e3, 300e3, true}},
		{"after a bisection that passed", []Sample{step(200e3, 200e3), step(300e3, 250e3), step(400e3, 250e3), step(250e3, 249e3)}, bracket{250e3, 300e3, true}},
		{"after a bisection that lost", []Sample{step(200e3, 200e3), step(300e3, 250e3), step(400e3, 250e3), step(250e3, 240e3)}, bracket{200e3, 250e3, true}},
		{"a lost step below the best does not bound it", []Sample{step(100e3, 90e3), step(150e3, 150e3), step(200e3, 150e3)}, bracket{150e3, 200e3, true}},
		{"the generator's limit: the loss is below the best", []Sample{step(480e3, 480e3), step(470e3, 400e3)}, bracket{}},
		{"within 5 %", []Sample{step(200e3, 200e3), step(209e3, 150e3)}, bracket{}},
		{"nothing lost", []Sample{step(100e3, 100e3), step(800e3, 800e3)}, bracket{}},
		{"nothing passed", []Sample{step(25e3, 10e3), step(50e3, 10e3)}, bracket{}},
		{"other kinds do not count", []Sample{step(100e3, 100e3), {Kind: KindThroughput, Offered: 150e3, PPS: 1}}, bracket{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, ok := connBracket(tc.ss)
			if diff := cmp.Diff(tc.want, bracket{lo, hi, ok}); diff != "" {
				t.Errorf("connBracket (-want +got):\n%s", diff)
			}
		})
	}
}
