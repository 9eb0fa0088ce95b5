package router

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunningRetries: a service whose serve fails (its interface not
// there yet) runs again, and stop ends it whatever it is doing.
func TestRunningRetries(t *testing.T) {
	old := serviceRetry
	serviceRetry = 10 * time.Millisecond
	t.Cleanup(func() { serviceRetry = old })
	var calls atomic.Int32
	var r running[int]
	r.start(1, func(ctx context.Context) error {
		if calls.Add(1) < 3 {
			return errors.New("no interface")
		}
		<-ctx.Done()
		return nil
	}, slog.New(slog.DiscardHandler), "test")
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("serve ran %d times, want 3 (twice failing)", n)
	}
	r.stop()
	if r.on || calls.Load() != 3 {
		t.Errorf("after stop: on %v, %d calls", r.on, calls.Load())
	}
	r.stop() // a second stop is nothing
}
