package timesync

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fast fills in the test's quick timing (rounds every 80 ms after a sync,
// retries from 10 ms before it) and a floor a year back, so that answers
// an hour off are in range whatever BuildFloor is.
func fast(cfg Config) Config {
	if cfg.Floor.IsZero() {
		cfg.Floor = time.Now().Add(-365 * 24 * time.Hour)
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = 80 * ms
	}
	if cfg.Interval == 0 {
		cfg.Interval = 640 * ms
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 300 * ms
	}
	return cfg
}

// start runs a client for cfg (fast timing, a fakeClock unless cfg has
// one) until the test ends.
func start(t *testing.T, cfg Config) (*Client, *fakeClock) {
	t.Helper()
	clock, _ := cfg.Clock.(*fakeClock)
	if clock == nil {
		clock = &fakeClock{}
		cfg.Clock = clock
	}
	c, err := New(fast(cfg), testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c, clock
}

// servers starts one fake server per behaviour and returns their specs.
func servers(t *testing.T, bs ...behaviour) ([]string, []*fakeServer) {
	var specs []string
	var fs []*fakeServer
	for _, b := range bs {
		s := newFakeServer(t, b)
		specs = append(specs, s.addr())
		fs = append(fs, s)
	}
	return specs, fs
}

func waitSynced(t *testing.T, c *Client, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("%v; status %+v", err, c.Status())
	}
}

// corrected reports whether the clock was given want since its from-th
// correction.
func corrected(clock *fakeClock, from int, want action) bool {
	actions, _ := clock.record()
	for _, a := range actions[min(from, len(actions)):] {
		if cmp.Equal(want, a, approx) {
			return true
		}
	}
	return false
}

// since sums the clock's corrections since its from-th and counts the
// steps among them. A clock change in the middle of a round's (parallel)
// queries is measured in part, so a correction may take two rounds: the
// sum is what must come out right.
func since(clock *fakeClock, from int) (sum time.Duration, steps int) {
	actions, _ := clock.record()
	for _, a := range actions[min(from, len(actions)):] {
		sum += a.Offset
		if a.Step {
			steps++
		}
	}
	return sum, steps
}

// eventually waits up to d for cond.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(5 * ms) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

func TestCorrection(t *testing.T) {
	sinceEpoch := time.Since(time.Unix(0, 0))
	for _, tc := range []struct {
		name    string
		shift   time.Duration // the clock's error at start
		servers []behaviour
		want    action // the first correction
	}{
		{name: "one server 5 s ahead: step", servers: []behaviour{{offset: 5 * time.Second}}, want: action{Step: true, Offset: 5 * time.Second}},
		{name: "one server 40 ms ahead: slew", servers: []behaviour{{offset: 40 * ms}}, want: action{Offset: 40 * ms}},
		{name: "two servers 3 s behind: step back", servers: []behaviour{{offset: -3 * time.Second}, {offset: -3*time.Second + 10*ms}}, want: action{Step: true, Offset: -3 * time.Second}},
		{name: "three servers 100 ms behind: slew back", servers: []behaviour{{offset: -100 * ms}, {offset: -95 * ms}, {offset: -105 * ms}}, want: action{Offset: -100 * ms}},
		{name: "300 ms is past MaxStep: step", servers: []behaviour{{offset: 300 * ms}, {offset: 300 * ms}}, want: action{Step: true, Offset: 300 * ms}},
		{name: "box booted in 1970: step 56 years", shift: -sinceEpoch, servers: []behaviour{{}, {}, {}}, want: action{Step: true, Offset: sinceEpoch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			specs, _ := servers(t, tc.servers...)
			c, clock := start(t, Config{Servers: specs, Clock: &fakeClock{shift: tc.shift}})
			waitSynced(t, c, 3*time.Second)
			actions, marks := clock.record()
			if diff := cmp.Diff([]action{tc.want}, actions[:1], approx); diff != "" {
				t.Errorf("first correction (-want +got):\n%s", diff)
			}
			if marks < 1 {
				t.Errorf("clock marked synchronized %d times, want at least once", marks)
			}
			st := c.Status()
			if !st.Synced || !c.Synced() || st.Stepped != tc.want.Step || st.Stratum != 2 || st.LastError != "" {
				t.Errorf("Status = %+v, want synced, stepped %v, stratum 2, no error", st, tc.want.Step)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	specs, _ := servers(t, behaviour{offset: 2 * time.Second, stratum: 3, rootDelay: 4 * ms, rootDisp: 2 * ms})
	// Slow rounds: nothing changes the status while the test reads it.
	c, clock := start(t, Config{Servers: specs, MinInterval: 10 * time.Second, Interval: 20 * time.Second})
	waitSynced(t, c, 3*time.Second)
	got := c.Status()
	want := Status{
		Synced: true, Offset: 2 * time.Second, Stepped: true, Server: specs[0], Address: specs[0], Stratum: 3,
		RTT: 0, RootDistance: 4 * ms, Poll: 10 * time.Second,
		Servers: []ServerStatus{{Server: specs[0], Address: specs[0], Offset: 2 * time.Second, Stratum: 3, Queries: 2}},
	}
	opts := cmp.Options{approx, cmpopts.IgnoreFields(Status{}, "LastSync"), cmpopts.IgnoreFields(ServerStatus{}, "LastAnswer")}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if now := clock.Now(); now.Sub(got.LastSync).Abs() > time.Second || now.Sub(got.Servers[0].LastAnswer).Abs() > 3*time.Second {
		t.Errorf("LastSync %v, LastAnswer %v: want the corrected clock's recent time (now %v)", got.LastSync, got.Servers[0].LastAnswer, now)
	}
}

// TestKeepsClock checks the steady state: drift is slewed away, a jump
// over MaxStep is stepped back.
func TestKeepsClock(t *testing.T) {
	t.Parallel()
	specs, _ := servers(t, behaviour{}, behaviour{}, behaviour{})
	c, clock := start(t, Config{Servers: specs})
	waitSynced(t, c, 3*time.Second)
	n := func() int { a, _ := clock.record(); return len(a) }
	from := n()
	clock.drift(60 * ms)
	eventually(t, 3*time.Second, "drift of 60 ms slewed back", func() bool {
		sum, steps := since(clock, from)
		return cmp.Equal(-60*ms, sum, approx) && steps == 0
	})
	from = n()
	clock.drift(500 * ms)
	eventually(t, 3*time.Second, "jump of 500 ms stepped back", func() bool {
		sum, steps := since(clock, from)
		return cmp.Equal(-500*ms, sum, approx) && steps > 0
	})
}

func TestFalsetickers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		servers      []behaviour
		want         *action // nil: the clock must stay untouched
		falsetickers []bool
		reason       string
	}{
		{
			name:         "three: one an hour off is outvoted",
			servers:      []behaviour{{offset: 5 * time.Second}, {offset: 5*time.Second + 10*ms}, {offset: time.Hour}},
			want:         &action{Step: true, Offset: 5 * time.Second},
			falsetickers: []bool{false, false, true},
		},
		{
			name:         "five: two wild ones are outvoted",
			servers:      []behaviour{{offset: -time.Hour}, {offset: 2 * time.Second}, {offset: 10 * 365 * 24 * time.Hour}, {offset: 2 * time.Second}, {offset: 2*time.Second - 5*ms}},
			want:         &action{Step: true, Offset: 2 * time.Second},
			falsetickers: []bool{true, false, true, false, false},
		},
		{
			name:         "one refuses service, two agree",
			servers:      []behaviour{{offset: time.Second}, {kiss: "DENY"}, {offset: time.Second}},
			want:         &action{Step: true, Offset: time.Second},
			falsetickers: []bool{false, false, false},
		},
		{
			name:         "two disagree: nothing set",
			servers:      []behaviour{{offset: 5 * time.Second}, {offset: time.Hour}},
			falsetickers: []bool{false, false},
			reason:       "no majority agrees: 2 usable answers, at most 1 agree",
		},
		{
			name:         "four split evenly: nothing set",
			servers:      []behaviour{{offset: 5 * time.Second}, {offset: time.Hour}, {offset: 5 * time.Second}, {offset: time.Hour}},
			falsetickers: []bool{false, false, false, false},
			reason:       "no majority agrees: 4 usable answers, at most 2 agree",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			specs, _ := servers(t, tc.servers...)
			c, clock := start(t, Config{Servers: specs})
			if tc.want != nil {
				waitSynced(t, c, 3*time.Second)
				actions, _ := clock.record()
				if diff := cmp.Diff([]action{*tc.want}, actions[:1], approx); diff != "" {
					t.Errorf("first correction (-want +got):\n%s", diff)
				}
			} else {
				eventually(t, 3*time.Second, "three rounds", func() bool { return c.Status().Servers[0].Queries >= 3 })
				if actions, _ := clock.record(); len(actions) > 0 || c.Synced() {
					t.Errorf("clock corrected %v, synced %v; want it untouched", actions, c.Synced())
				}
				if st := c.Status(); !strings.HasPrefix(st.LastError, tc.reason) {
					t.Errorf("LastError %q, want it to start with %q", st.LastError, tc.reason)
				}
			}
			var got []bool
			for _, s := range c.Status().Servers {
				got = append(got, s.Falseticker)
			}
			if diff := cmp.Diff(tc.falsetickers, got); diff != "" {
				t.Errorf("falsetickers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefusals checks that answers that must not set a clock do not, and
// how the client treats their servers afterwards.
func TestRefusals(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		b        behaviour
		cfg      Config
		err      string // in the server's LastError
		requests int64  // exact request count, if not 0
		denied   bool
	}{
		{name: "kiss of death RATE: backs off for Interval", b: behaviour{kiss: "RATE"}, err: `kiss of death "RATE"`, requests: 1},
		{name: "kiss of death DENY: never asked again", b: behaviour{kiss: "DENY"}, err: `kiss of death "DENY"`, requests: 1, denied: true},
		{name: "kiss of death RSTR: never asked again", b: behaviour{kiss: "RSTR"}, err: `kiss of death "RSTR"`, requests: 1, denied: true},
		{name: "stratum 16", b: behaviour{stratum: 16}, err: "stratum 16"},
		{name: "leap alarm", b: behaviour{leap: 3}, err: "leap indicator 3"},
		{name: "stale reference time", b: behaviour{staleRef: true}, err: ntp.ErrServerClockFreshness.Error()},
		{name: "root dispersion over 16 s", b: behaviour{rootDisp: 20 * time.Second}, err: ntp.ErrInvalidDispersion.Error()},
		{name: "time before the floor", b: behaviour{}, cfg: Config{Floor: now.Add(24 * time.Hour)}, err: "before the floor"},
		{name: "time past the sanity limit", b: behaviour{offset: 3 * time.Hour}, cfg: Config{Floor: now.Add(-time.Hour), Sanity: 2 * time.Hour}, err: "after the sanity limit"},
		{name: "silent server", b: behaviour{silent: true}, err: "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			specs, fs := servers(t, tc.b)
			cfg := tc.cfg
			cfg.Servers, cfg.Interval = specs, 30*time.Second
			c, clock := start(t, cfg)
			eventually(t, 3*time.Second, "an error for the server", func() bool { return c.Status().Servers[0].Errors > 0 })
			time.Sleep(300 * ms) // more rounds
			st := c.Status()
			if actions, _ := clock.record(); len(actions) > 0 || st.Synced {
				t.Errorf("clock corrected %v, synced %v; want it untouched", actions, st.Synced)
			}
			s := st.Servers[0]
			if !strings.Contains(s.LastError, tc.err) || s.Denied != tc.denied {
				t.Errorf("server status %+v, want an error with %q, denied %v", s, tc.err, tc.denied)
			}
			if n := fs[0].requests.Load(); tc.requests != 0 && n != tc.requests {
				t.Errorf("server asked %d times, want %d", n, tc.requests)
			}
		})
	}
}

// TestSingleServerUnverified: a lone server whose two answers of a round
// disagree never sets the clock.
func TestSingleServerUnverified(t *testing.T) {
	t.Parallel()
	specs, fs := servers(t, behaviour{jitter: []time.Duration{0, time.Hour}})
	c, clock := start(t, Config{Servers: specs})
	eventually(t, 3*time.Second, "four queries", func() bool { return fs[0].requests.Load() >= 4 })
	if actions, _ := clock.record(); len(actions) > 0 || c.Synced() {
		t.Errorf("clock corrected %v, synced %v; want it untouched", actions, c.Synced())
	}
	if st := c.Status(); !strings.Contains(st.LastError, "two answers disagree") {
		t.Errorf("LastError %q, want the disagreement", st.LastError)
	}
}

// TestLoneAnswer: when only one of several servers answers, its answers
// must keep agreeing for MinInterval before they set the clock.
func TestLoneAnswer(t *testing.T) {
	t.Parallel()
	specs, fs := servers(t, behaviour{offset: 2 * time.Second}, behaviour{stratum: 16}, behaviour{stratum: 16})
	begin := time.Now()
	c, clock := start(t, Config{Servers: specs, MinInterval: 200 * ms, Interval: time.Second})
	waitSynced(t, c, 3*time.Second)
	if took := time.Since(begin); took < 200*ms {
		t.Errorf("synced from a lone server after %v, want MinInterval (200ms) or more", took)
	}
	if n := fs[0].requests.Load(); n < 4 {
		t.Errorf("lone server asked %d times before the sync, want two rounds of two at least", n)
	}
	actions, _ := clock.record()
	if diff := cmp.Diff([]action{{Step: true, Offset: 2 * time.Second}}, actions[:1], approx); diff != "" {
		t.Errorf("first correction (-want +got):\n%s", diff)
	}
}

// TestLoneFalsetickerOutvoted: a falseticker that answers while the other
// servers are not synchronized yet does not set the clock; once they are,
// they outvote it.
func TestLoneFalsetickerOutvoted(t *testing.T) {
	t.Parallel()
	specs, fs := servers(t, behaviour{offset: time.Hour}, behaviour{stratum: 16}, behaviour{stratum: 16})
	c, clock := start(t, Config{Servers: specs, MinInterval: 400 * ms, Interval: 2 * time.Second})
	eventually(t, 3*time.Second, "the falseticker asked", func() bool { return fs[0].requests.Load() > 0 })
	time.Sleep(30 * ms)
	fs[1].set(behaviour{offset: 2 * time.Second})
	fs[2].set(behaviour{offset: 2 * time.Second})
	waitSynced(t, c, 3*time.Second)
	actions, _ := clock.record()
	if diff := cmp.Diff([]action{{Step: true, Offset: 2 * time.Second}}, actions[:1], approx); diff != "" {
		t.Errorf("first correction (-want +got):\n%s", diff)
	}
	if !c.Status().Servers[0].Falseticker {
		t.Errorf("server 0 not marked a falseticker: %+v", c.Status().Servers[0])
	}
}

func TestWaitAndUpdate(t *testing.T) {
	t.Parallel()
	dead, _ := servers(t, behaviour{silent: true})
	good, _ := servers(t, behaviour{offset: 2 * time.Second})
	c, clock := start(t, Config{Servers: dead})

	ctx, cancel := context.WithTimeout(context.Background(), 200*ms)
	defer cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before any answer = %v, want a deadline error", err)
	}
	if c.Synced() {
		t.Fatal("Synced before any answer")
	}
	if err := c.Update(Config{Servers: []string{"no such host!"}}); err == nil {
		t.Error("Update accepted an invalid server")
	}
	if got := c.Status().Servers[0].Server; got != dead[0] {
		t.Errorf("after a refused Update the server is %q, want %q", got, dead[0])
	}
	if err := c.Update(fast(Config{Servers: good, Clock: clock})); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, c, 3*time.Second)
	actions, _ := clock.record()
	if diff := cmp.Diff([]action{{Step: true, Offset: 2 * time.Second}}, actions[:1], approx); diff != "" {
		t.Errorf("first correction (-want +got):\n%s", diff)
	}
}

// switchResolver answers from the map it holds, which the test swaps.
type switchResolver struct{ m atomic.Pointer[mapResolver] }

func (r *switchResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return r.m.Load().LookupNetIP(ctx, network, host)
}

// TestResolverAndFailover: a name that cannot be resolved yet (no DNS
// before the router runs) is retried; once it resolves to a dead and a
// live address, the client fails over to the live one.
func TestResolverAndFailover(t *testing.T) {
	t.Parallel()
	deadConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	port := deadConn.LocalAddr().(*net.UDPAddr).Port
	liveConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 3), Port: port})
	if err != nil {
		deadConn.Close()
		t.Fatalf("same port on 127.0.0.3: %v", err)
	}
	dead := serveFake(t, deadConn, behaviour{silent: true})
	serveFake(t, liveConn, behaviour{offset: time.Second})

	r := &switchResolver{}
	r.m.Store(&mapResolver{})
	spec := net.JoinHostPort("pool.test", strings.TrimPrefix(dead.addr(), "127.0.0.2:"))
	c, clock := start(t, Config{Servers: []string{spec}, Resolver: r})
	eventually(t, 3*time.Second, "a lookup failure", func() bool {
		return strings.Contains(c.Status().Servers[0].LastError, "resolve pool.test")
	})
	r.m.Store(&mapResolver{"pool.test": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}})
	waitSynced(t, c, 5*time.Second)
	actions, _ := clock.record()
	if diff := cmp.Diff([]action{{Step: true, Offset: time.Second}}, actions[:1], approx); diff != "" {
		t.Errorf("first correction (-want +got):\n%s", diff)
	}
	if st := c.Status(); st.Address != liveConn.LocalAddr().String() || dead.requests.Load() == 0 {
		t.Errorf("synced from %s after %d queries to the dead address; want %s after at least one", st.Address, dead.requests.Load(), liveConn.LocalAddr())
	}
}

// TestBackoffLimitsQueries: a server that keeps failing before the first
// sync is asked after 10, 20, 40, then every 80 ms (MinInterval), not
// every round.
func TestBackoffLimitsQueries(t *testing.T) {
	specs, fs := servers(t, behaviour{stratum: 16})
	c, _ := start(t, Config{Servers: specs})
	time.Sleep(time.Second)
	// 1 + about (1000-70)/80 ≈ 15 queries; without backoff 10 ms
	// retries would send about 100.
	if n := fs[0].requests.Load(); n < 5 || n > 25 {
		t.Errorf("failing server asked %d times in 1 s, want 5..25", n)
	}
	if b := c.Status().Servers[0].Backoff; b > 80*ms {
		t.Errorf("Backoff %v before the first sync, want at most MinInterval", b)
	}
}

// TestPanicGate runs decide over rounds of three agreeing answers: once
// synced, an offset over Panic waits for the next round to confirm it.
func TestPanicGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		synced  bool
		offsets []time.Duration // one round each
		applied []bool
	}{
		{name: "confirmed by the next round", synced: true, offsets: []time.Duration{2000 * time.Second, 2000 * time.Second}, applied: []bool{false, true}},
		{name: "a passing wild round is dropped", synced: true, offsets: []time.Duration{2000 * time.Second, 0, 2000 * time.Second}, applied: []bool{false, true, false}},
		{name: "a different wild offset starts over", synced: true, offsets: []time.Duration{2000 * time.Second, -3000 * time.Second, -3000 * time.Second}, applied: []bool{false, false, true}},
		{name: "under Panic applies at once", synced: true, offsets: []time.Duration{999 * time.Second}, applied: []bool{true}},
		{name: "before the first sync any offset applies", synced: false, offsets: []time.Duration{50 * 365 * 24 * time.Hour}, applied: []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Servers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, Clock: &fakeClock{}}, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			var got []bool
			for _, off := range tc.offsets {
				var answers []answer
				for _, s := range c.sources {
					answers = append(answers, answer{probe: probe{src: s, srv: s.srv}, resp: &ntp.Response{ClockOffset: off, RootDistance: ms}})
				}
				v := c.decide(context.Background(), c.cfg, tc.synced, answers)
				got = append(got, v.chosen != nil)
				if v.chosen == nil && !v.confirm {
					t.Errorf("offset %v: nothing applied and nothing to confirm: %s", off, v.reason)
				}
			}
			if diff := cmp.Diff(tc.applied, got); diff != "" {
				t.Errorf("applied per round (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPanicGateLive: a synced client given a 2000 s jump by all servers
// steps only after a second round has seen it.
func TestPanicGateLive(t *testing.T) {
	t.Parallel()
	specs, fs := servers(t, behaviour{}, behaviour{}, behaviour{})
	c, clock := start(t, Config{Servers: specs})
	waitSynced(t, c, 3*time.Second)
	before := fs[0].requests.Load()
	for _, s := range fs {
		s.set(behaviour{offset: 2000 * time.Second})
	}
	eventually(t, 3*time.Second, "the jump stepped", func() bool {
		return corrected(clock, 0, action{Step: true, Offset: 2000 * time.Second})
	})
	if n := fs[0].requests.Load() - before; n < 2 {
		t.Errorf("stepped after %d rounds with the jump, want at least 2", n)
	}
}

func TestClockRefuses(t *testing.T) {
	t.Parallel()
	specs, _ := servers(t, behaviour{offset: time.Second}, behaviour{offset: time.Second})
	c, _ := start(t, Config{Servers: specs, Clock: &fakeClock{setError: syscall.EPERM}})
	eventually(t, 3*time.Second, "the clock's error reported", func() bool {
		return strings.Contains(c.Status().LastError, "operation not permitted")
	})
	if c.Synced() {
		t.Error("synced though the clock refused to be set")
	}
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	specs, _ := servers(t, behaviour{silent: true})
	c, _ := start(t, Config{Servers: specs})
	time.Sleep(10 * ms)
	if err := c.Run(context.Background()); err == nil {
		t.Error("a second Run returned nil, want an error")
	}
}

func TestNormalize(t *testing.T) {
	clock := &fakeClock{}
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    Config
		wantErr string
	}{
		{
			name: "defaults",
			cfg:  Config{Clock: clock},
			want: Config{Servers: DefaultServers(), Resolver: net.DefaultResolver, Clock: clock, Interval: DefaultInterval, MinInterval: DefaultMinInterval,
				Timeout: DefaultTimeout, MaxStep: DefaultMaxStep, Panic: DefaultPanic, Floor: BuildFloor, Sanity: DefaultSanity},
		},
		{
			name: "servers normalized and deduplicated",
			cfg:  Config{Clock: clock, Servers: []string{"192.0.2.1:123", "192.0.2.1", "NTP.example.", "ntp.example", "[2001:db8::1]:123"}},
			want: Config{Servers: []string{"192.0.2.1", "ntp.example", "2001:db8::1"}, Resolver: net.DefaultResolver, Clock: clock, Interval: DefaultInterval, MinInterval: DefaultMinInterval,
				Timeout: DefaultTimeout, MaxStep: DefaultMaxStep, Panic: DefaultPanic, Floor: BuildFloor, Sanity: DefaultSanity},
		},
		{name: "bad server", cfg: Config{Servers: []string{"192.0.2.1", "bad host"}}, wantErr: "Servers[1]"},
		{name: "negative", cfg: Config{MaxStep: -1}, wantErr: "MaxStep -1ns is negative"},
		{name: "MinInterval over Interval", cfg: Config{Interval: time.Minute, MinInterval: time.Hour}, wantErr: "MinInterval 1h0m0s is longer than Interval 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := normalize(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("normalize error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b Resolver) bool { return a == b }), cmp.Comparer(func(a, b Clock) bool { return a == b }), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("normalize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVet(t *testing.T) {
	at := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg, _, err := normalize(Config{Clock: &fakeClock{}})
	if err != nil {
		t.Fatal(err)
	}
	good := func() *ntp.Response {
		return &ntp.Response{Stratum: 2, Version: 4, Time: at, ReferenceTime: at.Add(-time.Minute), RootDelay: 10 * ms, RootDispersion: 5 * ms}
	}
	for _, tc := range []struct {
		name string
		edit func(*ntp.Response)
		want string // "" for accepted
	}{
		{name: "good", edit: func(*ntp.Response) {}},
		{name: "kiss of death", edit: func(r *ntp.Response) { r.Stratum, r.KissCode = 0, "RATE" }, want: `kiss of death "RATE"`},
		{name: "stratum 16", edit: func(r *ntp.Response) { r.Stratum = 16 }, want: "stratum 16"},
		{name: "leap alarm", edit: func(r *ntp.Response) { r.Leap = ntp.LeapNotInSync }, want: "leap indicator 3"},
		{name: "leap second announced is fine", edit: func(r *ntp.Response) { r.Leap = ntp.LeapAddSecond }},
		{name: "reference after transmit", edit: func(r *ntp.Response) { r.ReferenceTime = at.Add(time.Minute) }, want: ntp.ErrInvalidTime.Error()},
		{name: "before the floor", edit: func(r *ntp.Response) { r.ClockOffset = BuildFloor.Sub(at) - time.Second }, want: "before the floor"},
		{name: "at the floor", edit: func(r *ntp.Response) { r.ClockOffset = BuildFloor.Sub(at) }},
		{name: "past the sanity limit", edit: func(r *ntp.Response) { r.ClockOffset = BuildFloor.Add(DefaultSanity).Sub(at) + time.Second }, want: "after the sanity limit"},
	} {
		r := good()
		tc.edit(r)
		err := vet(r, at, cfg)
		if got := ""; err != nil {
			got = err.Error()
			if tc.want == "" || !strings.Contains(got, tc.want) {
				t.Errorf("%s: vet = %q, want %q", tc.name, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s: vet accepted the answer, want %q", tc.name, tc.want)
		}
	}
}

// TestAskSystemClock asks a server with the system clock configured, which
// lets the library take the kernel's receive time stamps. It only reads
// the clock: asking never sets it.
func TestAskSystemClock(t *testing.T) {
	t.Parallel()
	specs, _ := servers(t, behaviour{offset: 1500 * ms})
	c, err := New(fast(Config{Servers: specs, Clock: System()}), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s := c.sources[0]
	a := c.ask(context.Background(), c.cfg, probe{src: s, srv: s.srv})
	if a.err != nil {
		t.Fatal(a.err)
	}
	if diff := cmp.Diff(1500*ms, a.resp.ClockOffset, approx); diff != "" || a.resp.RTT <= 0 {
		t.Errorf("offset (-want +got):\n%s; RTT %v", diff, a.resp.RTT)
	}
}

func TestDialSource(t *testing.T) {
	for _, src := range []netip.Addr{{}, netip.MustParseAddr("127.0.0.2")} {
		c, err := dialUDP(src, netip.MustParseAddrPort("127.0.0.1:123"))
		if err != nil {
			t.Fatal(err)
		}
		got := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
		c.Close()
		if want := src; want.IsValid() && got != want || !want.IsValid() && got != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("source %v: the socket is bound to %v", src, got)
		}
	}
}
