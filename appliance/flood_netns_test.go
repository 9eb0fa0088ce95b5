package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/internal/netnstest"
)

// Helpers of the attack tests: a paced frame generator, the box's CPU
// time, a sampler of its counters and iperf3 runs.

// floodResult is what a flood achieved.
type floodResult struct {
	Sent int           // frames the kernel took
	Took time.Duration // from the start to the last frame taken
	Err  error         // the last error of a send, if any
}

// Rate is the achieved rate in frames per second.
func (r floodResult) Rate() float64 { return float64(r.Sent) / r.Took.Seconds() }

func (r floodResult) String() string {
	return fmt.Sprintf("%d frames in %v (%.0f/s)", r.Sent, r.Took.Round(time.Millisecond), r.Rate())
}

// startFlood sends n frames, frame(i) for i = 0..n-1, out of dev in
// namespace ns at rate frames per second, from its own goroutine: a TX
// socket of package afpacket (copy mode: sendmmsg in batches) paced by
// the clock, so that a late sender catches up in bigger batches. wait
// returns what it achieved. frame runs on the flood's goroutine. A test
// that ends first stops the flood (see background).
func startFlood(t *testing.T, ns *netnstest.Namespace, dev string, rate, n int, frame func(i int) []byte) (wait func() floodResult) {
	t.Helper()
	var sock *afpacket.Socket
	var err error
	ns.Do(t, func() {
		sock, err = afpacket.Open(dev, afpacket.Config{NoRX: true, NoPromisc: true, TxCopy: true})
	})
	if err != nil {
		t.Fatalf("flood socket on %s in %s: %v", dev, ns.Name(), err)
	}
	wait, _ = background(t, func(stop <-chan struct{}) floodResult {
		defer sock.Close()
		// Ahead of the machine's other work (not of the box, at -10):
		// the rate is what the test demands of the flood. The thread
		// stays locked, so it ends with the goroutine, niceness and all.
		runtime.LockOSThread()
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -5)
		const batch = 64
		var res floodResult
		start := time.Now()
		for i := 0; i < n && !stopped(stop); {
			due := min(n, int(time.Since(start).Seconds()*float64(rate))+1)
			for i < due {
				if sock.Append(frame(i)) {
					i++
					if sock.Queued() < batch {
						continue
					}
				} else if sock.Queued() == 0 {
					i++ // refused alone: a frame the ring cannot take
				}
				if err := sock.Flush(); err != nil {
					res.Err = err
				}
			}
			if err := sock.Flush(); err != nil {
				res.Err = err
			}
			time.Sleep(200 * time.Microsecond)
		}
		for range 100 {
			if sock.Queued() == 0 {
				break
			}
			if err := sock.Flush(); err != nil {
				res.Err = err
			}
		}
		res.Took = time.Since(start)
		res.Sent = int(sock.Stats().TxSent)
		return res
	})
	return wait
}

// pid returns the appliance's process id.
func (l *lab) pid(t *testing.T) int {
	t.Helper()
	// "ip netns exec" may run it as its child.
	out, err := exec.Command("pgrep", "-P", strconv.Itoa(l.cmd.Process.Pid)).Output()
	if f := strings.Fields(string(out)); err == nil && len(f) > 0 {
		if pid, err := strconv.Atoi(f[0]); err == nil {
			return pid
		}
	}
	return l.cmd.Process.Pid
}

// cpuTime returns the CPU time (user and system) the appliance used so
// far, from /proc/PID/stat.
func (l *lab) cpuTime(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", l.pid(t)))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): state
	// is field 3, utime 14 and stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/PID/stat: %q", s)
	}
	const clkTck = 100 // USER_HZ, what /proc reports in
	return time.Duration(utime+stime) * time.Second / clkTck
}

// runDelay returns how long the appliance's threads waited, runnable,
// for a CPU so far (the second field of each thread's
// /proc/PID/task/TID/schedstat).
func (l *lab) runDelay(t *testing.T) time.Duration {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", l.pid(t))
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// cpuMeter measures the appliance's CPU use, and its threads' wait for a
// CPU, from its creation on.
type cpuMeter struct {
	l            *lab
	cpu0, delay0 time.Duration
	wall0        time.Time
}

func (l *lab) cpuMeter(t *testing.T) cpuMeter {
	return cpuMeter{l: l, cpu0: l.cpuTime(t), delay0: l.runDelay(t), wall0: time.Now()}
}

// cpuUse is what a cpuMeter measured, in percent of one core over the
// wall time.
type cpuUse struct{ Used, Waited float64 }

func (m cpuMeter) read(t *testing.T) cpuUse {
	wall := float64(time.Since(m.wall0))
	return cpuUse{Used: 100 * float64(m.l.cpuTime(t)-m.cpu0) / wall, Waited: 100 * float64(m.l.runDelay(t)-m.delay0) / wall}
}

// busy says why a flood's run may not tell about the box, or "": the
// generator fell short of rate, or the box was not busy itself (see
// starved).
func busy(fr floodResult, rate int, use cpuUse) string {
	if fr.Rate() < float64(rate) {
		return fmt.Sprintf("the generator reached only %.0f of %d frames/s", fr.Rate(), rate)
	}
	return starved(use)
}

// starved says, if so, that the box used less than 85 % of a CPU: what
// went wrong did not come from the box running out of CPU by its own
// work, so it may come from sharing the machine (the box's threads
// waiting for a CPU and the machine's CPU pressure are named). A box
// that needs the CPU it gets is never excused.
func starved(use cpuUse) string {
	if use.Used >= 85 {
		return ""
	}
	return fmt.Sprintf("the box used only %.0f%% of a CPU (its threads waited for one %.0f%% of the time; CPU pressure %s)",
		use.Used, use.Waited, cpuPressure())
}

// cpuPressure returns the machine's CPU pressure (PSI "some" over 10 s).
func cpuPressure() string {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return "unknown"
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "avg10="); ok {
			return v + "%"
		}
	}
	return "unknown"
}

// attempts runs a check that a loaded machine can spoil up to three
// times, as the bridge's iperf3 test does: run returns the problems it
// found and, if the run may not tell about the box, why (see busy). The
// first run without problems passes; problems of a run with no such
// excuse, or of the third run, fail the test.
func attempts(t *testing.T, run func() (problems []string, busy string)) {
	t.Helper()
	for i := 1; ; i++ {
		problems, why := run()
		if len(problems) == 0 {
			return
		}
		if why == "" || i == 3 {
			for _, p := range problems {
				t.Error(p)
			}
			if why != "" {
				t.Errorf("in all %d runs: %s", i, why)
			}
			return
		}
		t.Logf("run %d: %s; but %s: running it again", i, strings.Join(problems, "; "), why)
		if waited := calm(30 * time.Second); waited > time.Second {
			t.Logf("waited %v for the machine's CPU pressure to drop (now %s)", waited.Round(time.Second), cpuPressure())
		}
	}
}

// calm waits, at most limit, until the machine's CPU pressure over 10 s is
// under 50 % (others' tests come in bursts), and returns how long it
// waited.
func calm(limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		var v float64
		if _, err := fmt.Sscanf(cpuPressure(), "%f%%", &v); err != nil || v < 50 {
			break
		}
		time.Sleep(time.Second)
	}
	return time.Since(start)
}

// sampler polls /api/dataplane while an attack runs.
type sampler struct {
	end func() []dataplane.Snapshot
}

// sample polls the box's counters every interval until end (or the
// test's end).
func (l *lab) sample(t *testing.T, every time.Duration) *sampler {
	_, end := background(t, func(stop <-chan struct{}) []dataplane.Snapshot {
		var out []dataplane.Snapshot
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return out
			case <-tick.C:
			}
			code, body := l.boxGet("/api/dataplane")
			var snap dataplane.Snapshot
			if code == 200 && json.Unmarshal([]byte(body), &snap) == nil {
				out = append(out, snap)
			}
		}
	})
	return &sampler{end: end}
}

// iperfResult is the part of iperf3's JSON report the tests read.
type iperfResult struct {
	End struct {
		SumSent struct {
			Bytes         float64
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes         float64
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		Sum struct { // UDP
			Packets     float64
			LostPackets float64 `json:"lost_packets"`
			LostPercent float64 `json:"lost_percent"`
		}
	}
}

// iperf3 runs the iperf3 client with args in namespace ns and parses its
// report (-J is added). A client that comes while the server still ends
// the previous test (its client has gone, the server has not yet taken
// its last message) is told the server is busy: it tries again, for up
// to 2 s.
func iperf3(ns *netnstest.Namespace, args ...string) (iperfResult, error) {
	var r iperfResult
	out, err := ns.Output(append([]string{"iperf3", "-J"}, args...)...)
	for deadline := time.Now().Add(2 * time.Second); err != nil && strings.Contains(out, "server is busy") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		out, err = ns.Output(append([]string{"iperf3", "-J"}, args...)...)
	}
	if err != nil {
		return r, fmt.Errorf("%w\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return r, fmt.Errorf("iperf3 report: %w\n%s", err, out)
	}
	return r, nil
}

// startIperf3 runs iperf3 like iperf3, in the background.
func startIperf3(t *testing.T, ns *netnstest.Namespace, args ...string) (wait func() (iperfResult, error)) {
	type result struct {
		r   iperfResult
		err error
	}
	done, _ := background(t, func(<-chan struct{}) result {
		r, err := iperf3(ns, args...)
		return result{r, err}
	})
	return func() (iperfResult, error) {
		r := done()
		return r.r, r.err
	}
}

// iperf3Server starts an iperf3 server in ns on port, stopped at the
// test's end, and waits until it accepts connections.
func iperf3Server(t *testing.T, ns *netnstest.Namespace, port int) {
	t.Helper()
	netnstest.Start(t, ns.Command("iperf3", "-s", "-p", strconv.Itoa(port)))
	eventually(t, 5*time.Second, "iperf3 server listening", func() (bool, string) {
		out, _ := ns.Output("ss", "-Htln", fmt.Sprintf("sport = :%d", port))
		return strings.TrimSpace(out) != "", out
	})
}

// median returns the median of v (0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
