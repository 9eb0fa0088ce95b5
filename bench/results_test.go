package main

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/tuning"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1}, 5},
		{[]float64{-1, 10}, 4.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if diff := cmp.Diff(in, tc.in); diff != "" {
			t.Errorf("Median modified its input (-want +got):\n%s", diff)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{520, 1000, "0.52x"},
		{1000, 1000, "1.00x"},
		{2345, 1000, "2.35x"},
		{0, 1000, "0.00x"},
		{1, 0, "n/a"},
		{math.NaN(), 1, "n/a"},
		{1, math.NaN(), "n/a"},
		{-1, 1, "n/a"},
		{math.Inf(1), 1, "n/a"},
	} {
		if got := FormatRatio(Ratio(tc.a, tc.b)); got != tc.want {
			t.Errorf("FormatRatio(Ratio(%v, %v)) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFormatPPS(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{1234567, "1.235 Mpps"},
		{812000, "0.812 Mpps"},
		{0, "0.000 Mpps"},
		{math.NaN(), "n/a"},
	} {
		if got := FormatPPS(tc.in); got != tc.want {
			t.Errorf("FormatPPS(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// samples builds throughput samples for a path and size from rates.
func samples(path string, size int, kind string, values ...float64) []Sample {
	var out []Sample
	for i, v := range values {
		s := Sample{Path: path, Size: size, Kind: kind, Rep: i + 1, PPS: v, Offered: 2 * v}
		if kind == KindCPU {
			s.Rate, s.NsPerPacket, s.TickNsPerPacket = 200000, v, v/2
			s.PPS = 200000
		}
		out = append(out, s)
	}
	return out
}

func TestSummarize(t *testing.T) {
	var ss []Sample
	ss = append(ss, samples(directName, 64, KindThroughput, 1.5e6, 1.4e6, 1.6e6)...)
	ss = append(ss, samples(kernelName, 64, KindThroughput, 1.0e6, 0.9e6, 1.2e6)...)
	ss = append(ss, samples("e1kbox bridge", 64, KindThroughput, 0.5e6, 0.52e6, 0.7e6)...)
	ss = append(ss, samples(kernelName, 512, KindThroughput, 0.8e6)...)
	limited := samples("e1kbox bridge", 512, KindThroughput, 0.4e6)
	limited[0].Offered = 0.401e6 // no loss: the generator was the limit
	ss = append(ss, limited...)
	ss = append(ss, samples(directName, 64, KindCPU, 1000, 1100, 900)...)
	ss = append(ss, samples(kernelName, 64, KindCPU, 1500, 1650, 1400)...)
	overloaded := samples("e1kbox bridge", 64, KindCPU, 2000, 2100, 1900)
	for i := range overloaded {
		overloaded[i].PPS = 150000 // under 95% of the offered 200000
		overloaded[i].BoxNsPerPacket = []float64{700, 650, 720}[i]
		overloaded[i].RxIPIs = []float64{1800, 1700, 2000}[i]
		overloaded[i].RxIRQs = []float64{2500, 2400, 2900}[i]
	}
	ss = append(ss, overloaded...)
	paths := []string{directName, kernelName, "e1kbox bridge", "broken"}
	placements := map[string]string{kernelName: "gen cpu1, box rx cpu0, sink cpu1"}
	errs := map[string]string{"broken": "did not start"}
	rows, cpuRows := Summarize(ss, paths, []int{64, 512}, kernelName, directName, placements, errs)

	nan := math.NaN()
	wantRows := []Row{
		{Name: "direct veth (no box) 64B", Path: directName, Size: 64, Runs: 3, PPS: 1.5e6, MinPPS: 1.4e6, MaxPPS: 1.6e6, Offered: 3e6, Ratio: 1.5},
		{Name: "kernel bridge 64B", Path: kernelName, Size: 64, Placement: placements[kernelName], Runs: 3, PPS: 1e6, MinPPS: 0.9e6, MaxPPS: 1.2e6, Offered: 2e6, Ratio: 1},
		{Name: "e1kbox bridge 64B", Path: "e1kbox bridge", Size: 64, Runs: 3, PPS: 0.52e6, MinPPS: 0.5e6, MaxPPS: 0.7e6, Offered: 1.04e6, Ratio: 0.52},
		{Name: "broken 64B", Path: "broken", Size: 64, PPS: nan, MinPPS: nan, MaxPPS: nan, Offered: nan, Ratio: nan, Error: "did not start"},
		{Name: "direct veth (no box) 512B", Path: directName, Size: 512, PPS: nan, MinPPS: nan, MaxPPS: nan, Offered: nan, Ratio: nan},
		{Name: "kernel bridge 512B", Path: kernelName, Size: 512, Placement: placements[kernelName], Runs: 1, PPS: 0.8e6, MinPPS: 0.8e6, MaxPPS: 0.8e6, Offered: 1.6e6, Ratio: 1},
		{Name: "e1kbox bridge 512B", Path: "e1kbox bridge", Size: 512, Runs: 1, PPS: 0.4e6, MinPPS: 0.4e6, MaxPPS: 0.4e6, Offered: 0.401e6, Ratio: 0.5, GenLimited: true},
		{Name: "broken 512B", Path: "broken", Size: 512, PPS: nan, MinPPS: nan, MaxPPS: nan, Offered: nan, Ratio: nan, Error: "did not start"},
	}
	opts := []cmp.Option{cmpopts.EquateNaNs(), cmpopts.EquateApprox(1e-12, 0)}
	if diff := cmp.Diff(wantRows, rows, opts...); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	wantCPU := []CPURow{
		{Name: "direct veth (no box) 64B", Path: directName, Size: 64, Rate: 200000, Runs: 3, PPS: 200000, NsPerPkt: 1000,
			MinNsPerPkt: 900, MaxNsPerPkt: 1100, TickNsPerPkt: 500,
			BoxNsPerPkt: nan, MinBoxNsPerPkt: nan, MaxBoxNsPerPkt: nan, DiffNsPerPkt: nan, MinDiffNsPerPkt: nan, MaxDiffNsPerPkt: nan, RxIPIs: nan, Ratio: 1000.0 / 1500},
		{Name: "kernel bridge 64B", Path: kernelName, Size: 64, Placement: placements[kernelName], Rate: 200000, Runs: 3, PPS: 200000,
			// Each repetition's difference from the direct path's:
			// 500, 550, 500; no direct reading, so the box is that.
			NsPerPkt: 1500, MinNsPerPkt: 1400, MaxNsPerPkt: 1650, TickNsPerPkt: 750, BoxNsPerPkt: 500, MinBoxNsPerPkt: 500, MaxBoxNsPerPkt: 550,
			DiffNsPerPkt: 500, MinDiffNsPerPkt: 500, MaxDiffNsPerPkt: 550, RxIPIs: nan, Ratio: 1},
		{Name: "e1kbox bridge 64B", Path: "e1kbox bridge", Size: 64, Rate: 200000, Runs: 3, PPS: 150000, NsPerPkt: 2000,
			MinNsPerPkt: 1900, MaxNsPerPkt: 2100, TickNsPerPkt: 1000,
			// Read directly: 700, 650, 720.
			BoxNsPerPkt: 700, MinBoxNsPerPkt: 650, MaxBoxNsPerPkt: 720,
			DiffNsPerPkt: 1000, MinDiffNsPerPkt: 1000, MaxDiffNsPerPkt: 1000, RxIPIs: 1800, Ratio: 2000.0 / 1500, Overloaded: true},
		{Name: "broken 64B", Path: "broken", Size: 64, PPS: nan, NsPerPkt: nan, MinNsPerPkt: nan, MaxNsPerPkt: nan, TickNsPerPkt: nan,
			BoxNsPerPkt: nan, MinBoxNsPerPkt: nan, MaxBoxNsPerPkt: nan, DiffNsPerPkt: nan, MinDiffNsPerPkt: nan, MaxDiffNsPerPkt: nan, RxIPIs: nan, Ratio: nan, Error: "did not start"},
	}
	if diff := cmp.Diff(wantCPU, cpuRows, opts...); diff != "" {
		t.Errorf("CPU rows (-want +got):\n%s", diff)
	}
	if got := cpuRows[1].BoxSpread(); math.Abs(got-0.1) > 1e-9 {
		t.Errorf("kernel bridge box spread %v, want 0.1 ((550 - 500) / 500)", got)
	}
	if got := cpuRows[0].BoxSpread(); !math.IsNaN(got) {
		t.Errorf("direct path's box spread %v, want NaN", got)
	}
}

func TestSummarizeWithoutDirect(t *testing.T) {
	ss := append(samples(kernelName, 64, KindCPU, 1500), samples("e1kbox bridge", 64, KindCPU, 3000)...)
	_, cpuRows := Summarize(ss, []string{kernelName, "e1kbox bridge"}, []int{64}, kernelName, directName, nil, nil)
	if len(cpuRows) != 2 {
		t.Fatalf("%d CPU rows, want 2", len(cpuRows))
	}
	if got := cpuRows[1].Ratio; got != 2 {
		t.Errorf("ratio without a direct row = %v, want 2", got)
	}
	if !math.IsNaN(cpuRows[1].BoxNsPerPkt) {
		t.Errorf("box ns/pkt without a direct row = %v, want NaN", cpuRows[1].BoxNsPerPkt)
	}
}

func testReport() *Report {
	ss := append(samples(kernelName, 64, KindThroughput, 1e6), samples("e1kbox bridge", 64, KindThroughput, 0.52e6)...)
	limited := samples(kernelName, 512, KindThroughput, 0.8e6)
	limited[0].Offered = limited[0].PPS
	ss = append(ss, limited...)
	ss = append(ss, samples(kernelName, 64, KindCPU, 1500)...)
	over := samples("e1kbox bridge", 64, KindCPU, 3000)
	over[0].PPS = 150000
	ss = append(ss, over...)
	r := &Report{
		Started:  time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
		Host:     HostInfo{Kernel: "6.18", CPUs: "0-1", Model: "Test CPU", BPFJIT: "1", IdleBusy: 0.01},
		Settings: Settings{Reps: 3, Warmup: "500ms", Duration: "2s", CPUWindow: "3s", Sizes: []int{64}, Flows: 8192, Rate: 200000, Generator: "gen"},
		Samples:  ss,
		Notes:    []string{"a note"},
	}
	r.Rows, r.CPURows = Summarize(ss, []string{kernelName, "e1kbox bridge", "e1kbox bridge same"}, []int{64, 512}, kernelName, directName,
		map[string]string{kernelName: "gen cpu1, box rx cpu0, sink cpu1"}, map[string]string{"e1kbox bridge same": "exited"})
	return r
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, testReport()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"### e1kbox bench, 2026-11-30 08:00 UTC",
		"Kernel 6.18, CPUs 0-1 (Test CPU), BPF JIT on, 1% busy before the run. gen; UDP/IPv4, 8192 flows; medians of 3 runs of 2s after 500ms warm-up.",
		"| path | CPU placement | pps (median) | vs kernel bridge | min – max | offered |",
		"| kernel bridge 64B | gen cpu1, box rx cpu0, sink cpu1 | 1.000 Mpps | 1.00x | 1.000 Mpps – 1.000 Mpps | 2.000 Mpps |",
		"| e1kbox bridge 64B |  | 0.520 Mpps | 0.52x |",
		"| kernel bridge 512B | gen cpu1, box rx cpu0, sink cpu1 | 0.800 Mpps* | 1.00x | 0.800 Mpps – 0.800 Mpps | 0.800 Mpps |",
		"\\* under 2% loss: the generator",
		"| e1kbox bridge same 64B |  | failed | n/a | | |",
		"| e1kbox bridge 512B |  | no data | n/a | | |",
		"fixed offered rate of 0.200 Mpps",
		"| path | CPU placement | received | ns/pkt all CPUs | vs kernel bridge | min – max | ns/pkt box | box min – max (spread) | all CPUs − direct | rx wakes/s |",
		"| kernel bridge 64B | gen cpu1, box rx cpu0, sink cpu1 | 0.200 Mpps | 1500 | 1.00x | 1500 – 1500 | n/a |  | n/a | n/a |",
		"| e1kbox bridge 64B |  | 0.150 Mpps† | 3000 | 2.00x | 3000 – 3000 | n/a |  | n/a | n/a |",
		"† did not carry the offered rate",
		"- a note\n",
		"- failed: e1kbox bridge same: exited\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table line has the same number of cells as its header.
	for _, table := range strings.Split(md, "\n\n") {
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if !strings.HasPrefix(lines[0], "|") {
			continue
		}
		cells := strings.Count(lines[0], "|")
		for _, l := range lines[1:] {
			if n := strings.Count(l, "|"); n != cells {
				t.Errorf("row %q has %d separators, header %d", l, n, cells)
			}
		}
	}
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(testReport())
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []struct {
			Name  string   `json:"name"`
			PPS   *float64 `json:"pps"`
			Ratio *float64 `json:"ratio"`
		} `json:"rows"`
		CPURows []struct {
			Name  string   `json:"name"`
			Box   *float64 `json:"box_ns_per_packet"`
			Ratio *float64 `json:"ratio"`
		} `json:"cpu_rows"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(back.Rows) != 6 || back.Rows[1].Ratio == nil || *back.Rows[1].Ratio != 0.52 {
		t.Errorf("rows %+v, want e1kbox's ratio 0.52", back.Rows)
	}
	if back.Rows[2].Ratio != nil {
		t.Errorf("failed row's ratio %v, want null", *back.Rows[2].Ratio)
	}
	if len(back.CPURows) == 0 || back.CPURows[0].Box != nil {
		t.Errorf("CPU rows %+v: want box ns/pkt null without a direct row", back.CPURows)
	}
}

func TestRebase(t *testing.T) {
	nan := math.NaN()
	rows := []Row{
		{Path: "kernel NAT", Size: 64, Runs: 1, PPS: 2e5, Ratio: 0.5},
		{Path: "e1kbox nat", Size: 64, Runs: 1, PPS: 1e5, Ratio: 0.25},
		{Path: "e1kbox nat", Size: 512, Runs: 1, PPS: 1e5, Ratio: 0.25},
		{Path: "kernel NAT", Size: 512, Runs: 0, PPS: nan, Ratio: nan},
		{Path: "kernel bridge", Size: 64, Runs: 1, PPS: 4e5, Ratio: 1},
	}
	cpuRows := []CPURow{
		{Path: "kernel NAT", Size: 64, Runs: 1, NsPerPkt: 100, Ratio: 2},
		{Path: "e1kbox nat", Size: 64, Runs: 1, NsPerPkt: 150, Ratio: 3},
	}
	Rebase(rows, cpuRows, map[string]string{"e1kbox nat": "kernel NAT"})
	type got struct {
		Ratio    string
		Baseline string
	}
	var gotRows []got
	for _, r := range rows {
		gotRows = append(gotRows, got{FormatRatio(r.Ratio), r.Baseline})
	}
	for _, r := range cpuRows {
		gotRows = append(gotRows, got{FormatRatio(r.Ratio), r.Baseline})
	}
	want := []got{
		{"0.50x", ""}, // not rebased
		{"0.50x", "kernel NAT"},
		{"n/a", "kernel NAT"}, // the baseline has no samples at 512B
		{"n/a", ""},
		{"1.00x", ""},
		{"2.00x", ""},
		{"1.50x", "kernel NAT"},
	}
	if diff := cmp.Diff(want, gotRows); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		r        float64
		baseline string
		want     string
	}{
		{0.5, "", "0.50x"},
		{0.5, "kernel NAT", "0.50x vs kernel NAT"},
		{nan, "e1kbox bridge", "n/a vs e1kbox bridge"},
	} {
		if got := ratioCell(tc.r, tc.baseline); got != tc.want {
			t.Errorf("ratioCell(%v, %q) = %q, want %q", tc.r, tc.baseline, got, tc.want)
		}
	}
}

// TestIPv6Ratios runs the IPv6 rows' samples through Summarize and Rebase
// with buildPaths' baselines: e1kbox ipv6 against the kernel's IPv6 row,
// the 10k rules row against e1kbox ipv6, in throughput and CPU, and the
// markdown names the baselines.
func TestIPv6Ratios(t *testing.T) {
	paths := selectPaths(buildPaths([]int{10000}, []tuning.Placement{tuning.PlacementSplit}), regexp.MustCompile("ipv6"))
	var names []string
	for _, p := range paths {
		names = append(names, p.Name)
	}
	var samples []Sample
	for name, v := range map[string][2]float64{ // pps, ns per packet
		kernel6Name: {4e5, 2000}, e1kbox6Name: {5e5, 1500}, e1kbox6Name + " + 10k rules": {4.6e5, 1650}, directName: {9e5, 500},
	} {
		samples = append(samples, Sample{Path: name, Size: 64, Kind: KindThroughput, PPS: v[0], Offered: 1e6},
			Sample{Path: name, Size: 64, Kind: KindCPU, PPS: 2e5, Rate: 2e5, NsPerPacket: v[1]})
	}
	rows, cpuRows := Summarize(samples, names, []int{64}, kernelName, directName, nil, nil)
	Rebase(rows, cpuRows, baselines(paths))
	type ratio struct{ Path, Ratio, CPURatio, Baseline string }
	var got []ratio
	for i := range rows {
		got = append(got, ratio{rows[i].Path, FormatRatio(rows[i].Ratio), FormatRatio(cpuRows[i].Ratio), rows[i].Baseline})
	}
	want := []ratio{
		{kernel6Name, "n/a", "n/a", ""}, // no kernel bridge in this run
		{e1kbox6Name, "1.25x", "0.75x", kernel6Name},
		{e1kbox6Name + " + 10k rules", "0.92x", "1.10x", e1kbox6Name},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, &Report{Rows: rows, CPURows: cpuRows, Settings: Settings{Sizes: []int{64}, Rate: 2e5}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| e1kbox ipv6 64B |", "| 1.25x vs kernel IPv6 routing + nft stateful |", "| 0.92x vs e1kbox ipv6 |", "| 1.10x vs e1kbox ipv6 |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, b.String())
		}
	}
}

// TestWriteMarkdownBoxSpread: a row with paired repetitions shows the
// box figures' range and spread.
func TestWriteMarkdownBoxSpread(t *testing.T) {
	ss := append(samples(directName, 64, KindCPU, 5000, 5100, 4900), samples(kernelName, 64, KindCPU, 5500, 5650, 5400)...)
	r := &Report{Settings: Settings{Reps: 3, Sizes: []int{64}, Rate: 200000}, Samples: ss}
	r.Rows, r.CPURows = Summarize(ss, []string{directName, kernelName}, []int{64}, kernelName, directName, nil, nil)
	var b strings.Builder
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "| 5500 | 1.00x | 5400 – 5650 | 500 | 500 – 550 (10%) | 500 |"; !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
}

func TestStandIn(t *testing.T) {
	for _, tc := range []struct{ rx, want string }{
		{"", "RPS on b0"}, // reports from before -rx
		{"rps", "RPS on b0"},
		{"napi", "threaded NAPI"},
		{"other", "other"},
	} {
		if got := standIn(tc.rx); !strings.Contains(got, tc.want) {
			t.Errorf("standIn(%q) = %q, want it to contain %q", tc.rx, got, tc.want)
		}
	}
}
