package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireNetns skips (fails with CI=true) unless the smoke test can run.
func requireNetns(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("test needs %s (CI=true, not skipping)", strings.Join(missing, ", "))
	}
	t.Skipf("test needs %s", strings.Join(missing, ", "))
}

// smokeHarness sets up the namespaces (sequence number seq) and a harness
// for path p with receive stand-in rx, with a deadline of timeout; the
// namespaces go when the test ends.
func smokeHarness(t *testing.T, seq int, rx string, p Path, timeout time.Duration) (context.Context, *harness, cpuPlace) {
	t.Helper()
	requireNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cpus, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := newTopo(ctx, os.Getpid(), seq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	tp.rx = rx
	h := &harness{t: tp, cpus: cpus, tmp: t.TempDir(), flows: 64}
	if _, err := nsRun(ctx, tp.box, "test", "-e", "/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		h.brNetfilter = true
	}
	pl, err := placeFor(p, cpus)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, h, pl
}

// TestSmokeKernelBridge measures the kernel bridge for about a second,
// checks that a matching bridge-family nft rule stops the traffic (so the
// rule rows really are on the path), and that the namespaces are gone
// afterwards.
func TestSmokeKernelBridge(t *testing.T) {
	p := Path{Name: kernelName, Kind: kindKernel}
	ctx, h, pl := smokeHarness(t, 100, rxRPS, p, 45*time.Second)
	tp, cpus := h.t, h.cpus
	if mac, err := macOf(tp.sink, "s0"); err != nil || mac.String() != macS0.String() {
		t.Fatalf("sink MAC %v (%v), want %v", mac, err, macS0)
	}
	b, err := h.setup(ctx, p, pl)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.waitForward(ctx, p, pl, b, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := h.measure(ctx, p, pl, 64, 0, window{Warmup: 200 * time.Millisecond, Count: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel bridge 64B: %s (offered %s), %s", FormatPPS(s.PPS), FormatPPS(s.Offered), pl)
	if s.PPS <= 0 || s.Received == 0 || s.Sent == 0 {
		t.Errorf("sample %+v: want traffic", s)
	}
	if s.Seconds < 0.9 || s.Seconds > 2 {
		t.Errorf("counting window %.2f s, want about 1 s", s.Seconds)
	}
	// The generator's count spans the sink's window; frames in flight
	// (the two veth hops' backlogs) may arrive from before it.
	if s.Received > s.Sent+3000 {
		t.Errorf("sink counted %d frames, generator sent %d", s.Received, s.Sent)
	}

	// A matching rule in the bridge forward chain drops everything.
	drop := "table bridge e1kbench {\n\tchain benchfwd {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tip saddr " +
		genIP.String() + " drop\n\t}\n}\n"
	if err := nftLoad(ctx, tp.box, drop); err != nil {
		t.Fatal(err)
	}
	d, err := h.measure(ctx, p, pl, 64, 20000, window{Warmup: 100 * time.Millisecond, Count: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d.Received != 0 || d.Sent == 0 {
		t.Errorf("with a matching drop rule: sent %d, received %d; want all dropped", d.Sent, d.Received)
	}
	if d.NsPerPacket != 0 || d.BusySeconds < 0 || len(d.CPUBusy) != len(cpus) {
		t.Errorf("CPU sample with no packets: %+v", d)
	}
	if err := b.Close(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if out, _ := nsRun(ctx, tp.box, "ip", "-o", "link", "show", "type", "bridge"); strings.TrimSpace(out) != "" {
		t.Errorf("bridge left after teardown: %s", out)
	}

	if err := tp.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if left := ourNamespaces(); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
}

// TestCleanStale removes the namespaces of a dead run and keeps those of
// a live one.
func TestCleanStale(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	dead := 0
	for pid := 4000000; pid < 4100000; pid++ {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			dead = pid
			break
		}
	}
	if dead == 0 {
		t.Fatal("no free PID found")
	}
	stale := nsPrefix + strconv.Itoa(dead) + "-1-box"
	live := nsPrefix + strconv.Itoa(os.Getpid()) + "-300-box"
	for _, ns := range []string{stale, live} {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	removed := cleanStale(ctx)
	if !slices.Contains(removed, stale) || slices.Contains(removed, live) {
		t.Errorf("cleanStale removed %v; want %s and not %s", removed, stale, live)
	}
	if _, err := os.Stat("/run/netns/" + stale); err == nil {
		t.Errorf("%s still exists", stale)
	}
	if _, err := os.Stat("/run/netns/" + live); err != nil {
		t.Errorf("%s was removed: %v", live, err)
	}
}

// macOf returns the MAC address of iface in ns.
func macOf(ns, iface string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		return nil
	})
	return mac, err
}

// TestSmokeKernelIPv6 runs the kernel IPv6 row's setup: UDP/IPv6 frames
// from the generator reach the sink through the box's IPv6 routing, the
// flows are established by the sink's replies (a ruleset that admits
// only established packets still passes them, after establish), and
// teardown leaves the box without IPv6.
func TestSmokeKernelIPv6(t *testing.T) {
	p := Path{Name: kernel6Name, Kind: kindKernel, NAT: true, IPv6: true}
	ctx, h, pl := smokeHarness(t, 101, rxRPS, p, 60*time.Second)
	tp := h.t
	b, err := h.setup(ctx, p, pl)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.waitForward(ctx, p, pl, b, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.establish(ctx, p, pl); err != nil {
		t.Fatal(err)
	}
	// Only established packets pass now: the flows must be.
	only := "flush ruleset\ntable inet e1kbench6 {\n\tchain benchfwd {\n\t\ttype filter hook forward priority filter; policy drop;\n" +
		"\t\tct state established accept\n\t}\n}\n"
	if err := nftLoad(ctx, tp.box, only); err != nil {
		t.Fatal(err)
	}
	w := window{Warmup: 100 * time.Millisecond, Count: 500 * time.Millisecond}
	s, err := h.measure(ctx, p, pl, 64, 20000, w)
	if err != nil {
		t.Fatal(err)
	}
	// Rates, not counts: the generator's count spans a longer window than
	// the sink's (it brackets it), by as much as reading the sink takes.
	if s.Sent == 0 || s.PPS < 0.9*s.Offered {
		t.Errorf("established flows: offered %.0f/s, received %.0f/s (sent %d, received %d); want them through", s.Offered, s.PPS, s.Sent, s.Received)
	}
	// Flows the sink never answered stay new, and are dropped: of 128,
	// the 64 above the established ones.
	h.flows = 128
	n, err := h.measure(ctx, p, pl, 64, 20000, w)
	if err != nil {
		t.Fatal(err)
	}
	if n.PPS > 0.6*n.Offered || n.PPS < 0.4*n.Offered {
		t.Errorf("half new flows: offered %.0f/s, received %.0f/s; want about half through", n.Offered, n.PPS)
	}
	if err := b.Close(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if out, _ := nsRun(ctx, tp.box, "ip", "-6", "-o", "addr", "show"); strings.Contains(out, "b0") || strings.Contains(out, "b1") {
		t.Errorf("IPv6 left on the box's ports after teardown: %s", out)
	}
}

// TestSteerNAPI switches b0 to the threaded-NAPI receive stand-in: RPS
// off, b0 threaded with deferred wake-ups, its kthreads pinned to the
// receive CPU and moved when the placement moves; frames still reach
// the sink through the kernel bridge.
func TestSteerNAPI(t *testing.T) {
	p := Path{Name: kernelName, Kind: kindKernel}
	ctx, h, pl := smokeHarness(t, 102, rxNAPI, p, 45*time.Second)
	tp, cpus := h.t, h.cpus
	b, err := h.setup(ctx, p, pl)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(tp.napiThreads) == 0 {
		t.Fatal("no napi kthreads recorded")
	}
	sys := func(file string) string {
		t.Helper()
		out, err := nsRun(ctx, tp.box, "sh", "-c", "cat /sys/class/net/b0/"+file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	for file, want := range map[string]string{
		"threaded":             "1",
		"napi_defer_hard_irqs": strconv.Itoa(rxNAPIDefer),
		"gro_flush_timeout":    strconv.FormatInt(rxNAPITimeout.Nanoseconds(), 10),
		"queues/rx-0/rps_cpus": "0",
	} {
		if got := strings.TrimLeft(sys(file), "0,"); got != strings.TrimLeft(want, "0,") {
			t.Errorf("b0 %s = %q, want %q", file, sys(file), want)
		}
	}
	pinned := func(cpu int) {
		t.Helper()
		for _, pid := range tp.napiThreads {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(pid, &set); err != nil {
				t.Fatalf("napi kthread %d: %v", pid, err)
			}
			if set.Count() != 1 || !set.IsSet(cpu) {
				t.Errorf("napi kthread %d: affinity of %d CPUs, cpu %d set %v; want only cpu %d", pid, set.Count(), cpu, set.IsSet(cpu), cpu)
			}
			attr, err := unix.SchedGetAttr(pid, 0)
			if err != nil {
				t.Fatalf("napi kthread %d: %v", pid, err)
			}
			if attr.Policy != unix.SCHED_FIFO || attr.Priority != rxNAPIPrio {
				t.Errorf("napi kthread %d: policy %d priority %d, want SCHED_FIFO (%d) at %d", pid, attr.Policy, attr.Priority, unix.SCHED_FIFO, rxNAPIPrio)
			}
		}
	}
	pinned(pl.RX)
	if err := h.waitForward(ctx, p, pl, b, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(cpus) > 1 {
		moved := pl
		moved.RX = cpus[len(cpus)-1]
		threads := slices.Clone(tp.napiThreads)
		if err := tp.steer(ctx, moved); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(threads, tp.napiThreads) {
			t.Errorf("second steer changed the kthreads: %v, then %v", threads, tp.napiThreads)
		}
		pinned(moved.RX)
	}
	// The direct row's placement has no box: nothing to pin, no error.
	direct := pl
	direct.RX = -1
	if err := tp.steer(ctx, direct); err != nil {
		t.Errorf("steer with no receive CPU: %v", err)
	}
}
