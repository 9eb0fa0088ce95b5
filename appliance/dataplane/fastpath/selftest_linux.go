package fastpath

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cilium/ebpf"
)

// How the self-test measures (MeasureSelf, PerFrame): a measurement is
// SelfTestFrames frames, run by the kernel in SelfTestCalls calls of
// SelfTestBatch (BPF_PROG_TEST_RUN's repeat); each path gets
// SelfTestRounds measurements, and their median counts.
//
// The kernel runs the repeats on the same frame, which keeps what the
// program wrote: a NAT frame's next run sees it translated. So the NAT
// path's frames go back and forth between two flows (the sample's and
// its translation's way back), each a full rewrite, and a call ends
// before their TTL (255, one less per hop) runs out.
const (
	SelfTestBatch  = 250
	SelfTestCalls  = 16
	SelfTestFrames = SelfTestBatch * SelfTestCalls
	SelfTestRounds = 3
)

// The self-test's paths.
const (
	PathNAT    = "nat"    // a frame of an installed NAT flow: rewritten and redirected
	PathBridge = "bridge" // a frame of an installed bridged pair: redirected
	PathMiss   = "miss"   // a frame of no flow: left to the rings (the punt path)
)

// SelfTest is what the fast path's programs cost per frame on this kernel
// (MeasureSelf).
type SelfTest struct {
	// Mode names the programs measured: tcx (a frame runs the rings'
	// socket filter, then the tcx program) or xdp.
	Mode Mode `json:"mode"`
	// JITed: the kernel compiled every measured program to machine code
	// (its JIT); false: the BPF interpreter runs them.
	JITed bool `json:"jited"`
	// Frames per measurement, Rounds measurements (the median counts).
	Frames int `json:"frames"`
	Rounds int `json:"rounds"`
	// Paths are the measured paths (PathNAT, PathBridge, PathMiss).
	Paths []PathCost `json:"paths"`
}

// PathCost is one path's cost, or why it was not measured.
type PathCost struct {
	Path string `json:"path"`
	// NsPerFrame sums the programs' (0 when Error is set).
	NsPerFrame float64       `json:"nsPerFrame"`
	Programs   []ProgramCost `json:"programs,omitempty"`
	// Error says why there is no number: a program failed, or took
	// another path than this one (a number for the wrong path would
	// mislead).
	Error string `json:"error,omitempty"`
}

// ProgramCost is one program's part of a path: its time per frame and
// what it returned.
type ProgramCost struct {
	Program    string  `json:"program"`
	NsPerFrame float64 `json:"nsPerFrame"`
	Verdict    string  `json:"verdict"`
}

// Cost is the path's ns per frame; false when it was not measured.
func (s *SelfTest) Cost(path string) (float64, bool) {
	for _, p := range s.Paths {
		if p.Path == path && p.Error == "" {
			return p.NsPerFrame, true
		}
	}
	return 0, false
}

// MeasureSelf measures what the programs of mode cost per frame on this
// kernel, with BPF_PROG_TEST_RUN, on the Sample's frames: a NAT flow's, a
// bridged pair's and a miss. It loads a private copy of the programs and
// maps (tiny maps, attached nowhere) for it, so no real frame can meet
// the self-test's flows, and the running fast path's maps, counters and
// punt counts see nothing of it. It takes a second verifier pass and a
// few ms of runs.
//
// Each call's verdict is checked, and the counters of every run: a hit
// must be forwarded (redirected, and counted in its flow's slot), a miss
// left to the rings (counted as a miss); else the path has an Error and
// no number.
func MeasureSelf(mode Mode) (SelfTest, error) {
	st := SelfTest{Mode: mode, Frames: SelfTestFrames, Rounds: SelfTestRounds}
	p, err := Load(Options{Mode: mode, NATFlows: 2, IPv6Flows: 1, Pairs: 1, Micro: 1})
	if err != nil {
		return st, fmt.Errorf("fastpath self-test: %w", err)
	}
	defer p.Close()
	progs := p.chain()
	st.JITed = true
	for _, pr := range progs {
		if !jited(pr.prog) {
			st.JITed = false
		}
	}
	s := SampleTraffic()
	// The test run's device is the namespace's loopback (ifindex 1); a
	// redirect is not carried out.
	const in, out = 1, 2
	const natSlot, pairSlot = 0, 1
	// The bridge first, while the NAT flow map is not live yet (as on a
	// bridge); then NAT and a miss, which looks up both.
	pk, pair := s.pair(in, out, pairSlot)
	if err := p.PutPair(pk, pair); err != nil {
		return st, fmt.Errorf("fastpath self-test: %w", err)
	}
	st.Paths = append(st.Paths, p.measurePath(progs, PathBridge, s.PairFrame(), pairSlot))
	if err := s.putNAT(p, in, out, natSlot); err != nil {
		return st, fmt.Errorf("fastpath self-test: %w", err)
	}
	st.Paths = append(st.Paths, p.measurePath(progs, PathNAT, s.NATFrame(), natSlot))
	st.Paths = append(st.Paths, p.measurePath(progs, PathMiss, s.MissFrame(), -1))
	return st, nil
}

// testProgram is one of the programs a frame runs through.
type testProgram struct {
	name      string
	prog      *ebpf.Program
	hit, miss string // the verdict (verdictName) on a hit and on a miss
}

// chain is the programs a frame runs through in p's mode, in order.
func (p *Program) chain() []testProgram {
	if p.mode == ModeXDP {
		return []testProgram{{"xdp", p.progs.XDP, "redirect", "pass"}}
	}
	return []testProgram{{"filter", p.progs.Filter, "kept out", "to the ring"}, {"tcx", p.progs.TCX, "redirect", "next"}}
}

// The verdicts the programs return.
const (
	tcxNext     = 0xffffffff // TCX_NEXT (-1)
	tcShot      = 2          // TC_ACT_SHOT
	tcRedirect  = 7          // TC_ACT_REDIRECT
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// verdictName names what a program of type t returned.
func verdictName(t ebpf.ProgramType, ret uint32) string {
	switch {
	case t == ebpf.SocketFilter && ret == 0:
		return "kept out"
	case t == ebpf.SocketFilter:
		return "to the ring"
	case t == ebpf.SchedCLS && ret == tcxNext:
		return "next"
	case t == ebpf.SchedCLS && ret == tcShot:
		return "shot"
	case t == ebpf.SchedCLS && ret == tcRedirect, t == ebpf.XDP && ret == xdpRedirect:
		return "redirect"
	case t == ebpf.XDP && ret == xdpPass:
		return "pass"
	case t == ebpf.XDP && ret == xdpDrop:
		return "drop"
	}
	return fmt.Sprintf("%d", int32(ret))
}

// measurePath measures the frames of one path through progs: a hit
// counted in slot, or a miss (slot < 0).
func (p *Program) measurePath(progs []testProgram, path string, frame []byte, slot int) PathCost {
	failed := func(err error) PathCost { return PathCost{Path: path, Error: err.Error()} }
	before, err := p.selfCounts()
	if err != nil {
		return failed(err)
	}
	pc := PathCost{Path: path, Programs: make([]ProgramCost, len(progs))}
	for i, pr := range progs {
		want := pr.hit
		if slot < 0 {
			want = pr.miss
		}
		ns, err := PerFrame(func(int) (time.Duration, error) { return runFrames(pr, frame, want) })
		if err != nil {
			return failed(err)
		}
		pc.Programs[i] = ProgramCost{Program: pr.name, NsPerFrame: ns, Verdict: want}
		pc.NsPerFrame += ns
	}
	if err := p.checkCounts(before, slot, len(progs), SelfTestRounds*SelfTestFrames); err != nil {
		return failed(err)
	}
	pc.NsPerFrame = math.Round(pc.NsPerFrame*10) / 10
	return pc
}

// runFrames runs pr on SelfTestFrames copies of frame and returns the
// time the kernel took; every call must return want (verdictName).
func runFrames(pr testProgram, frame []byte, want string) (time.Duration, error) {
	if pr.prog.Type() == ebpf.SocketFilter {
		frame = asTapped(frame)
	}
	var sum time.Duration
	for range SelfTestCalls {
		ret, d, err := pr.prog.Benchmark(frame, SelfTestBatch, nil)
		if err != nil {
			return 0, fmt.Errorf("running the %s program: %w", pr.name, err)
		}
		if got := verdictName(pr.prog.Type(), ret); got != want {
			return 0, fmt.Errorf("the %s program returned %q, want %q", pr.name, got, want)
		}
		sum += d * SelfTestBatch // d is the mean run, in whole ns (the kernel divides)
	}
	return sum, nil
}

// PerFrame is the median, over SelfTestRounds rounds, of the ns per frame
// of round(r) (the time of SelfTestFrames frames), to 0.1 ns.
func PerFrame(round func(r int) (time.Duration, error)) (float64, error) {
	ns := make([]float64, SelfTestRounds)
	for r := range ns {
		d, err := round(r)
		if err != nil {
			return 0, err
		}
		ns[r] = float64(d.Nanoseconds()) / SelfTestFrames
	}
	slices.Sort(ns)
	return math.Round(ns[len(ns)/2]*10) / 10, nil // to 0.1 ns: finer is noise
}

// selfCount is what the self-test's flows and misses were counted.
type selfCount struct {
	slots [2]uint64 // packets of slots 0 and 1
	punts [NumPunts]uint64
}

func (p *Program) selfCounts() (selfCount, error) {
	var c selfCount
	var st [2]Stats
	if err := p.NewStatsReader().Read(st[:]); err != nil {
		return c, err
	}
	c.slots = [2]uint64{st[0].Packets, st[1].Packets}
	var err error
	c.punts, err = p.Punts()
	return c, err
}

// checkCounts checks that at least n frames (a run may repeat more after
// an interruption) took the path since before: each counted in slot and
// no punt, or (slot < 0) each a miss of each of the progs programs and
// nothing else.
func (p *Program) checkCounts(before selfCount, slot, progs, n int) error {
	now, err := p.selfCounts()
	if err != nil {
		return err
	}
	var got selfCount
	for i := range got.slots {
		got.slots[i] = now.slots[i] - before.slots[i]
	}
	for i := range got.punts {
		got.punts[i] = now.punts[i] - before.punts[i]
	}
	want, counted, least := selfCount{}, got.punts[PuntMiss], uint64(n*progs)
	if slot >= 0 {
		want.slots[slot] = got.slots[slot]
		counted, least = got.slots[slot], uint64(n)
	} else {
		want.punts[PuntMiss] = got.punts[PuntMiss]
	}
	if got != want || counted < least {
		return errors.New(describeCounts(got, slot, n))
	}
	return nil
}

// describeCounts says how the frames of a path were counted instead.
func describeCounts(got selfCount, slot, n int) string {
	what := fmt.Sprintf("flow slot %d", slot)
	if slot < 0 {
		what = "misses"
	}
	s := fmt.Sprintf("%d frames run, want each counted in %s; counted: slots %v", n, what, got.slots)
	for i, c := range got.punts {
		if c > 0 {
			s += fmt.Sprintf(", %d punted (%s)", c, Punt(i))
		}
	}
	return s
}

// jited reports whether the kernel compiled prog to machine code.
func jited(prog *ebpf.Program) bool {
	info, err := prog.Info()
	if err != nil {
		return false
	}
	n, err := info.JitedSize()
	return err == nil && n > 0
}

// asTapped is how a frame is given to the socket filter in
// BPF_PROG_TEST_RUN: the kernel runs a socket filter's test on an skb
// whose first 14 bytes it took as the Ethernet header (eth_type_trans), as
// a packet tap's skb is before the tap pushes the header back, so the
// frame gets 14 bytes in front that the filter never sees.
func asTapped(frame []byte) []byte {
	return append(make([]byte, 14), frame...)
}
