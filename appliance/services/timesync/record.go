package timesync

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// record stores the round's outcome in the sources and the status, and
// returns the time until the next round.
func (c *Client) record(cfg Config, wasSynced bool, answers []answer, v verdict) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	synced := wasSynced || v.chosen != nil
	backoffCap := cfg.MinInterval
	if synced {
		backoffCap = cfg.Interval
	}
	for i := range answers {
		c.recordAnswer(cfg, now, backoffCap, &answers[i], v)
	}
	d := c.nextRound(cfg, now, wasSynced, synced, v)
	c.recordStatus(cfg, wasSynced, v, d)
	return d
}

// recordAnswer stores one source's answer (or its error, with the
// source's backoff) in the source.
func (c *Client) recordAnswer(cfg Config, now time.Time, backoffCap time.Duration, a *answer, v verdict) {
	s := a.src
	if !slices.Contains(c.sources, s) {
		return // removed by Update meanwhile
	}
	s.addrs, s.cur = a.addrs, a.cur
	s.st.Queries += uint64(a.queries)
	if a.addr.IsValid() {
		s.st.Address = a.addr.String()
	}
	if a.err == nil {
		isFalse := slices.Contains(v.falsetickers, s)
		if isFalse && !s.st.Falseticker {
			c.log.Warn("timesync: falseticker", "server", s.srv, "address", a.addr, "offset", a.resp.ClockOffset)
		}
		s.fails, s.next = 0, time.Time{}
		s.st.LastAnswer, s.st.Offset, s.st.RTT, s.st.Stratum = a.at, a.resp.ClockOffset, a.resp.RTT, a.resp.Stratum
		s.st.Falseticker, s.st.LastError = isFalse, ""
		if isFalse {
			s.rotate() // a name may resolve to an honest server next time
		}
		return
	}
	s.st.Errors++
	s.st.LastError = a.err.Error()
	var kiss *kissError
	switch {
	case errors.As(a.err, &kiss) && (kiss.code == "DENY" || kiss.code == "RSTR"):
		s.denied = true
		c.log.Warn("timesync: server refuses service, no longer asking it", "server", s.srv, "address", a.addr, "kiss", kiss.code)
	case errors.As(a.err, &kiss) && kiss.code == "RATE":
		s.next = now.Add(cfg.Interval)
		c.log.Warn("timesync: server asks to slow down", "server", s.srv, "address", a.addr, "backoff", cfg.Interval)
	default:
		s.fails++
		s.next = now.Add(backoff(retryBase(cfg), backoffCap, s.fails))
		s.rotate()
		c.log.Debug("timesync: no usable answer", "server", s.srv, "err", a.err, "backoff", s.next.Sub(now))
	}
}

// nextRound is the time until the next round: the poll interval once
// synced (doubling up to Interval while the clock keeps agreeing), a
// backoff while not, and never before the first source is due.
func (c *Client) nextRound(cfg Config, now time.Time, wasSynced, synced bool, v verdict) time.Duration {
	var d time.Duration
	if v.chosen != nil {
		if !wasSynced || v.stepped {
			c.poll = cfg.MinInterval
		} else {
			c.poll = min(2*c.poll, cfg.Interval)
		}
		d = c.poll
		c.failedRounds = 0
	} else {
		switch {
		case v.confirm:
			d = cfg.MinInterval
		case synced:
			d = c.poll
		default:
			c.failedRounds++
			d = backoff(retryBase(cfg), cfg.MinInterval, c.failedRounds)
		}
		if v.loneWait > 0 {
			d = min(d, v.loneWait)
		}
	}
	// Rounds in which every server is still backing off would ask nobody:
	// wait for the first one due.
	if due, ok := c.firstDue(); ok && due.Sub(now) > d {
		d = due.Sub(now)
	}
	return d
}

// recordStatus stores the round's verdict in the status and logs it.
func (c *Client) recordStatus(cfg Config, wasSynced bool, v verdict, d time.Duration) {
	if a := v.chosen; a != nil {
		r := a.resp
		c.status = Status{
			Synced: true, LastSync: cfg.Clock.Now(), Offset: r.ClockOffset, Stepped: v.stepped,
			Server: a.srv.String(), Address: a.addr.String(), Stratum: r.Stratum, RTT: r.RTT, RootDistance: r.RootDistance,
		}
		c.lastReason = ""
		attrs := []any{"offset", r.ClockOffset, "server", a.srv, "address", a.addr, "stratum", r.Stratum, "rtt", r.RTT, "next", d}
		switch {
		case v.stepped:
			c.log.Info("timesync: clock stepped", attrs...)
		case !wasSynced:
			c.log.Info("timesync: clock slewed", attrs...)
		default:
			c.log.Debug("timesync: clock slewed", attrs...)
		}
		if !wasSynced {
			close(c.synced)
		}
	} else {
		c.status.LastError = v.reason
		if v.reason != c.lastReason {
			c.log.Warn("timesync: clock not set", "reason", v.reason, "next", d)
			c.lastReason = v.reason
		}
	}
	c.status.Poll = d
}

// firstDue returns when the first source that is not denied may be asked
// again; ok is false if all are denied.
func (c *Client) firstDue() (due time.Time, ok bool) {
	for _, s := range c.sources {
		if !s.denied && (!ok || s.next.Before(due)) {
			due, ok = s.next, true
		}
	}
	return due, ok
}

// rotate moves on to the source's next address; past the last one the
// name is resolved again.
func (s *source) rotate() {
	s.cur++
	if s.cur >= len(s.addrs) {
		s.addrs, s.cur = nil, 0
	}
}

// retryBase is the first retry delay: MinInterval/8, at least 1 ms.
func retryBase(cfg Config) time.Duration {
	return max(cfg.MinInterval/8, time.Millisecond)
}

// backoff is the delay after n consecutive failures: base doubled n-1
// times, at most limit.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// noAnswer says why a round had no usable answer.
func noAnswer(answers []answer) string {
	if len(answers) == 0 {
		return "no server to ask: all are backing off or refuse service"
	}
	var errs []string
	for _, a := range answers {
		errs = append(errs, a.err.Error())
	}
	return "no usable answer: " + strings.Join(errs, "; ")
}

// offsets lists the answers' servers and offsets for a log line.
func offsets(as []*answer) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", a.srv, a.resp.ClockOffset)
	}
	return b.String()
}
