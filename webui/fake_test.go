package webui

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"e1kbox/rules"
)

// The fakes below stand in for the appliance's parts. Their counters grow
// with time, and faster over time, so rates rise.

type fakeStats struct {
	mu    sync.Mutex
	start time.Time
	now   func() time.Time
	ports []PortStats
	extra int     // additional IRQ vectors, to make messages large
	accel float64 // growth of port1's rate in pps per second
	wave  float64 // relative amplitude of a slow wave on the rates
	nat   bool
	// fastPath is the fast path's state (its packets grow at 40 kpps
	// while it runs); nil: none.
	fastPath *FastPathSummary
	ipv6     *IPv6Counters // nil: no IPv6 router
	calls    int
}

func newFakeStats() *fakeStats {
	return &fakeStats{
		start: time.Now(),
		now:   time.Now,
		ports: []PortStats{
			{Name: "port1", Interface: "eth1", Up: true, SpeedMbps: 1000},
			{Name: "port2", Interface: "eth2", Up: true, SpeedMbps: 1000},
			{Name: "port3", Interface: "eth3", Up: false},
		},
		accel:    4000,
		nat:      true,
		fastPath: &FastPathSummary{Mode: "tcx", Flows: 12},
	}
}

// counter grows as rate*t + accel*t²/2: its rate is rate+accel*t.
func counter(t, rate, accel float64) uint64 { return uint64(rate*t + accel*t*t/2) }

// waved adds a wave of relative amplitude a and period 2π·60 s to a
// counter of the given base rate: its rate gains base·a·sin(t/60+phase).
func waved(t, base, a, phase float64) uint64 {
	return uint64(base * a * 60 * (math.Cos(phase) - math.Cos(t/60+phase)))
}

func (f *fakeStats) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	now := f.now()
	t := now.Sub(f.start).Seconds()
	s := Snapshot{Time: now, WorkerRestarts: 1}
	for i, p := range f.ports {
		if p.Up {
			k := float64(i + 1)
			p.RxPackets = counter(t, 50000*k, f.accel*k) + waved(t, 50000*k, f.wave, k)
			p.TxPackets = counter(t, 48000*k, f.accel*0.97*k) + waved(t, 48000*k, f.wave, k+0.3)
			p.RxBytes = p.RxPackets * 600
			p.TxBytes = p.TxPackets * 580
			p.RingDrops = counter(t, 3*k, 0)
		}
		s.Ports = append(s.Ports, p)
	}
	s.Drops = []DropStat{
		{Reason: DropRing, Packets: counter(t, 9, 0)},
		{Reason: DropRules, Packets: counter(t, 120, 10)},
		{Reason: DropNATFull, Packets: 0},
		{Reason: DropMalformed, Packets: counter(t, 0.5, 0)},
	}
	s.CPUs = []CPUStat{
		{CPU: 0, BusySeconds: 0.35 * t, IdleSeconds: 0.65 * t},
		{CPU: 1, BusySeconds: 0.8 * t, IdleSeconds: 0.2 * t},
	}
	s.IRQs = []IRQStat{
		{IRQ: 40, Name: "eth1-rx-0", Count: counter(t, 8000, 100)},
		{IRQ: 41, Name: "eth1-tx-0", Count: counter(t, 3000, 50)},
		{IRQ: 42, Name: "eth2-rx-0", Count: counter(t, 9000, 120)},
		{IRQ: 43, Name: "eth2-tx-0", Count: counter(t, 2500, 40)},
	}
	for i := range f.extra {
		s.IRQs = append(s.IRQs, IRQStat{IRQ: 100 + i, Name: fmt.Sprintf("padding-vector-with-a-long-name-%06d", i), Count: uint64(i)})
	}
	if f.nat {
		s.Conntrack = &ConntrackSummary{Entries: 100000, Capacity: 262144}
	}
	if f.ipv6 != nil {
		v6 := *f.ipv6
		s.IPv6 = &v6
	}
	if f.fastPath != nil {
		fp := *f.fastPath
		if fp.Mode != "off" {
			fp.Packets = counter(t, 40000, 0)
		}
		s.FastPath = &fp
	}
	return s
}

func (f *fakeStats) snapshots() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// fakeRules shows the store's current rule set; rules with a counter count
// 100 frames per second from when they first appeared.
type fakeRules struct {
	store *fakeStore
	mu    sync.Mutex
	seen  map[string]time.Time
}

func newFakeRules(s *fakeStore) *fakeRules { return &fakeRules{store: s, seen: map[string]time.Time{}} }

func (f *fakeRules) Table() RuleTable {
	cfg, v := f.store.Current()
	var c struct {
		Rules rules.Ruleset `json:"rules"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return RuleTable{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	t := RuleTable{Subtables: 0, Generation: uint64(len(v.ID))}
	if tab, err := rules.Compile(&c.Rules, rules.Options{Ports: map[string]uint16{"port1": 1, "port2": 2, "port3": 3}}); err == nil {
		t.Subtables = tab.Subtables()
	}
	for _, ch := range []string{"input", "forward", "output"} {
		var chain rules.Chain
		if err := chain.UnmarshalText([]byte(ch)); err != nil {
			continue
		}
		if a, ok := c.Rules.Policy[chain]; ok {
			t.Policies = append(t.Policies, PolicyStat{Chain: ch, Action: a.String(), Packets: 1234, Bytes: 1234 * 400})
		}
	}
	for _, r := range c.Rules.Rules {
		rs := RuleStat{Chain: r.Chain.String(), Text: r.String(), Counted: r.Counter}
		k := rs.Chain + " " + rs.Text
		first, ok := f.seen[k]
		if !ok {
			f.seen[k] = now
			first = now
		}
		if rs.Counted {
			rs.Packets = uint64(100 * now.Sub(first).Seconds())
			rs.Bytes = rs.Packets * 700
			if rs.Packets > 0 {
				rs.LastHit = now
			}
		}
		t.Rules = append(t.Rules, rs)
	}
	return t
}

// fakeConntrack holds n generated connections.
type fakeConntrack struct {
	mu    sync.Mutex
	conns []Conn
}

var connStates = []string{"established", "new", "syn_sent", "time_wait", "fin_wait"}
var connProtos = []string{"tcp", "udp", "icmp"}

func newFakeConntrack(n int) *fakeConntrack {
	base := time.Now().Truncate(time.Second)
	cs := make([]Conn, n)
	for i := range cs {
		h := uint64(i)*2654435761 + 12345 // spreads values without a pattern in ID order
		proto := connProtos[h%3]
		state := connStates[(h/3)%5]
		if proto != "tcp" {
			state = "established"
		}
		src := netip.AddrFrom4([4]byte{192, 168, byte(1 + i/60000), byte(i / 250 % 240)})
		dst := netip.AddrFrom4([4]byte{byte(20 + h%200), byte(h >> 8), byte(h >> 16), byte(1 + h>>24%250)})
		sport := uint16(1024 + h%60000)
		dport := []uint16{443, 80, 53, 22, 8080}[(h>>5)%5]
		cs[i] = Conn{
			ID:      uint64(i + 1),
			Proto:   proto,
			State:   state,
			Src:     netip.AddrPortFrom(src, sport),
			Dst:     netip.AddrPortFrom(dst, dport),
			NATSrc:  netip.AddrPortFrom(netip.MustParseAddr("203.0.113.2"), uint16(20000+i%40000)),
			Packets: (h >> 7) % 100000,
			Bytes:   (h >> 3) % 100000000,
			Created: base.Add(-time.Duration(h%86400) * time.Second),
		}
	}
	return &fakeConntrack{conns: cs}
}

// addIPv6 adds n routed IPv6 connections (ID 0, no creation time, no
// bytes) of h1 (2001:db8:6600::100) and h2 to the Internet, the last
// one opened from it (inbound).
func (f *fakeConntrack) addIPv6(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range n {
		lan := netip.AddrPortFrom(netip.MustParseAddr("2001:db8:6600::100"), uint16(51000+i))
		if i%2 == 1 {
			lan = netip.AddrPortFrom(netip.MustParseAddr("2001:db8:6600::200"), uint16(51000+i))
		}
		wan := netip.AddrPortFrom(netip.MustParseAddr("2001:db8:64::1"), 443)
		c := Conn{Proto: "tcp", State: "established", Kind: ConnKindRouted, Src: lan, Dst: wan, Packets: uint64(10 + i), Expires: exp}
		if i == n-1 {
			c.Src, c.Dst = netip.AddrPortFrom(wan.Addr(), 40000), netip.AddrPortFrom(lan.Addr(), 22)
		}
		f.conns = append(f.conns, c)
	}
}

func (f *fakeConntrack) Query(q ConnQuery) ([]Conn, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FilterConns(f.conns, q)
}

func (f *fakeConntrack) DeleteMatching(q ConnQuery) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.conns)
	f.conns = slices.DeleteFunc(f.conns, func(c Conn) bool { return c.Kind != ConnKindRouted && q.Match(&c) })
	return n - len(f.conns), nil
}

func (f *fakeConntrack) Delete(id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.conns {
		if c.ID == id && id != 0 {
			f.conns = append(f.conns[:i], f.conns[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("connection %d: %w", id, ErrNotFound)
}

type fakeFDB []FDBEntry

func (f fakeFDB) Entries() []FDBEntry { return append([]FDBEntry(nil), f...) }

type fakeTuning []TuningReport

func (f fakeTuning) Reports() []TuningReport { return f }

type fakeSystem struct{ started time.Time }

func (f fakeSystem) Info() SystemInfo {
	return SystemInfo{Hostname: "e1kbox-test", Version: "v1.2.3", BuildTimestamp: "2026-07-01T10:00:00Z",
		Mode: "nat", Started: f.started, MemTotal: 2 << 30, MemAvailable: 1200 << 20, Kernel: testKernel()}
}

// testKernel is the kernel fakeSystem reports: e1kbox's own, JIT on.
func testKernel() *KernelInfo {
	return &KernelInfo{Release: "6.12.118", Version: "#1 SMP PREEMPT_DYNAMIC Debian 6.12.118-1", Source: "Debian 6.12.118-1", JIT: "on",
		Watchdog: Watchdog{Identity: "iTCO_wdt", TimeoutSeconds: 30, State: "active"},
		FastPath: &FastPathCost{JIT: true, Path: "nat", Hit: 121.3, Userspace: 216.2, Miss: 95}}
}

var testFDB = fakeFDB{
	{MAC: "52:54:00:12:34:56", Port: "port1", VLAN: 0, Age: 12 * time.Second},
	{MAC: "52:54:00:ab:cd:ef", Port: "port2", VLAN: 10, Age: 95 * time.Second},
	{MAC: "02:00:00:00:00:01", Port: "port2", VLAN: 0, Static: true},
}

var testTuning = fakeTuning{
	{Knob: "itr", Target: "eth1", Before: "dynamic", Wanted: "20000", After: "20000", Status: "changed", ResetsLink: true},
	{Knob: "rx-gro", Target: "eth1", Before: "on", Wanted: "off", After: "off", Status: "changed"},
	{Knob: "rings", Target: "eth2", Before: "256/256", Wanted: "4096/4096", After: "4096/4096", Status: "ok", Message: "already set"},
	{Knob: "threaded-napi", Target: "eth2", Wanted: "1", Status: "unavailable", Message: "kernel has no threaded NAPI"},
}
