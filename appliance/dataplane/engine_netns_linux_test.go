package dataplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/rules"
)

// topo is a box namespace with veth ports "p1".."pN" whose peers "eth0"
// sit in host namespaces h1..hN with addresses 10.42.0.i/24.
type topo struct {
	t     *testing.T
	box   *netnstest.Namespace
	hosts []*netnstest.Namespace
}

func requireNetns(t *testing.T) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ethtool", "ping")
}

func newTopo(t *testing.T, n int) *topo {
	requireNetns(t)
	tp := &topo{t: t, box: netnstest.New(t, "dpbox")}
	for i := 1; i <= n; i++ {
		h := netnstest.New(t, fmt.Sprintf("dph%d", i))
		tp.hosts = append(tp.hosts, h)
		port := fmt.Sprintf("p%d", i)
		netnstest.Veth(t,
			netnstest.End{NS: tp.box, Name: port, Off: netnstest.FrameOffloads}, // up below, without IPv6
			netnstest.End{NS: h, Name: "eth0", Off: netnstest.FrameOffloads, Addrs: []string{fmt.Sprintf("10.42.0.%d/24", i)}, Up: true})
		tp.box.Sysctl(t, "net.ipv6.conf."+port+".disable_ipv6=1")
		tp.box.IP(t, "link", "set", port, "up")
		h.IP(t, "link", "set", "lo", "up")
	}
	return tp
}

func (tp *topo) ping(host int, addr string) error {
	out, err := tp.hosts[host-1].Output("ping", "-c", "2", "-i", "0.2", "-W", "2", addr)
	if err != nil {
		return fmt.Errorf("ping %s from h%d: %v\n%s", addr, host, err, out)
	}
	return nil
}

func (tp *topo) engine(cfg *Config) *Engine {
	var e *Engine
	var err error
	tp.box.Do(tp.t, func() { e, err = New(cfg, Options{}) })
	if err != nil {
		tp.t.Fatalf("New: %v", err)
	}
	tp.t.Cleanup(func() { e.Close() })
	if err := e.Start(); err != nil {
		tp.t.Fatalf("Start: %v", err)
	}
	eventually(tp.t, 10*time.Second, "engine healthy", func() (bool, string) {
		h := e.Health()
		return h.OK, fmt.Sprintf("%+v", h)
	})
	return e
}

func TestEngineBridge(t *testing.T) {
	tp := newTopo(t, 2)
	cfg := &Config{
		Ports:    []Port{{Interface: "p1"}, {Interface: "p2", Workers: 2}},
		HostPort: &HostPort{Interface: "dphost0", Addresses: []netip.Prefix{netip.MustParsePrefix("10.42.0.100/24")}},
	}
	e := tp.engine(cfg)
	if err := tp.ping(1, "10.42.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(2, "10.42.0.100"); err != nil {
		t.Errorf("host port: %v", err)
	}
	s := e.Snapshot()
	if len(s.Ports) != 3 || len(s.Workers) != 4 {
		t.Fatalf("snapshot has %d ports, %d workers", len(s.Ports), len(s.Workers))
	}
	// With the fast path at tcx the bridge's data ports read their rings
	// after tcx too: IPv4, IPv6, ARP and the demote's marked frames.
	tcx := s.FastPath != nil && s.FastPath.Mode == string(FastPathTCX)
	if !tcx {
		t.Errorf("fast path %+v, want tcx", s.FastPath)
	}
	for _, p := range s.Ports {
		if p.RxPackets == 0 || p.TxPackets == 0 || !p.LinkUp || p.Running != p.Workers {
			t.Errorf("port %s: %+v", p.Name, p)
		}
		if want := p.Kind == "data" && tcx; p.AfterTCX != want {
			t.Errorf("port %s (%s): afterTcx = %v, want %v", p.Name, p.Kind, p.AfterTCX, want)
		}
	}
	ents := e.FDBEntries()
	learned := map[string]string{}
	for _, en := range ents {
		learned[en.PortName] = en.MAC.String()
	}
	if len(learned) != 3 {
		t.Errorf("FDB %+v: want entries on p1, p2 and host", ents)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("snapshot JSON: %v", err)
	}
	// Every worker's thread runs at workerNice.
	if n := threadsWithNice(t, workerNice); n < len(s.Workers) {
		t.Errorf("%d threads at nice %d, want one per worker (%d)", n, workerNice, len(s.Workers))
	}

	// A rule applied at run time drops ICMP between the hosts.
	cfg2 := *cfg
	var rs = mustRules(t, "ip protocol icmp ip daddr 10.42.0.2 counter drop")
	cfg2.Rules = rs
	if err := e.Apply(&cfg2); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := tp.ping(1, "10.42.0.2"); err == nil {
		t.Errorf("ping passed a drop rule")
	}
	if d := e.Snapshot().Drops[DropRule]; d == 0 {
		t.Errorf("no rule drops counted")
	}
	if _, cs := e.Rules().Counters(); len(cs) != 1 || cs[0].Packets == 0 {
		t.Errorf("rule counters %+v", cs)
	}
	cfg3 := cfg2
	cfg3.Ports = []Port{{Interface: "p1"}, {Interface: "p2", Workers: 2}, {Interface: "p3"}}
	if err := e.Apply(&cfg3); err != ErrRestartRequired {
		t.Errorf("Apply with a third port = %v, want ErrRestartRequired", err)
	}

	// Close stops every worker within the stop timeout.
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > stopTimeout {
		t.Errorf("Close took %v", d)
	}
	if e.Health().OK {
		t.Errorf("healthy after Close")
	}
}

func mustRules(t *testing.T, text string) *rulesRuleset {
	t.Helper()
	rs, err := rulesParse(text)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestWorkerPanicRestart makes one worker panic and checks that it is
// recovered, counted, restarted, and forwards again.
func TestWorkerPanicRestart(t *testing.T) {
	tp := newTopo(t, 2)
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}}})
	var once atomic.Bool
	hook := func(w *worker) {
		if w.id == 0 && once.CompareAndSwap(false, true) {
			panic("injected")
		}
	}
	batchHook.Store(&hook)
	defer batchHook.Store(nil)
	var w0 WorkerStats
	eventually(t, 10*time.Second, "worker 0 restarted", func() (bool, string) {
		w0 = e.Snapshot().Workers[0]
		return w0.Restarts == 1 && w0.Running, fmt.Sprintf("%+v", w0)
	})
	if w0.Panics != 1 || !strings.Contains(w0.LastPanic, "injected") {
		t.Errorf("worker 0: %+v", w0)
	}
	if err := tp.ping(1, "10.42.0.2"); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

// TestRingDropsVisible fills a ring that nobody drains and checks the
// kernel's drop counter reaches the snapshot.
func TestRingDropsVisible(t *testing.T) {
	tp := newTopo(t, 2)
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}},
		Ring: Ring{BlockSize: 4096, BlockCount: 2}})
	stall := make(chan struct{})
	hook := func(w *worker) {
		if w.id == 0 {
			<-stall
		}
	}
	batchHook.Store(&hook)
	defer func() {
		batchHook.Store(nil)
		close(stall)
	}()
	// 300 pings of 1000 bytes at 2 ms: far beyond two 4 KiB blocks. A
	// static neighbour entry, as the stalled bridge forwards no ARP.
	tp.hosts[0].IP(t, "neigh", "replace", "10.42.0.2", "lladdr", "02:42:00:00:00:02", "dev", "eth0")
	tp.hosts[0].Command("ping", "-q", "-c", "300", "-i", "0.002", "-s", "1000", "-w", "2", "10.42.0.2").Run()
	eventually(t, 10*time.Second, "ring drops in the snapshot", func() (bool, string) {
		r := e.Snapshot().Ports[0].Ring
		return r.RxDrops > 0, fmt.Sprintf("%+v", r)
	})
}

type rulesRuleset = rules.Ruleset

var rulesParse = rules.Parse

// TestEngineJumbo forwards 8000-byte frames between two jumbo ports and
// drops them, counted as oversize, towards a port with MTU 1500.
func TestEngineJumbo(t *testing.T) {
	tp := newTopo(t, 3)
	for i, h := range tp.hosts[:2] {
		tp.box.IP(t, "link", "set", fmt.Sprintf("p%d", i+1), "mtu", "9000")
		h.IP(t, "link", "set", "eth0", "mtu", "9000")
	}
	tp.hosts[0].IP(t, "neigh", "replace", "10.42.0.3", "lladdr", "02:42:00:00:00:03", "dev", "eth0")
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}, {Interface: "p3"}}})
	out, err := tp.hosts[0].Command("ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", "8000", "10.42.0.2").CombinedOutput()
	if err != nil {
		t.Fatalf("jumbo ping: %v\n%s", err, out)
	}
	// 10.42.0.3 is an unknown MAC: the 8028-byte frame floods, and the
	// copy for p3 (MTU 1500) is dropped.
	tp.hosts[0].Command("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "8000", "10.42.0.3").Run()
	s := e.Snapshot()
	if s.Ports[0].Drops[DropOversize] == 0 { // drops count at the ingress port
		t.Errorf("no oversize drop counted: %+v", s.Drops)
	}
	if s.Ports[1].TxBytes < 2*8000 {
		t.Errorf("p2 sent %d bytes, want the jumbo frames", s.Ports[1].TxBytes)
	}
}

// TestPortRestartInPlace changes one port's MTU and worker count at run
// time: only that port's workers restart, traffic between the other
// ports does not lose a frame, and the changed port forwards with its new
// settings.
func TestPortRestartInPlace(t *testing.T) {
	tp := newTopo(t, 3)
	cfg := &Config{
		Ports:    []Port{{Interface: "p1"}, {Interface: "p2"}, {Interface: "p3"}},
		HostPort: &HostPort{Interface: "dphost1", Addresses: []netip.Prefix{netip.MustParsePrefix("10.42.0.100/24")}},
	}
	e := tp.engine(cfg)
	for _, h := range []int{1, 2, 3} {
		if err := tp.ping(h, "10.42.0.100"); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Snapshot()
	ids := func(s Snapshot, port string) (out []int) {
		for _, w := range s.Workers {
			if w.Port == port {
				out = append(out, w.ID)
			}
		}
		return out
	}

	// h1 ↔ h3 traffic runs across the change of p2.
	ping := tp.hosts[0].Command("ping", "-c", "60", "-i", "0.05", "-W", "2", "10.42.0.3")
	var out bytes.Buffer
	ping.Stdout, ping.Stderr = &out, &out
	netnstest.Start(t, ping) // killed and reaped at the cleanup if the test ends first
	time.Sleep(500 * time.Millisecond)
	cfg2 := *cfg
	cfg2.Ports = []Port{{Interface: "p1"}, {Interface: "p2", MTU: 1400, Workers: 2}, {Interface: "p3"}}
	var err error
	tp.box.Do(t, func() { err = e.Apply(&cfg2, "p2") }) // it opens sockets, like New, in the caller's namespace
	if err != nil {
		t.Fatalf("Apply with p2's MTU and workers changed: %v", err)
	}
	if err := ping.Wait(); err != nil || !strings.Contains(out.String(), " 0% packet loss") {
		t.Errorf("h1 → h3 across the restart of p2: %v\n%s", err, out.String())
	}

	after := e.Snapshot()
	for _, p := range []string{"p1", "p3", "host"} {
		if diff := cmp.Diff(ids(before, p), ids(after, p)); diff != "" {
			t.Errorf("workers of %s changed (-want +got):\n%s", p, diff)
		}
	}
	if got := ids(after, "p2"); len(got) != 2 || slices.Contains(got, ids(before, "p2")[0]) {
		t.Errorf("p2's workers %v after the change, want 2 new ones (were %v)", got, ids(before, "p2"))
	}
	if after.Ports[1].MTU != 1400 || after.Ports[1].Workers != 2 || after.Ports[1].Running != 2 {
		t.Errorf("p2 after the change: %+v", after.Ports[1])
	}
	for i := range before.Ports {
		if after.Ports[i].RxPackets < before.Ports[i].RxPackets || after.Ports[i].TxPackets < before.Ports[i].TxPackets {
			t.Errorf("port %s counters went back: %+v → %+v", before.Ports[i].Name, before.Ports[i], after.Ports[i])
		}
	}
	if !e.Health().OK {
		t.Errorf("not healthy after the change: %+v", e.Health())
	}
	// Every path through p2 works: the other workers' new TX sockets to
	// it, its new workers, the host port.
	for _, c := range [][2]string{{"1", "10.42.0.2"}, {"2", "10.42.0.3"}, {"2", "10.42.0.100"}} {
		h, _ := strconv.Atoi(c[0])
		if err := tp.ping(h, c[1]); err != nil {
			t.Errorf("after the change: %v", err)
		}
	}
	// p2's new MTU holds: the interface has it, and p1's worker (which
	// did not restart) drops a 1428-byte frame for h2 as oversize.
	if link := tp.box.IP(t, "link", "show", "p2"); !strings.Contains(link, "mtu 1400") {
		t.Errorf("p2 after the change: %s", link)
	}
	tp.hosts[0].Command("ping", "-c", "2", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1400", "10.42.0.2").Run()
	if d := e.Snapshot().Ports[0].Drops[DropOversize]; d == 0 {
		t.Errorf("no oversize drop counted at p1 for 1428-byte frames to p2 (MTU 1400)")
	}
}

// threadsWithNice counts this process's threads whose nice value is nice
// (field 19 of /proc/self/task/*/stat).
func threadsWithNice(t *testing.T, nice int) int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		// The command (field 2) may hold spaces; fields after it do not.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 16 && f[16] == strconv.Itoa(nice) {
			n++
		}
	}
	return n
}
