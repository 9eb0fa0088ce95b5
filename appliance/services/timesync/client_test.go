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
