package wanclient

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"e1kbox/appliance/services/dhcpclient"
)

// Client leases the WAN address. Run drives it; Current, Stats and
// Release may be called from any goroutine.
type Client struct {
	cfg    Config
	log    *slog.Logger
	jitter func() time.Duration
	core   *dhcpclient.Core[*Lease, reply]
}

// Stats is what the client did: packets by DHCP type (Sent: DISCOVER,
// REQUEST, RELEASE; Received: OFFER, ACK, NAK for our client hardware
// address, used or not), dropped frames by reason, the RFC 2131 state
// (init-reboot, init, selecting, requesting, bound, renewing, rebinding;
// stopped outside Run) and the last error.
type Stats = dhcpclient.Stats

// New checks cfg and returns a client; nothing is opened before Run. A
// nil log logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("wanclient: %w", err)
	}
	c := &Client{cfg: cfg, jitter: dhcpclient.Jitter}
	c.core = dhcpclient.NewCore[*Lease, reply]("wanclient", "wan dhcp", cfg.Interface, log, func() (dhcpclient.Transport, int, error) {
		return dhcpclient.OpenIPv4(cfg.Interface, cfg.MAC, clientPort, cfg.VLAN)
	})
	c.log = c.core.Log
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
	if onChange == nil {
		onChange = func(_, _ *Lease) {}
	}
	return c.core.Run(ctx, decodeReply, func(tr dhcpclient.Transport, mtu int) dhcpclient.Machine[reply] {
		return newMachine(c, tr, mtu, onChange)
	})
}

// Release sends a DHCPRELEASE for the current lease, forgets it (Current,
// the lease file) and stops Run, which calls onChange(lease, nil) first.
// Without a running Run it opens a packet socket of its own (in the calling
// thread's network namespace). Without a lease it only stops Run.
func (c *Client) Release(ctx context.Context) error {
	ran, err := c.core.Stop(ctx, func(m dhcpclient.Machine[reply]) error { return m.(*machine).release() })
	if ran {
		return err
	}
	l := c.Current()
	if l == nil {
		return nil
	}
	tr, _, err := c.core.Open()
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
	c.core.SetLease(nil)
	if c.cfg.LeaseFile != "" {
		if err := dhcpclient.RemoveFile(c.cfg.LeaseFile); err != nil {
			c.core.Fail(err)
		}
	}
}

// Current returns a copy of the lease in use, or nil.
func (c *Client) Current() *Lease { return c.core.Current() }

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats { return c.core.Stats() }
