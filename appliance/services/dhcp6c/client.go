package dhcp6c

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Client holds the WAN's DHCPv6 bindings. Run drives it; Current, Stats
// and DUID may be called from any goroutine.
type Client struct {
	cfg   Config
	log   *slog.Logger
	clock clock
	open  opener
	rand  func() float64 // in [-1, 1): the RAND of RFC 8415 section 15
	duid  dhcpv6.DUID
	ll    netip.Addr

	mu       sync.Mutex
	lease    *Lease
	stats    counters
	run      bool
	declines []netip.Addr  // for the machine to decline (Decline)
	wake     chan struct{} // Decline's signal to the machine
}

// New checks cfg, reads (or makes and keeps) the DUID and returns a
// client; nothing is opened before Run. A nil log logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("dhcp6c: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg: cfg, log: log.With("iface", cfg.Interface), clock: realClock{},
		rand:  func() float64 { return 2*rand.Float64() - 1 },
		ll:    LinkLocal(cfg.MAC),
		stats: newCounters(),
		wake:  make(chan struct{}, 1),
	}
	d, err := loadDUID(cfg.StateDir, cfg.MAC, time.Now())
	if err != nil {
		return nil, fmt.Errorf("dhcp6c: %w", err)
	}
	c.duid = d
	c.open = func() (transport, int, error) { return openPacket(cfg.Interface, cfg.MAC) }
	return c, nil
}

// DUID is the client's DUID as sent in the Client Identifier option.
func (c *Client) DUID() []byte { return c.duid.ToBytes() }

// LinkLocal is the client's source address.
func (c *Client) LinkLocal() netip.Addr { return c.ll }

// Run runs the state machine until ctx is done; it returns nil then, and
// an error only when the packet socket cannot be opened. It opens the
// socket in the network namespace of the calling thread.
//
// onChange (may be nil) is called on Run's goroutine whenever the bound
// prefixes, addresses, DNS servers or domains change, the binding starts
// (old is nil) or ends (new is nil: every lifetime over). It gets copies.
// A renewal that changes only lifetimes does not call it. When ctx ends
// Run keeps the lease (Current and the state file). Run may be called
// again after it returned, not twice at once.
func (c *Client) Run(ctx context.Context, onChange func(old, new *Lease)) error {
	c.mu.Lock()
	if c.run {
		c.mu.Unlock()
		return errors.New("dhcp6c: Run is already running")
	}
	c.run = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.run = false
		c.stats.state = stateStopped
		c.mu.Unlock()
	}()
	tr, _, err := c.open()
	if err != nil {
		err = fmt.Errorf("dhcp6c: %w", err)
		c.setError(err)
		return err
	}
	frames := make(chan received, 32)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.readLoop(tr, frames, stop) })
	defer func() {
		close(stop)
		tr.Close()
		wg.Wait()
	}()
	if onChange == nil {
		onChange = func(_, _ *Lease) {}
	}
	return newMachine(c, tr, onChange).run(ctx, frames)
}

// readLoop checks the frames the transport receives and hands their
// payloads (copied) to the state machine until stop is closed.
func (c *Client) readLoop(tr transport, out chan<- received, stop <-chan struct{}) {
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
		r, why := decodeFrame(buf[:n], c.cfg.MAC, c.ll, csumValid)
		if why != "" {
			c.ignore(why)
			continue
		}
		r.SrcMAC = append(net.HardwareAddr(nil), r.SrcMAC...)
		r.Payload = append([]byte(nil), r.Payload...)
		select {
		case out <- r:
		case <-stop:
			return
		default:
			c.ignore(dropQueueFull)
		}
	}
}

// Decline says that addr, an address of the lease, is another node's
// (duplicate address detection found it): the client stops using it at
// once (onChange gets the lease without it), tells the server with a
// Decline (RFC 8415 18.2.8; once bound, when it is in another exchange)
// and takes it from no Reply until that Decline is answered or given up.
// It does not block; an address not in the lease is ignored.
func (c *Client) Decline(addr netip.Addr) {
	c.mu.Lock()
	c.declines = append(c.declines, addr)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// takeDeclines returns the addresses Decline named since the last call.
func (c *Client) takeDeclines() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.declines
	c.declines = nil
	return d
}

// Current returns a copy of the bound lease, or nil.
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
	c.log.Warn("wan dhcpv6", "err", err)
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

func (c *Client) count(m map[string]uint64, t dhcpv6.MessageType) {
	c.mu.Lock()
	m[t.String()]++
	c.mu.Unlock()
}
