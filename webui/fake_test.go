package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
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

// fakeStore is an in-memory ConfigStore with commit-confirm.
type fakeStore struct {
	mu       sync.Mutex
	versions []fakeVersion // oldest first
	current  int
	pending  *PendingInfo
	prev     int
	timer    *time.Timer    // rolls the pending change back
	rolling  sync.WaitGroup // the timer's callback, when it runs
	states   map[PendingID]ApplyState
	n        int
	applies  int
}

type fakeVersion struct {
	v   Version
	cfg json.RawMessage
}

const factoryConfig = `{
  "version": 2,
  "mode": "nat",
  "ports": [
    {"name": "port1", "interface": "eth1", "role": "wan", "addresses": ["203.0.113.2/24"], "mtu": 1500, "enabled": true},
    {"name": "port2", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"], "mtu": 1500, "enabled": true},
    {"name": "port3", "interface": "eth3", "role": "lan", "mtu": 1500, "enabled": false}
  ],
  "hostPort": {"name": "host", "interface": "e1khost0", "addresses": ["192.168.1.2/24"]},
  "nat": {"gateway": "203.0.113.1", "masqueradePorts": "1024-65535",
          "forwards": [{"proto": "tcp", "wanPorts": "443", "lanHost": "192.168.1.10", "comment": "web server"}]},
  "rules": {"policy": {"forward": "accept"},
            "rules": [{"chain": "forward", "l4proto": "tcp", "dport": "22", "counter": true, "action": "accept"},
                      {"chain": "forward", "saddr": "10.0.0.0/8", "counter": true, "action": "drop"},
                      {"chain": "input", "l4proto": "udp", "dport": "53", "action": "accept"}]},
  "dashboard": {"listen": ":8080", "confirmTimeout": "1m0s"}
}`

func newFakeStore() *fakeStore {
	return &fakeStore{
		versions: []fakeVersion{{Version{ID: "v1", Time: time.Now().Add(-time.Hour), Source: "factory"}, json.RawMessage(factoryConfig)}},
		states:   map[PendingID]ApplyState{},
		n:        1,
	}
}

func (s *fakeStore) Current() (json.RawMessage, Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.versions[s.current]
	return v.cfg, v.v
}

func (s *fakeStore) Version() Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[s.current].v
}

type fakeConfig struct {
	Mode  string `json:"mode"`
	Ports []struct {
		Name      string   `json:"name"`
		Interface string   `json:"interface"`
		Addresses []string `json:"addresses"`
	} `json:"ports"`
	Rules *json.RawMessage `json:"rules"`
}

func (s *fakeStore) Validate(b []byte) []FieldError {
	var c fakeConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return []FieldError{{Path: "", Message: err.Error()}}
	}
	var errs []FieldError
	if c.Mode != "bridge" && c.Mode != "nat" {
		errs = append(errs, FieldError{Path: "mode", Message: fmt.Sprintf("must be bridge or nat, not %q", c.Mode)})
	}
	ports := map[string]uint16{}
	for i, p := range c.Ports {
		if p.Name == "" {
			errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].name", i), Message: "required"})
		}
		if p.Interface == "" {
			errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].interface", i), Message: "required"})
		}
		for j, a := range p.Addresses {
			if _, err := netip.ParsePrefix(a); err != nil {
				errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].addresses[%d]", i, j), Message: "want an address with its prefix length, like 192.168.1.1/24"})
			}
		}
		ports[p.Name] = uint16(i + 1)
	}
	if c.Rules != nil {
		var rs rules.Ruleset
		if err := json.Unmarshal(*c.Rules, &rs); err != nil {
			return append(errs, FieldError{Path: "rules", Message: err.Error()})
		}
		_, err := rules.Compile(&rs, rules.Options{Ports: ports})
		var list rules.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				path := "rules"
				if e.Rule >= 0 {
					path = fmt.Sprintf("rules.rules[%d]", e.Rule)
					if e.Field != "" {
						path += "." + e.Field
					}
				}
				errs = append(errs, FieldError{Path: path, Message: e.Msg})
			}
		} else if err != nil {
			errs = append(errs, FieldError{Path: "rules", Message: err.Error()})
		}
	}
	return errs
}

func (s *fakeStore) Apply(b []byte, timeout time.Duration) (PendingID, error) {
	if errs := s.Validate(b); len(errs) > 0 {
		return "", FieldErrors(errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		return "", ErrBusy
	}
	s.n++
	s.applies++
	v := Version{ID: "v" + strconv.Itoa(s.n), Time: time.Now(), Source: "web"}
	s.versions = append(s.versions, fakeVersion{v, append(json.RawMessage(nil), b...)})
	s.prev, s.current = s.current, len(s.versions)-1
	id := PendingID("change-" + strconv.Itoa(s.n))
	s.pending = &PendingInfo{ID: id, Version: v, Previous: s.versions[s.prev].v, Deadline: time.Now().Add(timeout)}
	s.states[id] = ApplyPending
	s.rolling.Add(1)
	s.timer = time.AfterFunc(timeout, func() {
		defer s.rolling.Done()
		s.Rollback(id)
	})
	return id, nil
}

// stopTimer stops the rollback timer; s.mu is held.
func (s *fakeStore) stopTimer() {
	if s.timer != nil && s.timer.Stop() {
		s.rolling.Done()
	}
}

// stop ends the rollback timer and waits for its callback if it runs.
func (s *fakeStore) stop() {
	s.mu.Lock()
	s.stopTimer()
	s.mu.Unlock()
	s.rolling.Wait()
}

func (s *fakeStore) Confirm(id PendingID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || s.pending.ID != id {
		return fmt.Errorf("change %s: %w", id, ErrNotFound)
	}
	s.stopTimer()
	s.pending = nil
	s.states[id] = ApplyConfirmed
	return nil
}

func (s *fakeStore) Rollback(id PendingID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || s.pending.ID != id {
		return fmt.Errorf("change %s: %w", id, ErrNotFound)
	}
	s.stopTimer()
	s.pending = nil
	s.current = s.prev
	s.states[id] = ApplyRolledBack
	return nil
}

func (s *fakeStore) Pending() *PendingInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return nil
	}
	p := *s.pending
	return &p
}

func (s *fakeStore) State(id PendingID) ApplyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.states[id]; ok {
		return st
	}
	return ApplyUnknown
}

func (s *fakeStore) History() []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Version
	for i := len(s.versions) - 1; i >= 0; i-- {
		out = append(out, s.versions[i].v)
	}
	return out
}

func (s *fakeStore) Get(id string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.versions {
		if v.v.ID == id {
			return v.cfg, nil
		}
	}
	return nil, fmt.Errorf("version %s: %w", id, ErrNotFound)
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
		Mode: "nat", Started: f.started, MemTotal: 2 << 30, MemAvailable: 1200 << 20}
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

// fixture is a running server with all fakes.
type fixture struct {
	t     *testing.T
	srv   *Server
	ts    *httptest.Server
	stats *fakeStats
	store *fakeStore
	ct    *fakeConntrack
	pw    string
}

const testPassword = "s3cret-Pa55"

// writePassword writes a password file and returns its path.
func writePassword(t testing.TB, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gokr-pw.txt")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newFixture starts a server with every fake and its publisher; edit
// adjusts the options.
func newFixture(t *testing.T, edit func(*Options)) *fixture {
	t.Helper()
	return startFixture(t, edit, true)
}

// startFixture is newFixture; without run the test publishes itself.
func startFixture(t *testing.T, edit func(*Options), run bool) *fixture {
	t.Helper()
	f := &fixture{t: t, stats: newFakeStats(), store: newFakeStore(), ct: newFakeConntrack(1000), pw: testPassword}
	opts := Options{
		Stats:         f.stats,
		Config:        f.store,
		Rules:         newFakeRules(f.store),
		Conntrack:     f.ct,
		FDB:           testFDB,
		Tuning:        testTuning,
		System:        fakeSystem{started: time.Now().Add(-26 * time.Hour)},
		PasswordFiles: []string{filepath.Join(t.TempDir(), "missing"), writePassword(t, f.pw)},
		CertFile:      "-",
		KeyFile:       "-",
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&opts)
	}
	if c, ok := opts.Conntrack.(*fakeConntrack); ok {
		f.ct = c
	}
	if s, ok := opts.Stats.(*fakeStats); ok {
		f.stats = s
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if run {
			srv.Run(ctx)
		}
	}()
	f.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		f.ts.Close()
		f.store.stop()
	})
	return f
}

// on returns the fixture for a subtest: its helpers fail t, which runs on
// the subtest's goroutine, not the test that made the fixture.
func (f *fixture) on(t *testing.T) *fixture {
	g := *f
	g.t = t
	return &g
}

// req sends a request with the right credentials (and the CSRF header for
// mutations) unless headers say otherwise; "Authorization: -" removes it.
func (f *fixture) req(method, path string, body []byte, headers ...string) *http.Response {
	f.t.Helper()
	r, err := http.NewRequest(method, f.ts.URL+path, bytesReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	r.SetBasicAuth(User, f.pw)
	if method != http.MethodGet {
		r.Header.Set(CSRFHeader, "1")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "-" {
			r.Header.Del(headers[i])
		} else {
			r.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := f.ts.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { res.Body.Close() })
	return res
}

// getJSON fetches path and decodes the answer into v, failing on a status
// other than want.
func (f *fixture) doJSON(method, path string, body []byte, want int, v any, headers ...string) {
	f.t.Helper()
	res := f.req(method, path, body, headers...)
	b := readAll(f.t, res)
	if res.StatusCode != want {
		f.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			f.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
}

func bytesReader(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

func readAll(t testing.TB, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
