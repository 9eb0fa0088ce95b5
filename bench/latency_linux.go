package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/afpacket"
)

// latencyLoads are the fractions of a path's capacity (its throughput in
// the same repetition, or its kernel path's when lower: the same rates
// for both) at which one-way latency is measured.
var latencyLoads = []float64{0.1, 0.5, 0.9}

// Latency measurement: the generator writes each frame's send time into
// its payload (putStamp) just before it queues it, with small bursts
// (latencyTick); a reader on the sink's veth takes the kernel's receive
// time of the frames (tp_sec/tp_nsec, stamped at the packet tap) and
// their send time. A random sample of the frames (a BPF socket filter)
// reaches the reader, at most about latencySampleRate per second, so that
// the reader's own work stays small next to the path's.
const (
	latencyTick       = 50 * time.Microsecond
	latencySampleRate = 25000
	latencyWindow     = 2 * time.Second
	newFlowRate       = 2000 // frames (new connections) per second for the new-flow latency
)

// stampReader collects the latencies of stamped frames received on an
// interface.
type stampReader struct {
	mu   sync.Mutex
	lat  []int64 // ns
	recv []int64 // the receive times of lat's frames (Unix ns)
	on   atomic.Bool
	stop atomic.Bool
	sock *afpacket.Socket
	done chan error
}

// sampleFilter is a socket filter that passes a random 1/(mask+1) of the
// frames.
func sampleFilter(mask uint32) (*ebpf.Program, error) {
	insns := asm.Instructions{
		asm.FnGetPrandomU32.Call(),
		asm.And.Imm(asm.R0, int32(mask)),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm(asm.R0, 0xffff),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("drop"),
		asm.Return(),
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, Instructions: insns, License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("latency sample filter: %w", err)
	}
	return p, nil
}

// startStampReader opens a reader on iface in ns, pinned to cpu, that
// passes frames sent at rate to it in samples.
func startStampReader(ns, iface string, cpu int, rate float64) (*stampReader, error) {
	mask := uint32(0)
	for float64(mask+1)*latencySampleRate < rate {
		mask = mask<<1 | 1
	}
	filter, err := sampleFilter(mask)
	if err != nil {
		return nil, err
	}
	defer filter.Close() // the socket holds its own reference
	r := &stampReader{done: make(chan error, 1), lat: make([]int64, 0, 1<<18), recv: make([]int64, 0, 1<<18)}
	opened := make(chan error, 1)
	go func() {
		r.done <- inNetns(ns, func() error {
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				unix.SchedSetaffinity(0, &set)
			}
			s, err := afpacket.Open(iface, afpacket.Config{NoTX: true, FrameRing: true, RxFrames: 4096, SocketFilter: filter.FD()})
			if err != nil {
				opened <- fmt.Errorf("latency reader: %w", err)
				return nil
			}
			r.sock = s
			opened <- nil
			return r.loop(s)
		})
	}()
	if err := <-opened; err != nil {
		<-r.done
		return nil, err
	}
	return r, nil
}

func (r *stampReader) loop(s *afpacket.Socket) error {
	defer s.Close()
	var p afpacket.Packet
	for !r.stop.Load() {
		b, err := s.NextBlock(50 * time.Millisecond)
		if errors.Is(err, afpacket.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("latency reader: %w", err)
		}
		if b == nil {
			continue
		}
		collect := r.on.Load()
		r.mu.Lock()
		for b.Next(&p) {
			sent, ok := readStamp(p.Data)
			if !ok || !collect || len(r.lat) == cap(r.lat) {
				continue
			}
			at := int64(p.Sec)*1e9 + int64(p.Nsec)
			r.lat = append(r.lat, at-sent)
			r.recv = append(r.recv, at)
		}
		r.mu.Unlock()
		s.ReleaseBlock()
	}
	return nil
}

// collect starts (or restarts) collecting.
func (r *stampReader) collect() {
	r.mu.Lock()
	r.lat, r.recv = r.lat[:0], r.recv[:0]
	r.mu.Unlock()
	r.on.Store(true)
}

// latencies stops collecting and returns what was collected, sorted;
// with dump != "" it also writes the samples to that file in the order
// received, a line each: receive time and latency in ns.
func (r *stampReader) latencies(dump string) ([]int64, error) {
	r.on.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	if dump != "" {
		var b strings.Builder
		for i, l := range r.lat {
			fmt.Fprintf(&b, "%d\t%d\n", r.recv[i], l)
		}
		if err := os.WriteFile(dump, []byte(b.String()), 0o644); err != nil {
			return nil, fmt.Errorf("latency dump: %w", err)
		}
	}
	out := slices.Clone(r.lat)
	slices.Sort(out)
	return out, nil
}

// Stop ends the reader.
func (r *stampReader) Stop() error {
	r.stop.Store(true)
	return <-r.done
}

// quantile returns the q-quantile of sorted ns as microseconds (0 for
// none).
func quantile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)]) / 1e3
}

// latency measures the one-way latency of path p at rate frames/s of
// size bytes: established flows, or, with fresh, frames each of a new
// 5-tuple (the first packet of a new connection).
func (h *harness) latency(ctx context.Context, p Path, pl cpuPlace, size int, rate float64, fresh bool) (Sample, error) {
	s := Sample{Path: p.Name, Size: size, Kind: KindLatency, Rate: rate}
	if fresh {
		s.Kind = KindNewFlow
	}
	spec, err := h.genFor(p, pl, size, rate)
	if err != nil {
		return s, err
	}
	spec.Stamp, spec.Tick, spec.Fresh = true, latencyTick, fresh
	if fresh {
		// Fresh tuples the earlier runs of this path did not use.
		spec.FreshBase = h.freshBase.Add(1 << 26)
	}
	rd, err := startStampReader(h.t.sink, "s0", pl.Sink, rate)
	if err != nil {
		return s, err
	}
	defer rd.Stop()
	if !p.NAT && p.Kind != kindDirect {
		if err := h.learn(); err != nil {
			return s, err
		}
	}
	g, err := startGenerator(spec)
	if err != nil {
		return s, err
	}
	sleep(ctx, 300*time.Millisecond)
	rd.collect()
	sent0, t0 := g.Sent(), time.Now()
	sleep(ctx, latencyWindow)
	dump := ""
	if h.latencyDump != "" {
		h.dumps++
		dump = filepath.Join(h.latencyDump, fmt.Sprintf("%03d-%s-%.0fpps.tsv", h.dumps, strings.ReplaceAll(p.Name, " ", "_"), rate))
	}
	lat, err := rd.latencies(dump)
	if err != nil {
		return s, err
	}
	s.Sent, s.Seconds = g.Sent()-sent0, time.Since(t0).Seconds()
	if err := g.Stop(); err != nil {
		return s, err
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	s.Offered = float64(s.Sent) / s.Seconds
	s.Samples = len(lat)
	s.P50, s.P99, s.P999 = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999)
	if len(lat) < 100 {
		return s, fmt.Errorf("%s: only %d latency samples at %s", p.Name, len(lat), FormatPPS(rate))
	}
	return s, nil
}

// connRateSteps are the new-connection rates (per second) tried, lowest
// first; a path's connection rate is the highest it carries with under
// connLoss loss.
var connRateSteps = []float64{25e3, 50e3, 100e3, 150e3, 200e3, 300e3, 400e3, 600e3, 800e3}

const connLoss = 0.01

// connRefine is how many times the connection rate is bisected between
// the highest rate that lost under connLoss and the lowest above it that
// did not: the steps are up to 50 % apart, and a path that carries 290k/s
// would otherwise count as 200k/s.
const connRefine = 3

// connRate measures new NAT connections per second: the generator sends
// every frame with a 5-tuple of its own at each step of connRateSteps
// (1 s after a 200 ms warm-up) until two steps in a row lose more than
// connLoss, then at connRefine rates bisecting the bracket the steps
// left (connBracket).
func (h *harness) connRate(ctx context.Context, p Path, pl cpuPlace, size int) ([]Sample, error) {
	var out []Sample
	step := func(rate float64) (bool, error) {
		spec, err := h.genFor(p, pl, size, rate)
		if err != nil {
			return false, err
		}
		spec.Fresh, spec.FreshBase = true, h.freshBase.Add(1<<26)
		s, err := h.measureSpec(ctx, p, spec, size, rate, window{Warmup: 200 * time.Millisecond, Count: time.Second})
		s.Kind = KindConnRate
		if err != nil {
			return false, err
		}
		out = append(out, s)
		return connPassed(s), nil
	}
	fails := 0
	for _, rate := range connRateSteps {
		ok, err := step(rate)
		if err != nil {
			return out, err
		}
		if !ok {
			if fails++; fails == 2 {
				break
			}
		} else {
			fails = 0
		}
	}
	for range connRefine {
		lo, hi, ok := connBracket(out)
		if !ok {
			break
		}
		if _, err := step((lo + hi) / 2); err != nil {
			return out, err
		}
	}
	return out, nil
}

// connPassed reports whether a connection-rate sample lost under connLoss.
func connPassed(s Sample) bool { return s.PPS >= (1-connLoss)*s.Offered }

// connBracket is the rate (as offered) of the best of the samples ss that
// lost under connLoss and the lowest one above it that did not; ok is
// false when there is no such pair or they are within 5 % of each other.
func connBracket(ss []Sample) (lo, hi float64, ok bool) {
	lo, hi = connRateOf(ss), math.Inf(1)
	for _, s := range ss {
		if s.Kind == KindConnRate && !connPassed(s) && s.Offered > lo {
			hi = min(hi, s.Offered)
		}
	}
	if lo == 0 || math.IsInf(hi, 1) || hi < 1.05*lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// connRateOf is the highest rate of the connection-rate steps ss that
// lost under connLoss (0 for none).
func connRateOf(ss []Sample) float64 {
	best := 0.0
	for _, s := range ss {
		if s.Kind == KindConnRate && connPassed(s) {
			best = max(best, s.Offered)
		}
	}
	return best
}
