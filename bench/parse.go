package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CPUTimes are the tick counters of one "cpu" line of /proc/stat (in
// USER_HZ ticks). Guest time is already part of User and Nice.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time the CPU did work: user+nice+system+irq+softirq+steal.
func (t CPUTimes) Busy() uint64 {
	return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal
}

// Total is Busy plus idle and iowait.
func (t CPUTimes) Total() uint64 { return t.Busy() + t.Idle + t.IOWait }

// Sub returns t - o field by field (counters only grow; a counter that
// went backwards gives 0).
func (t CPUTimes) Sub(o CPUTimes) CPUTimes {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return CPUTimes{d(t.User, o.User), d(t.Nice, o.Nice), d(t.System, o.System), d(t.Idle, o.Idle),
		d(t.IOWait, o.IOWait), d(t.IRQ, o.IRQ), d(t.SoftIRQ, o.SoftIRQ), d(t.Steal, o.Steal)}
}

// userHZ is the unit of /proc/stat's CPU counters (fixed by the ABI).
const userHZ = 100

// BusyFromIdle returns the busy time in seconds of a CPU (or of n CPUs
// for the "cpu" line) over wall seconds: the wall time minus the idle and
// iowait time of d. With NO_HZ the kernel accounts idle time exactly at
// every idle entry and exit, while the busy fields are sampled at the
// scheduler tick, which misses short bursts of work between idle periods
// (a CPU forwarding a paced stream is such a case) and undercounts them.
// The result is clamped to 0..n*wall.
func BusyFromIdle(d CPUTimes, wall float64, n int) float64 {
	total := float64(n) * wall
	idle := float64(d.Idle+d.IOWait) / userHZ
	return min(max(total-idle, 0), total)
}

// ProcStat is the CPU part of /proc/stat.
type ProcStat struct {
	All  CPUTimes
	CPUs map[int]CPUTimes // by CPU number
}

// ParseProcStat parses the "cpu" and "cpuN" lines of /proc/stat. Lines
// need at least the four fields of the oldest kernels (user nice system
// idle); missing later fields are 0.
func ParseProcStat(b []byte) (ProcStat, error) {
	st := ProcStat{CPUs: map[int]CPUTimes{}}
	haveAll := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if len(f) < 5 {
			return ProcStat{}, fmt.Errorf("/proc/stat line %d: %d fields, want at least 5", line, len(f))
		}
		var v [8]uint64
		for i := 0; i < 8 && i+1 < len(f); i++ {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return ProcStat{}, fmt.Errorf("/proc/stat line %d field %d: %w", line, i+2, err)
			}
			v[i] = n
		}
		t := CPUTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
		if f[0] == "cpu" {
			if haveAll {
				return ProcStat{}, fmt.Errorf("/proc/stat line %d: second \"cpu\" line", line)
			}
			st.All, haveAll = t, true
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil || n < 0 || n > 8191 {
			return ProcStat{}, fmt.Errorf("/proc/stat line %d: bad CPU %q", line, f[0])
		}
		if _, dup := st.CPUs[n]; dup {
			return ProcStat{}, fmt.Errorf("/proc/stat line %d: CPU %d twice", line, n)
		}
		st.CPUs[n] = t
	}
	if err := sc.Err(); err != nil {
		return ProcStat{}, fmt.Errorf("/proc/stat: %w", err)
	}
	if !haveAll {
		return ProcStat{}, errors.New("/proc/stat: no \"cpu\" line")
	}
	return st, nil
}

// ParseNftCounter returns the packets and bytes of the named counter in
// the output of `nft -j list counter FAMILY TABLE NAME` (or any nft JSON
// listing that contains it).
func ParseNftCounter(b []byte, name string) (packets, byteCount uint64, err error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, 0, fmt.Errorf("nft JSON: %w", err)
	}
	for _, obj := range doc.Nftables {
		raw, ok := obj["counter"]
		if !ok {
			continue
		}
		var c struct {
			Name    string  `json:"name"`
			Packets *uint64 `json:"packets"`
			Bytes   *uint64 `json:"bytes"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return 0, 0, fmt.Errorf("nft JSON counter: %w", err)
		}
		if c.Name != name {
			continue
		}
		if c.Packets == nil || c.Bytes == nil {
			return 0, 0, fmt.Errorf("nft counter %q: no packets/bytes", name)
		}
		return *c.Packets, *c.Bytes, nil
	}
	return 0, 0, fmt.Errorf("nft JSON: no counter %q", name)
}

// ParseIntList parses a comma-separated list of integers within [lo, hi]
// ("64,512"); an empty string is an empty list.
func ParseIntList(s string, lo, hi int) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		digits, kilo := strings.CutSuffix(strings.ToLower(part), "k")
		n, err := strconv.Atoi(digits)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", part)
		}
		if kilo {
			if n > hi/1000+1 || n < lo/1000-1 {
				return nil, fmt.Errorf("%s is outside %d..%d", part, lo, hi)
			}
			n *= 1000
		}
		if n < lo || n > hi {
			return nil, fmt.Errorf("%d is outside %d..%d", n, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// logTail returns the last n lines of log joined by " | "; from a Go
// crash, the panic line and the n lines after it instead.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return strings.Join(lines[i:min(len(lines), i+1+n)], " | ")
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Interrupts are the per-CPU counts of /proc/interrupts on one CPU: the
// function-call IPIs (CAL: RPS sends these to wake the receive CPU) and
// all interrupts together (each can wake an idle CPU).
type Interrupts struct {
	IPIs, All uint64
}

// ParseInterrupts reads CPU cpu's column of /proc/interrupts: its header
// names the CPU columns ("CPU0 CPU1 ..."); each row is a name ending in
// ':' and one count per column, then a description.
func ParseInterrupts(b []byte, cpu int) (Interrupts, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	if !sc.Scan() {
		return Interrupts{}, errors.New("/proc/interrupts: no header")
	}
	col := -1
	head := strings.Fields(sc.Text())
	for i, f := range head {
		if n, err := strconv.Atoi(strings.TrimPrefix(f, "CPU")); err == nil && strings.HasPrefix(f, "CPU") && n == cpu {
			col = i
		}
	}
	if col < 0 {
		return Interrupts{}, fmt.Errorf("/proc/interrupts: no column CPU%d in %q", cpu, sc.Text())
	}
	var out Interrupts
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasSuffix(f[0], ":") || f[0] == "ERR:" || f[0] == "MIS:" {
			continue // ERR and MIS carry one total, not a count per CPU
		}
		if len(f) < 2+col {
			return Interrupts{}, fmt.Errorf("/proc/interrupts line %d (%s): no CPU%d column", line, f[0], cpu)
		}
		n, err := strconv.ParseUint(f[1+col], 10, 64)
		if err != nil {
			return Interrupts{}, fmt.Errorf("/proc/interrupts line %d (%s): CPU%d: %w", line, f[0], cpu, err)
		}
		if out.All+n < out.All {
			return Interrupts{}, fmt.Errorf("/proc/interrupts line %d (%s): CPU%d: the sum overflows", line, f[0], cpu)
		}
		out.All += n
		if f[0] == "CAL:" {
			out.IPIs += n
		}
	}
	if err := sc.Err(); err != nil {
		return Interrupts{}, fmt.Errorf("/proc/interrupts: %w", err)
	}
	return out, nil
}
