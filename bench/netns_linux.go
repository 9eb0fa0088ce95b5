package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// nsPrefix starts the name of every namespace this program creates:
// nsPrefix + pid + "-" + role.
const nsPrefix = "e1kbench-"

// run runs a command and returns its combined output; the error carries
// the command line and the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// nsRun runs a command in network namespace ns.
func nsRun(ctx context.Context, ns string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// inNetns runs fn on a fresh OS thread that has joined namespace ns. The
// thread is never returned to the Go scheduler: it exits with fn.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies in ns
		errc <- func() error {
			f, err := os.Open(filepath.Join("/run/netns", ns))
			if err != nil {
				return fmt.Errorf("netns %s: %w", ns, err)
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("setns %s: %w", ns, err)
			}
			return fn()
		}()
	}()
	return <-errc
}

// topo is the three namespaces and their veth pairs:
// gen/g0 - box/b0, box/b1 - sink/s0, gen/g1 - sink/s1 (direct).
type topo struct {
	gen, box, sink string
	// rx is how b0's receive work reaches the box's receive CPU (rxRPS
	// or rxNAPI).
	rx string
	// napiThreads are b0's NAPI kthreads once steer switched b0 to
	// threaded NAPI.
	napiThreads []int
}

// rxNAPITimeout and rxNAPIDefer are b0's gro_flush_timeout and
// napi_defer_hard_irqs under rxNAPI: at most one wake-up per 50 µs
// (20000/s) while frames arrive, about what e1000e's dynamic interrupt
// throttling allows at small frames.
//
// rxNAPIPrio is the kthread's SCHED_FIFO priority. A NIC's receive work
// runs in softirq context and preempts every thread on its CPU; a
// kthread of the normal class would wait for the appliance's threads
// that share the CPU instead (in one full run at SCHED_OTHER, e1kbox
// bridge's p99 at 50 % load was 859 µs against the kernel bridge's 328).
const (
	rxNAPITimeout = 50 * time.Microsecond
	rxNAPIDefer   = 2
	rxNAPIPrio    = 50
)

// newTopo creates the namespaces for process id pid with a sequence
// number seq, the veth pairs (offloads off, IPv6 off, up) and the sink's
// counting nftables table. On error it removes what it created.
func newTopo(ctx context.Context, pid, seq int) (t *topo, err error) {
	base := nsPrefix + strconv.Itoa(pid) + "-" + strconv.Itoa(seq) + "-"
	t = &topo{gen: base + "gen", box: base + "box", sink: base + "sink", rx: rxRPS}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for _, ns := range t.all() {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		if _, err := nsRun(ctx, ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
			return nil, err
		}
		if _, err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	pairs := []struct {
		ns1, if1 string
		mac1     net.HardwareAddr
		ns2, if2 string
		mac2     net.HardwareAddr
	}{
		{t.gen, "g0", macG0, t.box, "b0", macB0},
		{t.box, "b1", macB1, t.sink, "s0", macS0},
		{t.gen, "g1", macG1, t.sink, "s1", macS1},
	}
	for _, p := range pairs {
		if _, err := run(ctx, "ip", "-n", p.ns1, "link", "add", p.if1, "address", p.mac1.String(), "type", "veth",
			"peer", "name", p.if2, "address", p.mac2.String(), "netns", p.ns2); err != nil {
			return nil, err
		}
		for _, end := range [][2]string{{p.ns1, p.if1}, {p.ns2, p.if2}} {
			if _, err := nsRun(ctx, end[0], "ethtool", "-K", end[1], "gro", "off", "gso", "off", "tso", "off", "tx", "off"); err != nil {
				return nil, err
			}
			if _, err := run(ctx, "ip", "-n", end[0], "link", "set", end[1], "up"); err != nil {
				return nil, err
			}
		}
	}
	if err := nicHeadroom(ctx, t.gen, "g0"); err != nil {
		return nil, err
	}
	sink := `table netdev sink {
	counter rx { }
	chain in0 { type filter hook ingress device "s0" priority 0; counter name "rx" drop; }
	chain in1 { type filter hook ingress device "s1" priority 0; counter name "rx" drop; }
}
`
	if err := nftLoad(ctx, t.sink, sink); err != nil {
		return nil, fmt.Errorf("sink counter: %w", err)
	}
	return t, nil
}

func (t *topo) all() []string { return []string{t.gen, t.box, t.sink} }

// Close deletes the namespaces (and so the veths); missing ones are fine.
func (t *topo) Close() error {
	var errs []error
	for _, ns := range t.all() {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
			continue
		}
		// A fresh context: cleanup must run even after ^C.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := run(ctx, "ip", "netns", "del", ns)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nftLoad loads an nftables script into namespace ns.
func nftLoad(ctx context.Context, ns, script string) error {
	f, err := os.CreateTemp("", "e1kbench-*.nft")
	if err != nil {
		return fmt.Errorf("nft script: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return fmt.Errorf("nft script: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("nft script: %w", err)
	}
	_, err = nsRun(ctx, ns, "nft", "-f", f.Name())
	return err
}

// sinkCount reads the sink's packet counter.
func (t *topo) sinkCount(ctx context.Context) (uint64, error) {
	out, err := nsRun(ctx, t.sink, "nft", "-j", "list", "counter", "netdev", "sink", "rx")
	if err != nil {
		return 0, err
	}
	p, _, err := ParseNftCounter([]byte(out), "rx")
	return p, err
}

// napiOn switches b0 to threaded NAPI with deferred wake-ups (rxNAPI)
// once, and returns its kthreads: GRO on b0 makes the veth use NAPI for
// what g0 sends (g0's TSO is off), the threads appear when b0 turns
// threaded. Only the kthreads that appeared then are b0's: another
// namespace may have a b0 too.
func (t *topo) napiOn(ctx context.Context) ([]int, error) {
	if t.napiThreads != nil {
		return t.napiThreads, nil
	}
	before := napiKthreads("b0")
	script := fmt.Sprintf("ethtool -K b0 gro on && echo 1 > /sys/class/net/b0/threaded && echo %d > /sys/class/net/b0/napi_defer_hard_irqs && echo %d > /sys/class/net/b0/gro_flush_timeout",
		rxNAPIDefer, rxNAPITimeout.Nanoseconds())
	if _, err := nsRun(ctx, t.box, "sh", "-c", script); err != nil {
		return nil, fmt.Errorf("threaded napi on b0: %w", err)
	}
	var pids []int
	for _, pid := range napiKthreads("b0") {
		if !slices.Contains(before, pid) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, errors.New("threaded napi on b0: no new napi/b0-* kthread")
	}
	t.napiThreads = pids
	return pids, nil
}

// napiKthreads lists the threaded-NAPI kthreads of devices named dev
// ("napi/dev-ID") in the whole system.
func napiKthreads(dev string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), "napi/"+dev+"-") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// setRPS steers the receive processing of iface in ns to cpu (all of its
// RX queues); cpu < 0 turns RPS off.
func setRPS(ctx context.Context, ns, iface string, cpu int) error {
	mask := "0"
	if cpu >= 0 {
		mask = strconv.FormatUint(1<<uint(cpu), 16)
		if cpu >= 32 {
			return fmt.Errorf("rps: cpu %d: only CPUs 0-31 supported", cpu)
		}
	}
	script := fmt.Sprintf("for q in /sys/class/net/%s/queues/rx-*; do echo %s > $q/rps_cpus; done", iface, mask)
	_, err := nsRun(ctx, ns, "sh", "-c", script)
	return err
}

// cleanStale deletes namespaces left by earlier runs of this program
// whose process is gone (a run killed with SIGKILL cannot clean up).
func cleanStale(ctx context.Context) []string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(name, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + pidText); err == nil || pid <= 0 {
			continue
		}
		// An appliance the dead run started may still live in its box.
		if out, err := run(ctx, "ip", "netns", "pids", e.Name()); err == nil {
			for f := range strings.FieldsSeq(out) {
				if p, err := strconv.Atoi(f); err == nil && p > 1 {
					unix.Kill(p, unix.SIGTERM)
				}
			}
		}
		if _, err := run(ctx, "ip", "netns", "del", e.Name()); err == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// ourNamespaces lists the namespaces of this process.
func ourNamespaces() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), nsPrefix+strconv.Itoa(os.Getpid())+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// nicHeadroom gives the frames a packet socket sends on the veth dev in
// ns the headroom a NIC's receive skbs have (NET_SKB_PAD, 64 bytes): on
// a plain veth they keep 2 bytes before the MAC header, and a fast path
// that grows the head (PPPoE's session header, bpf_skb_change_head) would
// reallocate every frame, which no NIC makes the box do. Only a bridge
// (or Open vSwitch) raises a veth's needed_headroom (both ends'): a
// bridge of the namespace's own with dev and a VXLAN device (50 bytes of
// headroom) as ports gives dev's frames 66. The VXLAN device sends
// nothing anyone receives (the bridge floods the box's rare frames to it).
func nicHeadroom(ctx context.Context, ns, dev string) error {
	for _, args := range [][]string{
		{"link", "add", "hr0", "type", "bridge"},
		{"link", "add", "hrvx0", "type", "vxlan", "id", "42", "dstport", "4789", "local", "127.0.0.1", "nolearning"},
		{"link", "set", "hrvx0", "master", "hr0"},
		{"link", "set", dev, "master", "hr0"},
		{"link", "set", "hr0", "up"},
	} {
		if _, err := run(ctx, "ip", append([]string{"-n", ns}, args...)...); err != nil {
			return fmt.Errorf("NIC-like headroom on %s: %w", dev, err)
		}
	}
	return nil
}
