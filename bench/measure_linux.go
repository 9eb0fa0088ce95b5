package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"e1kbox/tuning"
)

// harness holds what every measurement needs.
type harness struct {
	t           *topo
	cpus        tuning.CPUSet
	appliance   string // the appliance binary, "" if not built
	tmp         string // scratch directory
	flows       int
	genRing     bool // the generator sends from a mapped TX ring (genSpec.Ring)
	brNetfilter bool // br_netfilter's sysctls exist in the box namespace
	// applianceTune runs the appliance with -tune=true.
	applianceTune bool
	// freshBase numbers the new 5-tuples of the connection runs, so that
	// no run reuses another's.
	freshBase atomic.Uint64
	// capacity is each path's throughput at the first size in the
	// current repetition: the latency loads' 100 %.
	capacity map[string]float64
	// appPID is the running appliance's process id (0: none).
	appPID atomic.Int64
	// latencyDump is a directory for every latency run's samples ("":
	// none); dumps numbers the files.
	latencyDump string
	dumps       int
	// rx is the box's receive CPU of the measurement in progress (-1:
	// none, or not known to measureSpec's caller).
	rx int
}

// window is how long a measurement warms up and counts.
type window struct {
	Warmup, Count time.Duration
}

// readProcStat reads and parses /proc/stat.
func readProcStat() (ProcStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("cpu time: %w", err)
	}
	return ParseProcStat(b)
}

// readInterrupts reads CPU cpu's interrupt counts (nothing for cpu < 0,
// the direct path's).
func readInterrupts(cpu int) (Interrupts, error) {
	if cpu < 0 {
		return Interrupts{}, nil
	}
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return Interrupts{}, fmt.Errorf("interrupts: %w", err)
	}
	return ParseInterrupts(b, cpu)
}

// onlineCPUs returns the online CPUs.
func onlineCPUs() (tuning.CPUSet, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return tuning.ParseCPUList(string(b))
}

// idleBusy measures the fraction of all CPUs busy over d with no traffic
// (see BusyFromIdle).
func idleBusy(ctx context.Context, d time.Duration, ncpu int) (float64, error) {
	a, err := readProcStat()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	b, err := readProcStat()
	if err != nil {
		return 0, err
	}
	wall := time.Since(t0).Seconds()
	return BusyFromIdle(b.All.Sub(a.All), wall, ncpu) / (float64(ncpu) * wall), nil
}

// genFor returns the generator spec of a path: g1 straight into s1 for
// the direct path, g0 through the box to s0 otherwise.
func (h *harness) genFor(p Path, pl cpuPlace, size int, rate float64) (genSpec, error) {
	iface, dst := "g0", macS0
	src := macG0
	sip, dip := genIP, sinkIP
	switch {
	case p.Kind == kindDirect:
		iface, dst, src = "g1", macS1, macG1
	case p.IPv6:
		f, err := udpFrame6(size, src, macB0, ipv6GenIP, ipv6ServerIP, firstSport, udpDport)
		if err != nil {
			return genSpec{}, err
		}
		return genSpec{NS: h.t.gen, Iface: iface, CPU: pl.Gen, Frame: f, Flows: h.flows, Rate: rate, Ring: h.genRing, IPv6: true}, nil
	case p.NAT:
		// To the router's LAN MAC: b0's, which both the kernel and the
		// appliance (its LAN port's MAC) answer on.
		dst, sip, dip = macB0, natGenIP, natServerIP
	}
	f, err := udpFrame(size, src, dst, sip, dip)
	if err != nil {
		return genSpec{}, err
	}
	return genSpec{NS: h.t.gen, Iface: iface, CPU: pl.Gen, Frame: f, Flows: h.flows, Rate: rate, Ring: h.genRing}, nil
}

// learn lets the path learn where the sink is.
func (h *harness) learn() error {
	f := learnFrame(macS0)
	return sendFrames(h.t.sink, "s0", f, f, f)
}

// waitForward sends a slow stream until the sink counts frames, or fails
// after timeout.
func (h *harness) waitForward(ctx context.Context, p Path, pl cpuPlace, b *box, timeout time.Duration) error {
	spec, err := h.genFor(p, pl, minFrame, 20000)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if !p.NAT {
			if err := h.learn(); err != nil {
				return err
			}
		}
		c0, err := h.t.sinkCount(ctx)
		if err != nil {
			return err
		}
		g, err := startGenerator(spec)
		if err != nil {
			return err
		}
		sleep(ctx, 200*time.Millisecond)
		c1, err := h.t.sinkCount(ctx)
		if gerr := g.Stop(); gerr != nil && err == nil {
			err = gerr
		}
		if err != nil {
			return err
		}
		if c1-c0 >= 100 {
			return nil
		}
		if err := b.alive(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the sink got %d frames in 200 ms after %v of trying", p.Name, c1-c0, timeout)
		}
	}
}

// ready waits until the path forwards; with applianceTune it then
// restores the steering the appliance's tuning reset.
func (h *harness) ready(ctx context.Context, p Path, pl cpuPlace, b *box) error {
	if err := h.waitForward(ctx, p, pl, b, 15*time.Second); err != nil {
		return err
	}
	if p.Kind == kindE1kbox && h.applianceTune {
		return h.t.steer(ctx, pl)
	}
	return nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// stamped is a counter value and when it was read (the middle of the
// read, since reading the nft counter takes a few milliseconds).
type stamped struct {
	n  uint64
	at time.Time
}

func (h *harness) readSink(ctx context.Context) (stamped, error) {
	t0 := time.Now()
	n, err := h.t.sinkCount(ctx)
	t1 := time.Now()
	return stamped{n, t0.Add(t1.Sub(t0) / 2)}, err
}

// measure runs the generator (at rate, 0 = full speed) through the
// configured path and counts what reaches the sink. For rate > 0 it also
// takes the CPU time of all CPUs from /proc/stat (see BusyFromIdle): the
// /proc/stat window lies inside the counter window, so that the nft reads
// are not charged to the packets.
func (h *harness) measure(ctx context.Context, p Path, pl cpuPlace, size int, rate float64, w window) (Sample, error) {
	spec, err := h.genFor(p, pl, size, rate)
	if err != nil {
		return Sample{Path: p.Name, Size: size}, err
	}
	h.rx = pl.RX
	defer func() { h.rx = -1 }()
	return h.measureSpec(ctx, p, spec, size, rate, w)
}

// boxTimes is what the box's own CPU time is read from at one moment:
// the receive CPU's counters (the box's kernel work runs there: the
// forwarding in the kernel, the fast path, the rings' copies, and the
// appliance's housekeeping threads), the run time of the appliance's
// threads that cannot run on the receive CPU (its workers elsewhere),
// and of the generator's thread when it shares the receive CPU.
type boxTimes struct {
	rx      CPUTimes
	threads map[int]int64 // appliance thread id → ns run
	gen     int64         // ns; -1 when it does not share the receive CPU
}

// readBoxTimes reads boxTimes for receive CPU rx, or returns false when
// there is no receive CPU (the direct path).
func (h *harness) readBoxTimes(st ProcStat, rx int, g *generator, genCPU int) (boxTimes, bool) {
	c, ok := st.CPUs[rx]
	if rx < 0 || !ok {
		return boxTimes{}, false
	}
	b := boxTimes{rx: c, gen: -1}
	if pid := h.appPID.Load(); pid > 0 {
		b.threads = threadTimes(fmt.Sprintf("/proc/%d/task", pid), rx)
	}
	if genCPU == rx {
		if n, ok := threadRunNs(fmt.Sprintf("/proc/self/task/%d", g.tid.Load())); ok {
			b.gen = n
		}
	}
	return b, true
}

// threadTimes returns the run time (ns) of each thread under dir (a
// /proc/PID/task) that may not run on CPU rx.
func threadTimes(dir string, rx int) map[int]int64 {
	tids, err := taskIDs(dir)
	if err != nil {
		return nil
	}
	out := map[int]int64{}
	for _, tid := range tids {
		task := filepath.Join(dir, strconv.Itoa(tid))
		status, err := os.ReadFile(filepath.Join(task, "status"))
		if err != nil || allowsCPU(status, rx) {
			continue
		}
		if n, ok := threadRunNs(task); ok {
			out[tid] = n
		}
	}
	return out
}

// allowsCPU says whether a /proc status file's Cpus_allowed_list has cpu
// (true when it cannot tell).
func allowsCPU(status []byte, cpu int) bool {
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			set, err := tuning.ParseCPUList(strings.TrimSpace(v))
			return err != nil || set.Contains(cpu)
		}
	}
	return true
}

// threadRunNs reads the time a thread ran (ns) from its schedstat.
func threadRunNs(dir string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "schedstat"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	return n, err == nil
}

// boxBusy is the box's CPU time between a and b over secs of wall time:
// the receive CPU's busy time, plus what the appliance's threads off it
// ran, minus what the generator's thread ran on it.
func boxBusy(a, b boxTimes, secs float64) float64 {
	busy := BusyFromIdle(b.rx.Sub(a.rx), secs, 1)
	for tid, n := range b.threads {
		if m, ok := a.threads[tid]; ok {
			busy += float64(n-m) / 1e9
		}
	}
	if a.gen >= 0 && b.gen >= 0 {
		busy -= float64(b.gen-a.gen) / 1e9
	}
	return busy
}

// measureSpec is measure with the generator spec given.
func (h *harness) measureSpec(ctx context.Context, p Path, spec genSpec, size int, rate float64, w window) (Sample, error) {
	s := Sample{Path: p.Name, Size: size, Kind: KindThroughput, Rate: rate}
	if rate > 0 {
		s.Kind = KindCPU
	}
	if p.Kind != kindDirect && !p.NAT {
		if err := h.learn(); err != nil {
			return s, err
		}
	}
	back, err := keepOff(h.rx, h.cpus)
	if err != nil {
		return s, err
	}
	defer back()
	g, err := startGenerator(spec)
	if err != nil {
		return s, err
	}
	stopped := false
	defer func() {
		if !stopped {
			g.Stop()
		}
	}()
	sleep(ctx, w.Warmup)
	// The generator's count brackets the sink's, which brackets the CPU
	// window.
	ta, sentA := time.Now(), g.Sent()
	c0, err := h.readSink(ctx)
	if err != nil {
		return s, err
	}
	st0, err := readProcStat()
	if err != nil {
		return s, err
	}
	box0, boxOK := h.readBoxTimes(st0, h.rx, g, spec.CPU)
	irq0, irqErr := readInterrupts(h.rx)
	t0 := time.Now()
	sleep(ctx, w.Count)
	st1, err := readProcStat()
	if err != nil {
		return s, err
	}
	box1, _ := h.readBoxTimes(st1, h.rx, g, spec.CPU)
	irq1, err := readInterrupts(h.rx)
	irqErr = errors.Join(irqErr, err)
	t1 := time.Now()
	c1, err := h.readSink(ctx)
	if err != nil {
		return s, err
	}
	tb, sentB := time.Now(), g.Sent()
	stopped = true
	if err := g.Stop(); err != nil {
		return s, err
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	statSecs := t1.Sub(t0).Seconds()
	s.Seconds = c1.at.Sub(c0.at).Seconds()
	s.Received = c1.n - c0.n
	s.Sent = sentB - sentA
	s.PPS = float64(s.Received) / s.Seconds
	s.Offered = float64(s.Sent) / tb.Sub(ta).Seconds()
	if rate > 0 {
		d := st1.All.Sub(st0.All)
		s.BusySeconds = BusyFromIdle(d, statSecs, len(h.cpus))
		s.TickBusySeconds = float64(d.Busy()) / userHZ
		if pkts := s.PPS * statSecs; pkts > 0 {
			s.NsPerPacket = s.BusySeconds * 1e9 / pkts
			s.TickNsPerPacket = s.TickBusySeconds * 1e9 / pkts
		}
		for _, c := range h.cpus {
			s.CPUBusy = append(s.CPUBusy, BusyFromIdle(st1.CPUs[c].Sub(st0.CPUs[c]), statSecs, 1)/statSecs)
		}
		if pkts := s.PPS * statSecs; boxOK && pkts > 0 {
			s.BoxBusySeconds = boxBusy(box0, box1, statSecs)
			s.BoxNsPerPacket = s.BoxBusySeconds * 1e9 / pkts
			if irqErr != nil {
				return s, irqErr
			}
			s.RxIPIs = float64(irq1.IPIs-irq0.IPIs) / statSecs
			s.RxIRQs = float64(irq1.All-irq0.All) / statSecs
		}
	}
	return s, nil
}
