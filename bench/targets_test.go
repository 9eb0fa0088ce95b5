package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPairedBoxRatios(t *testing.T) {
	cpu := func(path string, size, rep int, box float64) Sample {
		return Sample{Path: path, Size: size, Kind: KindCPU, Rep: rep, BoxNsPerPacket: box}
	}
	for _, tc := range []struct {
		name string
		ss   []Sample
		want []float64
	}{
		{"paired", []Sample{cpu("b", 64, 1, 1000), cpu("a", 64, 1, 500), cpu("b", 64, 2, 2000), cpu("a", 64, 2, 1500)}, []float64{0.5, 0.75}},
		{"a repetition b missed", []Sample{cpu("a", 64, 1, 500), cpu("b", 64, 2, 1000), cpu("a", 64, 2, 800)}, []float64{0.8}},
		{"no box figure", []Sample{cpu("b", 64, 1, 0), cpu("a", 64, 1, 500)}, nil},
		{"other size and kind", []Sample{cpu("b", 1518, 1, 1000), cpu("a", 64, 1, 500),
			{Path: "b", Size: 64, Kind: KindThroughput, Rep: 1, BoxNsPerPacket: 1000}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PairedBoxRatios(tc.ss, 64, "a", "b")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvalTargetsByRepetition checks that a box target shows the ratio by
// repetition and is still judged by the ratio of the medians.
func TestEvalTargetsByRepetition(t *testing.T) {
	r := &Report{Settings: Settings{Sizes: []int{64}},
		CPURows: []CPURow{
			{Path: kernelNATName, Size: 64, Runs: 3, BoxNsPerPkt: 1000},
			{Path: "e1kbox nat", Size: 64, Runs: 3, BoxNsPerPkt: 750},
		},
	}
	for rep, v := range [][2]float64{{1000, 600}, {2000, 1300}, {900, 750}} {
		r.Samples = append(r.Samples,
			Sample{Path: kernelNATName, Size: 64, Kind: KindCPU, Rep: rep + 1, BoxNsPerPacket: v[0]},
			Sample{Path: "e1kbox nat", Size: 64, Kind: KindCPU, Rep: rep + 1, BoxNsPerPacket: v[1]})
	}
	for _, tg := range EvalTargets(r) {
		if tg.Name != "box CPU per packet, NAT" {
			continue
		}
		if want := "0.75x (750 / 1000 ns); by repetition 0.65x (0.60 – 0.83, 3 repetitions)"; tg.Value != want {
			t.Errorf("value %q, want %q", tg.Value, want)
		}
		if tg.Met {
			t.Error("met by the ratio by repetition; want the ratio of the medians (0.75x > 0.7x) to decide")
		}
		return
	}
	t.Fatal("no NAT box target")
}

// TestEvalTargetsPPPoE: the PPPoE rows' box CPU per packet is judged
// against e1kbox nat's (≤ 1.15x), only where the row was measured.
func TestEvalTargetsPPPoE(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pppoe float64 // 0: not measured
		want  map[string]bool
	}{
		{"within", 1100, map[string]bool{"box CPU per packet, e1kbox nat over PPPoE": true}},
		{"over", 1200, map[string]bool{"box CPU per packet, e1kbox nat over PPPoE": false}},
		{"not measured", 0, map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Settings: Settings{Sizes: []int{64}}, CPURows: []CPURow{{Path: "e1kbox nat", Size: 64, Runs: 3, BoxNsPerPkt: 1000}}}
			if tc.pppoe > 0 {
				r.CPURows = append(r.CPURows, CPURow{Path: "e1kbox nat over PPPoE", Size: 64, Runs: 3, BoxNsPerPkt: tc.pppoe})
			}
			got := map[string]bool{}
			for _, tg := range EvalTargets(r) {
				if strings.Contains(tg.Name, "PPPoE") {
					got[tg.Name] = tg.Met
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
