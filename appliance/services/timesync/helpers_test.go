package timesync

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
