package timesync

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/google/go-cmp/cmp"
)

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
