package pppoe

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Link carries the client's frames: whole Ethernet frames without a VLAN
// tag (the caller tags and untags them).
type Link interface {
	Send(frame []byte) error
}

// inputQueue bounds the frames waiting for Run; more are dropped.
const inputQueue = 64

// Client is a PPPoE client. New makes it, Run runs it; Input, Status and
// Reconfigure may be called from any goroutine.
type Client struct {
	link  Link
	clock Clock
	in    chan []byte
	ctl   chan func(*engine)

	mu     sync.Mutex
	status Status
	drops  uint64

	e *engine // owned by Run
}

// New makes a client sending on link.
func New(link Link, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{link: link, clock: cfg.Clock, in: make(chan []byte, inputQueue), ctl: make(chan func(*engine))}
	c.e = newEngine(cfg, c.send)
	return c, nil
}

func (c *Client) send(frame []byte) {
	if err := c.link.Send(frame); err != nil {
		c.e.log.Warn("pppoe: send", "err", err)
	}
}

// Input hands the client a received PPPoE frame (EtherType 0x8863 or
// 0x8864, untagged). It copies the frame and never blocks: with the queue
// full the frame is dropped and counted.
func (c *Client) Input(frame []byte) {
	if len(frame) > maxFrame {
		c.countDrop()
		return
	}
	select {
	case c.in <- append([]byte(nil), frame...):
	default:
		c.countDrop()
	}
}

func (c *Client) countDrop() {
	c.mu.Lock()
	c.drops++
	c.status.InputDrops = c.drops
	c.mu.Unlock()
}

// Status is the client's current state.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.ACMAC = append(s.ACMAC[:0:0], s.ACMAC...)
	return s
}

// Reconfigure ends the session (PADT) and starts over with cfg; it returns
// once Run has taken the config, or with ctx's error.
func (c *Client) Reconfigure(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	f := func(e *engine) {
		defer close(done)
		e.shutdown(c.clock.Now(), "config changed")
		e.cfg, e.log = cfg, cfg.Log
		copy(e.mac[:], cfg.MAC)
		e.backoff, e.authBackoff = cfg.Backoff, cfg.AuthBackoff
		e.stopped = false
		e.start(c.clock.Now())
	}
	select {
	case c.ctl <- f:
	case <-ctx.Done():
		return fmt.Errorf("pppoe: reconfigure: %w", ctx.Err())
	}
	<-done
	return nil
}

// Run runs the client until ctx ends; then it sends the AC a
// Terminate-Request and a PADT and returns.
func (c *Client) Run(ctx context.Context) error {
	e := c.e
	e.start(c.clock.Now())
	c.publish()
	for {
		var fire <-chan time.Time
		stop := func() {}
		if w := e.wake(); !w.IsZero() {
			fire, stop = c.clock.Timer(w)
		}
		select {
		case <-ctx.Done():
			stop()
			e.shutdown(c.clock.Now(), "closed")
			c.publish()
			return nil
		case f := <-c.in:
			e.input(c.clock.Now(), f)
		case f := <-c.ctl:
			f(e)
		case <-fire:
			e.tick(c.clock.Now())
		}
		stop()
		c.publish()
	}
}

// publish copies the engine's status for Status and delivers its events.
func (c *Client) publish() {
	s := c.e.status()
	c.mu.Lock()
	s.InputDrops = c.drops
	c.status = s
	c.mu.Unlock()
	if on := c.e.cfg.OnEvent; on != nil {
		for _, ev := range c.e.takeEvents() {
			ev.Status.InputDrops = s.InputDrops
			on(ev)
		}
	} else {
		c.e.takeEvents()
	}
}
