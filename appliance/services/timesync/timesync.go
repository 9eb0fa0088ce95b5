// Package timesync is the box's NTP client: each round it asks every server, sets the clock from an answer a majority agrees with, and releases waiters once the clock is right.
package timesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Client keeps the clock right. Its methods are safe for concurrent use.
type Client struct {
	log     *slog.Logger
	dial    func(src netip.Addr, dst netip.AddrPort) (net.Conn, error)
	wake    chan struct{}
	synced  chan struct{} // closed at the first sync
	running atomic.Bool

	// Owned by the Run goroutine.
	failedRounds int        // consecutive rounds without a sync, before the first sync
	wild         *candidate // an offset over Panic waiting for confirmation
	lone         *candidate // the only usable answer of several servers
	loneSince    time.Time  // since when lone answers have agreed (monotonic)
	lastReason   string     // the last round's failure, logged once

	mu      sync.Mutex
	cfg     Config // with defaults filled in
	sources []*source
	status  Status // without Servers
	poll    time.Duration
}

// source is one configured server and what the client knows of it.
type source struct {
	srv    server
	addrs  []netip.AddrPort // resolved addresses; nil means resolve next time
	cur    int              // the address asked next
	fails  int              // consecutive failures
	next   time.Time        // not asked before (monotonic)
	denied bool
	st     ServerStatus
}

// New returns a client for cfg; it does nothing until Run.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	log = cmp.Or(log, slog.Default())
	c := &Client{
		log:    log,
		dial:   dialUDP,
		wake:   make(chan struct{}, 1),
		synced: make(chan struct{}),
	}
	if err := c.Update(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func dialUDP(src netip.Addr, ap netip.AddrPort) (net.Conn, error) {
	var local *net.UDPAddr
	if src.IsValid() {
		local = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	return net.DialUDP("udp", local, net.UDPAddrFromAddrPort(ap))
}

// Run keeps the clock until ctx is done, then returns nil. The first round
// starts at once. It fails only if the client is already running.
func (c *Client) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("timesync: Run called on a running client")
	}
	defer c.running.Store(false)
	select {
	case <-c.wake: // the first round asks the servers named so far
	default:
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-c.wake:
		}
		d := c.round(ctx)
		if ctx.Err() != nil {
			return nil
		}
		timer.Reset(d)
	}
}

// Synced reports whether the clock has been set from servers. Once true it
// stays true: the kernel's maxerror, and Status, tell how stale it is.
func (c *Client) Synced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// Wait returns nil once the clock has been set from servers, or ctx's
// error. Whatever needs a correct clock (certificate checks, schedules,
// log time stamps sent off the box) waits here.
func (c *Client) Wait(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the clock: %w", context.Cause(ctx))
	}
}
