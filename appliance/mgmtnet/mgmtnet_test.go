package mgmtnet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func TestWatcher(t *testing.T) {
	restored := Repair{Restored: []netip.Prefix{netip.MustParsePrefix("10.0.2.0/24")}}
	for _, tc := range []struct {
		name        string
		checks      []Repair
		err         error
		wantReapply int
	}{
		{"routes there", []Repair{{}, {}, {}}, nil, 0},
		{"subnet route lost with the default", []Repair{restored, {}, {}}, nil, 1},
		{"subnet route lost, default kept", []Repair{{Restored: restored.Restored, Default: true}, {}}, nil, 0},
		{"port gone", nil, errors.New("eth0: Link not found"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n, reapplied := 0, 0
			var others []string // links checked that are not eth0
			done := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() {
				cancel()
				select { // bounded: a Run that ignores its context fails below
				case <-done:
				case <-time.After(10 * time.Second):
				}
			})
			w := &Watcher{
				Links: func() []string { return []string{"eth0"} },
				Check: func(name string) (Repair, error) {
					mu.Lock()
					defer mu.Unlock()
					if name != "eth0" {
						others = append(others, name)
					}
					n++
					if n > 3 {
						cancel()
					}
					if tc.err != nil || n > len(tc.checks) {
						return Repair{}, tc.err
					}
					return tc.checks[n-1], nil
				},
				Reapply:  func(context.Context) error { mu.Lock(); reapplied++; mu.Unlock(); return nil },
				Interval: time.Millisecond,
				Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			go func() { w.Run(ctx); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not end with its context")
			}
			if len(others) != 0 {
				t.Errorf("checked %q", others)
			}
			if reapplied != tc.wantReapply {
				t.Errorf("lease applied again %d times, want %d", reapplied, tc.wantReapply)
			}
		})
	}
}
