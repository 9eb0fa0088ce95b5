package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"e1kbox/tuning"
)

// The receive stand-ins: how the frames the generator sends into g0 reach
// the box's receive CPU, in place of a NIC's interrupt.
const (
	// rxRPS: RPS on b0 queues them to the receive CPU's backlog; an IPI
	// wakes that CPU each time its backlog was empty.
	rxRPS = "rps"
	// rxNAPI: b0's threaded NAPI, pinned to the receive CPU, polls them
	// from the veth's ring; after a poll that found frames it polls again
	// rxNAPITimeout later instead of being woken (napi_defer_hard_irqs),
	// as a NIC's interrupt throttling would.
	rxNAPI = "napi"
)

// options are the command-line settings.
type options struct {
	quick      bool
	reps       int
	sizes      []int
	rules      []int
	placements []tuning.Placement
	flows      int
	rate       float64
	warmup     time.Duration
	duration   time.Duration
	cpuWindow  time.Duration
	out        string
	profile    string
	appliance  string
	paths      *regexp.Regexp
	waitIdle   time.Duration
	// applianceTune runs the appliance with -tune=true.
	applianceTune bool
	// genRing makes the generator send from a mapped TX ring.
	genRing bool
	// latency and connRate run the latency and connection-rate
	// measurements of the paths that have them.
	latency, connRate bool
	// latencyDump is a directory for the latency runs' raw samples.
	latencyDump string
	// rx is the receive stand-in (rxRPS or rxNAPI).
	rx string
}

// parseFlags parses args (without the program name).
func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var (
		o          options
		sizes      = fs.String("sizes", "64,512", "Ethernet frame sizes in bytes including FCS, comma-separated")
		rulesFlag  = fs.String("rules", "1000,10000", "non-matching rule counts: a linear nft row per count; the largest for the nft set and e1kbox rows")
		placements = fs.String("placements", "split,same", "e1kbox CPU placements to measure (tuning placements: split, same, threaded)")
		paths      = fs.String("paths", "", "only paths whose name matches this case-insensitive regular expression, and their ratio baselines (default all)")
		rate       = fs.Float64("rate", 200000, "offered rate in packets/s for the CPU-cost table; 0 skips it")
		reps       = fs.Int("reps", 0, "repetitions per path (default 3, 1 with -quick)")
	)
	fs.BoolVar(&o.quick, "quick", false, "one repetition, short windows")
	fs.IntVar(&o.flows, "flows", 8192, "UDP flows (source ports cycled); more than the e1kbox flow cache holds by default")
	fs.DurationVar(&o.warmup, "warmup", 0, "warm-up before counting (default 500ms, 300ms with -quick)")
	fs.DurationVar(&o.duration, "duration", 0, "counting window per throughput run (default 2s, 1s with -quick)")
	fs.DurationVar(&o.cpuWindow, "cpu-window", 0, "counting window per CPU run (default 3s, 1.5s with -quick)")
	fs.DurationVar(&o.waitIdle, "wait-idle", 0, "before each repetition, wait up to this long for the machine to be quiet (<10% busy without traffic)")
	fs.StringVar(&o.out, "out", "", "also write the results to this file: JSON if it ends in .json, else markdown")
	fs.StringVar(&o.profile, "profile", "", "profile each e1kbox path at the first frame size and the -rate of the CPU table (full speed with -rate 0) into this directory and print the top functions")
	fs.BoolVar(&o.applianceTune, "appliance-tune", false, "run the appliance with -tune=true (its tuning plan turns RPS off; the harness steers again once it forwards)")
	fs.BoolVar(&o.genRing, "gen-ring", false, "generator sends from a mapped TX ring (tpacket_snd) instead of sendmmsg: its frames' ring destructor then runs on whichever CPU frees them")
	fs.StringVar(&o.rx, "rx", "rps", "how b0's frames reach the box's receive CPU, in place of a NIC interrupt: rps (RPS IPIs, one per empty backlog) or napi (b0's threaded NAPI pinned there, deferring wake-ups 50 µs like interrupt throttling)")
	fs.StringVar(&o.appliance, "appliance", "", "appliance binary (default: go build e1kbox/appliance)")
	fs.BoolVar(&o.latency, "latency", true, "measure one-way latency at 10/50/90% of capacity (paths with latency rows)")
	fs.StringVar(&o.latencyDump, "latency-dump", "", "write each latency run's samples (receive time and latency in ns, as received) to a file in this directory")
	fs.BoolVar(&o.connRate, "connrate", true, "measure new NAT connections per second and the latency of new flows (NAT paths)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.rx != rxRPS && o.rx != rxNAPI {
		return nil, fmt.Errorf("-rx %q is not rps or napi", o.rx)
	}
	if o.rx == rxNAPI && o.applianceTune {
		// veth polls with NAPI only while GRO is on; the tuning plan turns
		// GRO off on the box's ports.
		return nil, fmt.Errorf("-rx napi with -appliance-tune: the appliance's tuning turns GRO off on b0, and veth has no NAPI without it")
	}
	var err error
	if o.sizes, err = ParseIntList(*sizes, minFrame, maxFrame); err != nil || len(o.sizes) == 0 {
		return nil, fmt.Errorf("-sizes %q: %v", *sizes, orEmpty(err))
	}
	if o.rules, err = ParseIntList(*rulesFlag, 0, 1<<20); err != nil {
		return nil, fmt.Errorf("-rules %q: %w", *rulesFlag, err)
	}
	for p := range strings.SplitSeq(*placements, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, err := tuning.NewCPUPlan(boxPorts, tuning.CPUSet{0}, tuning.Placement(p)); err != nil || p == string(tuning.PlacementManual) || p == string(tuning.PlacementAuto) {
			return nil, fmt.Errorf("-placements: %q is not split, same or threaded", p)
		}
		o.placements = append(o.placements, tuning.Placement(p))
	}
	if *paths != "" {
		if o.paths, err = regexp.Compile("(?i)" + *paths); err != nil {
			return nil, fmt.Errorf("-paths: %w", err)
		}
	}
	if o.flows < 1 || o.flows > maxFlows {
		return nil, fmt.Errorf("-flows %d outside 1..%d", o.flows, maxFlows)
	}
	if *rate < 0 {
		return nil, fmt.Errorf("-rate %v is negative", *rate)
	}
	o.rate, o.reps = *rate, *reps
	def := func(d *time.Duration, normal, quick time.Duration) {
		if *d == 0 {
			*d = normal
			if o.quick {
				*d = quick
			}
		}
	}
	def(&o.warmup, 500*time.Millisecond, 300*time.Millisecond)
	def(&o.duration, 2*time.Second, time.Second)
	def(&o.cpuWindow, 3*time.Second, 1500*time.Millisecond)
	if o.reps == 0 {
		o.reps = 3
		if o.quick {
			o.reps = 1
		}
	}
	if o.reps < 0 || o.warmup < 0 || o.waitIdle < 0 || o.duration <= 0 || o.cpuWindow <= 0 {
		return nil, fmt.Errorf("negative repetitions or windows")
	}
	return &o, nil
}

func orEmpty(err error) string {
	if err == nil {
		return "no sizes"
	}
	return err.Error()
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := benchMain(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
