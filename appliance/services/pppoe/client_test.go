package pppoe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// chanLink carries the client's frames to an AC double on its own
// goroutine, which answers through Client.Input.
type chanLink struct{ out chan []byte }

func (l *chanLink) Send(f []byte) error {
	select {
	case l.out <- f:
		return nil
	default:
		return errors.New("link full")
	}
}

// runAC runs the AC double until ctx ends, taking frames from link and
// commands from do.
func runAC(ctx context.Context, a *acDouble, link *chanLink, c *Client, do chan func(*acDouble)) {
	a.send = c.Input
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-link.out:
			a.input(time.Now(), f)
		case f := <-do:
			f(a)
		case now := <-tk.C:
			a.tick(now)
		}
	}
}

// TestClientRun runs the real loop on the wall clock with an AC double on
// another goroutine: up, Status and Input from other goroutines, an echo
// failure, the reconnect, a reconfigure and the PADT on close.
func TestClientRun(t *testing.T) {
	events := make(chan Event, 100)
	cfg := testConfig()
	cfg.Rand = nil
	cfg.EchoInterval, cfg.EchoFailures, cfg.Backoff = 20*time.Millisecond, 2, 10*time.Millisecond
	cfg.IPv6 = true
	cfg.OnEvent = func(ev Event) { events <- ev }
	link := &chanLink{out: make(chan []byte, 256)}
	c, err := New(link, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ac := newAC("isp", 1)
	ac.ipv6 = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acCtx, acCancel := context.WithCancel(context.Background())
	do := make(chan func(*acDouble))
	var wg sync.WaitGroup
	wg.Go(func() { runAC(acCtx, ac, link, c, do) })
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	// Readers and junk from other goroutines meanwhile (the race detector
	// watches).
	stopNoise := make(chan struct{})
	var noise sync.WaitGroup
	for range 2 {
		noise.Go(func() {
			junk := newDiscovery([6]byte(clientMAC), [6]byte{2, 9, 9, 9, 9, 9}, codePADT, 1).frame()
			for {
				select {
				case <-stopNoise:
					return
				default:
				}
				c.Input(junk)
				_ = c.Status()
				time.Sleep(time.Millisecond)
			}
		})
	}

	waitEvent := func(what string, ok func(Event) bool) Event {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev := <-events:
				if ok(ev) {
					return ev
				}
			case <-deadline:
				t.Fatalf("no %s event; status %+v", what, c.Status())
			}
		}
	}
	// IPCP and IPv6CP each send an Up; the second has both.
	up := waitEvent("up", func(ev Event) bool {
		return ev.Up && ev.Status.PeerLinkLocal.IsValid() && ev.Status.LocalIPv4.IsValid()
	})
	if up.Status.LocalIPv4.String() != "100.64.0.7" || up.Status.DNS1.String() != "9.9.9.9" {
		t.Errorf("up with %+v", up.Status)
	}
	for deadline := time.Now().Add(5 * time.Second); c.Status().EchoRTT == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no echo round trip measured")
		}
	}

	do <- func(a *acDouble) { a.silent = true }
	down := waitEvent("down", func(ev Event) bool { return !ev.Up && ev.Status.LastDownReason != "" })
	if down.Status.LastDownReason != "lcp echo timeout" {
		t.Errorf("down: %q", down.Status.LastDownReason)
	}
	do <- func(a *acDouble) { a.silent, a.session = false, 0 }
	waitEvent("up again", func(ev Event) bool { return ev.Up })
	if st := c.Status(); st.Reconnects < 1 || st.UpSince.IsZero() {
		t.Errorf("after reconnect: %+v", st)
	}

	cfg2 := cfg
	cfg2.IPv6 = false
	if err := c.Reconfigure(ctx, cfg2); err != nil {
		t.Fatal(err)
	}
	waitEvent("down for the new config", func(ev Event) bool { return ev.Status.LastDownReason == "config changed" })
	waitEvent("up with the new config", func(ev Event) bool { return ev.Up })

	close(stopNoise)
	noise.Wait()
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
	if st := c.Status(); st.Phase != PhaseDown || st.LastDownReason != "closed" {
		t.Errorf("after close: phase %v, reason %q", st.Phase, st.LastDownReason)
	}
	// The PADT (and the earlier one for the reconfigure) reach the AC.
	deadline := time.Now().Add(5 * time.Second)
	for {
		padts := make(chan int)
		do <- func(a *acDouble) { padts <- a.padts }
		if n := <-padts; n >= 2 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("AC saw %d PADTs, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	acCancel()
	wg.Wait()
}

func TestNewRefuses(t *testing.T) {
	tests := map[string]func(*Config){
		"no MAC":        func(c *Config) { c.MAC = nil },
		"MRU too large": func(c *Config) { c.MRU = 1508 },
		"MRU too small": func(c *Config) { c.MRU = 100 },
		"long user":     func(c *Config) { c.User = strings.Repeat("u", 256) },
	}
	for name, mod := range tests {
		cfg := testConfig()
		mod(&cfg)
		if _, err := New(&chanLink{}, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
