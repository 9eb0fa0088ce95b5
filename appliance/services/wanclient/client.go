package wanclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Client leases the WAN address. Run drives it; Current, Stats and
// Release may be called from any goroutine.
type Client struct {
	cfg    Config
	log    *slog.Logger
	clock  clock
	open   opener
	jitter func() time.Duration

	mu    sync.Mutex
	lease *Lease
	stats counters
	run   *runCtl // non-nil while Run runs
}

// runCtl lets Release reach a running state machine.
type runCtl struct {
	release chan chan error
	done    chan struct{}
}

// New checks cfg and returns a client; nothing is opened before Run. A
// nil log logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("wanclient: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg:    cfg,
		log:    log.With("iface", cfg.Interface),
		clock:  realClock{},
		jitter: func() time.Duration { return time.Duration(rand.Int64N(int64(2*time.Second)+1)) - time.Second },
		stats:  newCounters(),
	}
	c.open = func() (transport, int, error) { return openPacket(cfg.Interface, cfg.MAC) }
	return c, nil
}

// Run runs the state machine until ctx is done or Release is called; it
// returns nil then, and an error only when the packet socket cannot be
// opened. It opens the socket in the network namespace of the calling
// thread. Run starts with INIT-REBOOT when the lease file holds an
// unexpired lease for cfg.MAC, else with INIT.
//
// onChange (may be nil) is called on Run's goroutine whenever the lease
// starts, ends (new is nil: expiry, NAK, Release) or changes the address,
// gateway, DNS, NTP servers, MTU or domain; old is nil for the first lease
// of this Run. It gets copies and must not call Release. When ctx ends Run
// keeps the lease (Current and the lease file): call Release to give it up.
// Run may be called again after it returned, not twice at once.
func (c *Client) Run(ctx context.Context, onChange func(old, new *Lease)) error {
	ctl := &runCtl{release: make(chan chan error), done: make(chan struct{})}
	c.mu.Lock()
	if c.run != nil {
		c.mu.Unlock()
		return errors.New("wanclient: Run is already running")
	}
	c.run = ctl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.run = nil
		c.stats.state = stateStopped
		c.mu.Unlock()
		close(ctl.done)
	}()

	tr, mtu, err := c.open()
	if err != nil {
		err = fmt.Errorf("wanclient: %w", err)
		c.setError(err)
		return err
	}
	frames := make(chan reply, 32)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.readLoop(tr, frames, stop)
	}()
	defer func() {
		close(stop)
		tr.Close()
		wg.Wait()
	}()
	if onChange == nil {
		onChange = func(_, _ *Lease) {}
	}
	m := newMachine(c, tr, mtu, onChange)
	return m.run(ctx, frames, ctl.release)
}

// readLoop decodes the frames the transport receives and hands the DHCP
// replies to the state machine until stop is closed.
func (c *Client) readLoop(tr transport, out chan<- reply, stop <-chan struct{}) {
	buf := make([]byte, 1<<16)
	pause := time.Second
	for {
		n, csumValid, err := tr.Read(buf)
		if err != nil {
			select {
			case <-stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			c.setError(fmt.Errorf("read: %w", err))
			select {
			case <-stop:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			continue
		}
		pause = time.Second
		r, why := decodeReply(buf[:n], csumValid)
		if why != "" {
			c.ignore(why)
			continue
		}
		select {
		case out <- r:
		case <-stop:
			return
		default:
			c.ignore(dropQueueFull)
		}
	}
}

// Release sends a DHCPRELEASE for the current lease, forgets it (Current,
// the lease file) and stops Run, which calls onChange(lease, nil) first.
// Without a running Run it opens a packet socket of its own (in the calling
// thread's network namespace). Without a lease it only stops Run.
func (c *Client) Release(ctx context.Context) error {
	c.mu.Lock()
	ctl := c.run
	c.mu.Unlock()
	if ctl != nil {
		done := make(chan error, 1)
		select {
		case ctl.release <- done:
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-ctl.done:
			// Run ended meanwhile: release by ourselves.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l := c.Current()
	if l == nil {
		return nil
	}
	tr, _, err := c.open()
	if err != nil {
		return fmt.Errorf("wanclient: release: %w", err)
	}
	defer tr.Close()
	err = sendRelease(c, tr, l)
	c.forget()
	return err
}

// forget drops the lease: Current and the lease file.
func (c *Client) forget() {
	c.setLease(nil)
	if c.cfg.LeaseFile != "" {
		if err := removeLease(c.cfg.LeaseFile); err != nil {
			c.setError(err)
		}
	}
}

// Current returns a copy of the lease in use, or nil.
func (c *Client) Current() *Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease.Clone()
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.snapshot()
}

func (c *Client) setLease(l *Lease) {
	c.mu.Lock()
	c.lease = l.Clone()
	c.mu.Unlock()
}

func (c *Client) setState(s state) {
	c.mu.Lock()
	c.stats.state = s
	c.mu.Unlock()
}

func (c *Client) setError(err error) {
	c.log.Warn("wan dhcp", "err", err)
	c.mu.Lock()
	c.stats.lastError = err.Error()
	c.stats.lastErrorAt = c.clock.Now()
	c.mu.Unlock()
}

func (c *Client) ignore(why string) {
	c.mu.Lock()
	c.stats.ignored[why]++
	c.mu.Unlock()
}

func (c *Client) countSent(t string) {
	c.mu.Lock()
	c.stats.sent[t]++
	c.mu.Unlock()
}

func (c *Client) countReceived(t string) {
	c.mu.Lock()
	c.stats.received[t]++
	c.mu.Unlock()
}
