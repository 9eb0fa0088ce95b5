package main

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
)

// Kinds of samples.
const (
	KindThroughput = "throughput" // the generator at full speed
	KindCPU        = "cpu"        // the generator at a fixed rate, CPU time measured
	KindLatency    = "latency"    // one-way latency of established flows at a fixed rate
	KindNewFlow    = "newflow"    // one-way latency of frames that each open a connection
	KindConnRate   = "connrate"   // a fixed rate of frames that each open a connection
)

// Sample is one measurement of one path at one frame size.
type Sample struct {
	Path string `json:"path"`
	Size int    `json:"size"` // Ethernet frame size including FCS
	Kind string `json:"kind"`
	Rep  int    `json:"rep"`
	// Seconds is the length of the counting window.
	Seconds float64 `json:"seconds"`
	// Received is what the sink counted in the window; Sent is what the
	// generator handed to the kernel over a slightly longer window that
	// encloses it (Offered is its rate).
	Sent     uint64  `json:"sent"`
	Received uint64  `json:"received"`
	Offered  float64 `json:"offered_pps"`
	PPS      float64 `json:"pps"`
	// Rate is the generator's target rate (CPU samples); 0 is full speed.
	Rate float64 `json:"rate,omitempty"`
	// BusySeconds is the busy time of all CPUs in the CPU window (wall
	// time minus idle, see BusyFromIdle) and NsPerPacket that time per
	// received packet (CPU samples only). The Tick variants sum the
	// tick-sampled busy fields (user+nice+system+irq+softirq+steal)
	// instead, for comparison.
	BusySeconds     float64   `json:"busy_seconds,omitempty"`
	NsPerPacket     float64   `json:"ns_per_packet,omitempty"`
	TickBusySeconds float64   `json:"tick_busy_seconds,omitempty"`
	TickNsPerPacket float64   `json:"tick_ns_per_packet,omitempty"`
	CPUBusy         []float64 `json:"cpu_busy,omitempty"` // per CPU, fraction of the window
	// BoxBusySeconds is the box's own CPU time in the CPU window, read
	// directly (boxBusy: the receive CPU's busy time, plus the
	// appliance's threads off it, minus the generator's on it), and
	// BoxNsPerPacket that per received packet; 0 for the direct path.
	BoxBusySeconds float64 `json:"box_busy_seconds,omitempty"`
	BoxNsPerPacket float64 `json:"box_ns_per_packet,omitempty"`
	// RxIPIs and RxIRQs are the function-call IPIs (RPS waking the
	// receive CPU) and all interrupts the box's receive CPU took per
	// second of the CPU window; 0 for the direct path.
	RxIPIs float64 `json:"rx_ipis_per_s,omitempty"`
	RxIRQs float64 `json:"rx_irqs_per_s,omitempty"`
	// Latency samples: Load is the rate as a fraction of the path's
	// throughput, P50/P99/P999 the quantiles in µs of Samples frames.
	Load    float64 `json:"load,omitempty"`
	P50     float64 `json:"p50_us,omitempty"`
	P99     float64 `json:"p99_us,omitempty"`
	P999    float64 `json:"p999_us,omitempty"`
	Samples int     `json:"samples,omitempty"`
}

// Row is the summary of one path at one frame size.
type Row struct {
	Name      string  `json:"name"` // e.g. "e1kbox bridge 64B"
	Path      string  `json:"path"`
	Size      int     `json:"size"`
	Placement string  `json:"placement"`
	Runs      int     `json:"runs"`
	PPS       float64 `json:"pps"`     // median
	MinPPS    float64 `json:"min_pps"` // spread of the runs
	MaxPPS    float64 `json:"max_pps"`
	Offered   float64 `json:"offered_pps"` // median
	// Ratio is PPS over the kernel bridge's (Baseline's, if set) at the
	// same size; NaN (null in JSON) when there is no baseline row.
	Ratio float64 `json:"-"`
	// Baseline is the path of the ratio when it is not the kernel bridge.
	Baseline string `json:"baseline,omitempty"`
	// GenLimited: the sink got (nearly) all the generator sent, so the
	// generator, not the path, set the rate; the path can do more.
	GenLimited bool   `json:"generator_limited"`
	Error      string `json:"error,omitempty"`
}

// genLimitedLoss is the loss below which a row counts as generator-limited.
const genLimitedLoss = 0.02

// CPURow is the summary of the CPU samples of one path.
type CPURow struct {
	Name      string  `json:"name"`
	Path      string  `json:"path"`
	Size      int     `json:"size"`
	Placement string  `json:"placement"`
	Rate      float64 `json:"rate"`
	Runs      int     `json:"runs"`
	PPS       float64 `json:"pps"`           // median received rate
	NsPerPkt  float64 `json:"ns_per_packet"` // median, all CPUs
	// MinNsPerPkt and MaxNsPerPkt are the spread of the runs.
	MinNsPerPkt float64 `json:"-"`
	MaxNsPerPkt float64 `json:"-"`
	// TickNsPerPkt is NsPerPkt from the tick-sampled busy fields.
	TickNsPerPkt float64 `json:"-"`
	// BoxNsPerPkt is the box's own CPU time per packet, the median over
	// the repetitions of Sample.BoxNsPerPacket (read directly: the
	// receive CPU's busy time, plus the appliance's threads off it, minus
	// the generator's thread on it), MinBoxNsPerPkt and MaxBoxNsPerPkt
	// their range. Where the samples have no direct reading it is
	// DiffNsPerPkt and its range.
	BoxNsPerPkt    float64 `json:"-"`
	MinBoxNsPerPkt float64 `json:"-"`
	MaxBoxNsPerPkt float64 `json:"-"`
	// DiffNsPerPkt is NsPerPkt minus the direct path's (the generator's
	// and the sink's share), each repetition against the direct path's
	// measurement of the same repetition (they run back to back), the
	// median of those differences (without paired repetitions the
	// difference of the medians); NaN without a direct row. A difference
	// of two noisy numbers: it can come out negative for cheap paths.
	DiffNsPerPkt    float64 `json:"-"`
	MinDiffNsPerPkt float64 `json:"-"`
	MaxDiffNsPerPkt float64 `json:"-"`
	// RxIPIs is the median of Sample.RxIPIs: how often the receive CPU
	// was woken for the path's frames (NaN without readings).
	RxIPIs float64 `json:"-"`
	// Ratio is NsPerPkt over the kernel bridge's (Baseline's, if set); NaN
	// without a baseline row.
	Ratio float64 `json:"-"`
	// Baseline is the path of the ratio when it is not the kernel bridge.
	Baseline string `json:"baseline,omitempty"`
	// Overloaded: the path did not carry the offered rate (received under
	// 95% of it), so the cost includes the frames dropped on the way.
	Overloaded bool   `json:"overloaded"`
	Error      string `json:"error,omitempty"`
}

// overloadedShare is the share of the offered rate under which a CPU row
// counts as overloaded.
const overloadedShare = 0.95

// Report is everything a run produced.
type Report struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Host     HostInfo  `json:"host"`
	Settings Settings  `json:"settings"`
	Rows     []Row     `json:"rows"`
	CPURows  []CPURow  `json:"cpu_rows"`
	// LatencyRows, ConnRows and Targets: see SummarizeLatency and
	// EvalTargets.
	LatencyRows []LatencyRow `json:"latency_rows,omitempty"`
	ConnRows    []ConnRow    `json:"conn_rows,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	Samples     []Sample     `json:"samples"`
	Notes       []string     `json:"notes,omitempty"`
}

// HostInfo describes the machine the numbers come from.
type HostInfo struct {
	Kernel string `json:"kernel"`
	CPUs   string `json:"cpus"`
	Model  string `json:"cpu_model,omitempty"`
	// BPFJIT is whether the host's kernel JIT-compiles the fast path's
	// programs (fastpath.KernelReport.JIT: "1", "0", "2", "absent",
	// "unknown"): the gokrazy image's kernel has no JIT, so its rows would
	// cost more there.
	BPFJIT string `json:"bpf_jit,omitempty"`
	// IdleBusy is the fraction of all CPUs busy before the run with no
	// traffic: other load on the machine that skews the numbers.
	IdleBusy float64 `json:"idle_busy"`
	// RepIdleBusy is the same, measured before each repetition.
	RepIdleBusy []float64 `json:"idle_busy_per_rep"`
}

// Settings are the knobs the run used.
type Settings struct {
	Reps      int     `json:"reps"`
	Warmup    string  `json:"warmup"`
	Duration  string  `json:"duration"`
	CPUWindow string  `json:"cpu_window"`
	Sizes     []int   `json:"sizes"`
	Rules     []int   `json:"rules"`
	Flows     int     `json:"flows"`
	Rate      float64 `json:"cpu_rate"`
	Generator string  `json:"generator"`
	// RxStandIn is how b0's frames reach the box's receive CPU: "rps"
	// or "napi" (see -rx).
	RxStandIn string `json:"rx_stand_in"`
}

// jsonFloat writes NaN and infinities as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(f), 'g', -1, 64), nil
}

// MarshalJSON writes undefined (NaN) rates and ratios as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	return json.Marshal(struct {
		plain
		PPS     jsonFloat `json:"pps"`
		MinPPS  jsonFloat `json:"min_pps"`
		MaxPPS  jsonFloat `json:"max_pps"`
		Offered jsonFloat `json:"offered_pps"`
		Ratio   jsonFloat `json:"ratio"`
	}{plain(r), jsonFloat(r.PPS), jsonFloat(r.MinPPS), jsonFloat(r.MaxPPS), jsonFloat(r.Offered), jsonFloat(r.Ratio)})
}

// MarshalJSON writes undefined (NaN) costs and ratios as null.
func (r CPURow) MarshalJSON() ([]byte, error) {
	type plain CPURow
	return json.Marshal(struct {
		plain
		PPS          jsonFloat `json:"pps"`
		NsPerPkt     jsonFloat `json:"ns_per_packet"`
		MinNsPerPkt  jsonFloat `json:"min_ns_per_packet"`
		MaxNsPerPkt  jsonFloat `json:"max_ns_per_packet"`
		TickNsPerPkt jsonFloat `json:"tick_ns_per_packet"`
		BoxNsPerPkt  jsonFloat `json:"box_ns_per_packet"`
		MinBox       jsonFloat `json:"min_box_ns_per_packet"`
		MaxBox       jsonFloat `json:"max_box_ns_per_packet"`
		Diff         jsonFloat `json:"all_minus_direct_ns_per_packet"`
		Ratio        jsonFloat `json:"ratio"`
	}{plain(r), jsonFloat(r.PPS), jsonFloat(r.NsPerPkt), jsonFloat(r.MinNsPerPkt), jsonFloat(r.MaxNsPerPkt),
		jsonFloat(r.TickNsPerPkt), jsonFloat(r.BoxNsPerPkt), jsonFloat(r.MinBoxNsPerPkt), jsonFloat(r.MaxBoxNsPerPkt), jsonFloat(r.DiffNsPerPkt), jsonFloat(r.Ratio)})
}

// Median returns the median of xs (the mean of the middle two for an even
// count), NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Ratio returns a/b, NaN if either is not a positive finite number.
func Ratio(a, b float64) float64 {
	if !(a >= 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.NaN()
	}
	return a / b
}

// FormatRatio writes r like "0.52x", "n/a" if undefined.
func FormatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}

// FormatPPS writes a packet rate in Mpps with three decimals ("1.234 Mpps").
func FormatPPS(pps float64) string {
	if math.IsNaN(pps) || pps < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(pps/1e6, 'f', 3, 64) + " Mpps"
}

// formatNs writes nanoseconds per packet with no decimals, "n/a" if
// undefined.
func formatNs(ns float64) string {
	if math.IsNaN(ns) || math.IsInf(ns, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(ns, 'f', 0, 64)
}

// RowName names a path at a frame size: "kernel bridge 64B".
func RowName(path string, size int) string { return path + " " + strconv.Itoa(size) + "B" }
