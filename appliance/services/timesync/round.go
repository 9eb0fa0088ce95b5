package timesync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/beevik/ntp"
)

// probe is what a round needs to ask one source, copied under the lock.
type probe struct {
	src   *source
	srv   server
	addrs []netip.AddrPort
	cur   int
}

// answer is the outcome of asking one source once (or twice, see decide).
// Its probe holds the addresses as known after asking.
type answer struct {
	probe
	addr    netip.AddrPort // the address asked; invalid if none was
	queries int
	resp    *ntp.Response
	at      time.Time // the clock's time when the answer was vetted
	err     error
}

func (a *answer) candidate() candidate {
	return candidate{offset: a.resp.ClockOffset, dist: a.resp.RootDistance}
}

// kissError is a kiss-of-death answer (stratum 0): the server refuses to
// serve or asks us to slow down.
type kissError struct{ code string }

func (e *kissError) Error() string { return fmt.Sprintf("kiss of death %q", e.code) }

// verdict is what a round decided.
type verdict struct {
	chosen       *answer // the answer to set the clock from; nil for none
	falsetickers []*source
	reason       string        // why nothing is set
	confirm      bool          // an offset over Panic waits for the next round
	loneWait     time.Duration // a lone answer waits this long for company
	stepped      bool
}

// round asks every due server once, sets the clock if the answers allow
// it, records the outcome and returns the time until the next round.
func (c *Client) round(ctx context.Context) time.Duration {
	c.mu.Lock()
	cfg := c.cfg
	synced := c.Synced()
	now := time.Now()
	var probes []probe
	for _, s := range c.sources {
		if !s.denied && !now.Before(s.next) {
			probes = append(probes, probe{src: s, srv: s.srv, addrs: s.addrs, cur: s.cur})
		}
	}
	c.mu.Unlock()

	answers := make([]answer, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() { answers[i] = c.ask(ctx, cfg, p) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return 0
	}
	v := c.decide(ctx, cfg, synced, answers)
	if v.chosen != nil {
		c.apply(cfg, &v)
	}
	return c.record(cfg, synced, answers, v)
}

// ask resolves the source if it has no addresses yet, asks its current
// address once and vets the answer.
func (c *Client) ask(ctx context.Context, cfg Config, p probe) answer {
	a := answer{probe: p}
	if len(a.addrs) == 0 {
		lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		addrs, err := p.srv.resolve(lctx, cfg.Resolver)
		cancel()
		if err != nil {
			a.err = err
			return a
		}
		a.addrs, a.cur = addrs, 0
	}
	a.cur %= len(a.addrs)
	a.addr = a.addrs[a.cur]
	a.queries = 1
	opt := ntp.QueryOptions{Timeout: cfg.Timeout}
	if _, system := cfg.Clock.(systemClock); !system {
		// The library's kernel receive timestamps read the system clock;
		// any other clock is read by hand.
		opt.GetSystemTime = cfg.Clock.Now
	}
	var stop func() bool
	opt.Dialer = func(string, string) (net.Conn, error) {
		conn, err := c.dial(cfg.Source, a.addr)
		if err == nil {
			stop = context.AfterFunc(ctx, func() { conn.Close() })
		}
		return conn, err
	}
	resp, err := ntp.QueryWithOptions(a.addr.String(), opt)
	if stop != nil {
		stop()
	}
	if err != nil {
		a.err = fmt.Errorf("query %s: %w", a.addr, err)
		return a
	}
	a.resp, a.at = resp, cfg.Clock.Now()
	if err := vet(resp, a.at, cfg); err != nil {
		a.err = fmt.Errorf("%s: %w", a.addr, err)
	}
	return a
}

// vet refuses answers that must not set a clock: kisses of death, servers
// that are not synchronized themselves (stratum 16, leap alarm), the
// library's validity checks (stale reference time, dispersion, time
// before reference time), and times outside [Floor, Floor+Sanity].
func vet(r *ntp.Response, at time.Time, cfg Config) error {
	if r.IsKissOfDeath() {
		return &kissError{code: r.KissCode}
	}
	if r.Stratum >= 16 {
		return fmt.Errorf("stratum %d: the server is not synchronized", r.Stratum)
	}
	if r.Leap == ntp.LeapNotInSync {
		return errors.New("leap indicator 3 (alarm): the server is not synchronized")
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("unusable answer: %w", err)
	}
	t := at.Add(r.ClockOffset)
	if t.Before(cfg.Floor) {
		return fmt.Errorf("answer %s is before the floor %s", t.UTC().Format(time.RFC3339), cfg.Floor.UTC().Format(time.RFC3339))
	}
	if limit := cfg.Floor.Add(cfg.Sanity); t.After(limit) {
		return fmt.Errorf("answer %s is after the sanity limit %s", t.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))
	}
	return nil
}

// decide picks the answer to set the clock from. The clock is never set
// from one unverified answer:
//   - one usable answer is asked for again and used only if the two agree
//     (this catches a stray bad packet). If other servers are configured
//     but silent, lone answers must also keep agreeing for MinInterval, so
//     that servers which come up later (a chronyd starting, a name that
//     resolves later) can outvote a lone falseticker that answered first;
//   - two or more must form a majority group whose correctness intervals
//     intersect (see intersect); outside it are falsetickers. Of the group
//     the answer with the smallest root distance is used;
//   - once synced, an offset over Panic is used only when the next round
//     finds it again.
func (c *Client) decide(ctx context.Context, cfg Config, synced bool, answers []answer) verdict {
	var valid []*answer
	for i := range answers {
		if answers[i].err == nil {
			valid = append(valid, &answers[i])
		}
	}
	if len(valid) != 1 {
		c.lone = nil
	}
	var v verdict
	switch len(valid) {
	case 0:
		return verdict{reason: noAnswer(answers)}
	case 1:
		a := valid[0]
		again := c.ask(ctx, cfg, a.probe)
		a.queries += again.queries
		switch {
		case again.err != nil:
			c.lone = nil
			return verdict{reason: fmt.Sprintf("only %s answered, and asking it again failed: %v", a.srv, again.err)}
		case !agree(a.candidate(), again.candidate()):
			c.lone = nil
			return verdict{reason: fmt.Sprintf("only %s answered, and its two answers disagree (offsets %v and %v)",
				a.srv, a.resp.ClockOffset, again.resp.ClockOffset)}
		case again.resp.RootDistance < a.resp.RootDistance:
			a.resp, a.at = again.resp, again.at
		}
		if len(cfg.Servers) > 1 {
			cand, now := a.candidate(), time.Now()
			if c.lone == nil || !agree(*c.lone, cand) {
				c.loneSince = now
			}
			c.lone = &cand
			if wait := c.loneSince.Add(cfg.MinInterval).Sub(now); wait > 0 {
				return verdict{loneWait: wait, reason: fmt.Sprintf("only %s of %d servers answered: waiting %v for another to agree",
					a.srv, len(cfg.Servers), cfg.MinInterval)}
			}
		}
		c.lone = nil
		v.chosen = a
	default:
		cs := make([]candidate, len(valid))
		for i, a := range valid {
			cs[i] = a.candidate()
		}
		chimers, ok := intersect(cs)
		if !ok {
			return verdict{reason: fmt.Sprintf("no majority agrees: %d usable answers, at most %d agree (%s)",
				len(valid), len(chimers), offsets(valid))}
		}
		for i, a := range valid {
			if !slices.Contains(chimers, i) {
				v.falsetickers = append(v.falsetickers, a.src)
			}
		}
		v.chosen = valid[best(cs, chimers)]
	}
	if off := v.chosen.resp.ClockOffset; synced && off.Abs() > cfg.Panic {
		cand := v.chosen.candidate()
		if c.wild == nil || !agree(*c.wild, cand) {
			c.wild = &cand
			v.reason = fmt.Sprintf("offset %v from %s is over the panic threshold %v: waiting for the next round to confirm it",
				off, v.chosen.srv, cfg.Panic)
			v.chosen, v.confirm = nil, true
			return v
		}
	}
	c.wild = nil
	return v
}

// apply steps or slews the clock by the chosen offset and marks it
// synchronized; on failure it clears v.chosen and says why.
func (c *Client) apply(cfg Config, v *verdict) {
	r := v.chosen.resp
	off := r.ClockOffset
	v.stepped = off.Abs() > cfg.MaxStep
	var err error
	if v.stepped {
		err = cfg.Clock.Step(off)
	} else {
		err = cfg.Clock.Slew(off)
	}
	if err == nil {
		maxErr := r.RootDistance
		if !v.stepped {
			maxErr += off.Abs() // not slewed away yet
		}
		err = cfg.Clock.MarkSynced(maxErr, r.RTT/2)
	}
	if err != nil {
		v.chosen, v.reason = nil, err.Error()
		c.log.Error("timesync: cannot set the clock", "err", err)
	}
}
