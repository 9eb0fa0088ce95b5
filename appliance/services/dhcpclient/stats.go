package dhcpclient

import (
	"maps"
	"time"
)

// StateStopped is Stats.State outside Run.
const StateStopped = "stopped"

// Stats is what a client did: messages by type, dropped frames by reason,
// its state and its last error.
type Stats struct {
	// State is the protocol's state (the client's doc names them);
	// stopped outside Run.
	State string
	// Sent counts the messages sent by type, retransmissions included.
	Sent map[string]uint64
	// Received counts the replies for this client by type, used or not.
	Received map[string]uint64
	// Ignored counts the frames that were not used, by reason (malformed,
	// for another host or client, another exchange, unexpected).
	Ignored map[string]uint64
	// LastError is the last failure (a send, the socket, the lease file),
	// empty when there was none; LastErrorAt is when it happened.
	LastError   string
	LastErrorAt time.Time
}

// counters is Stats as Core keeps it, under Core.mu.
type counters struct {
	state                   string
	sent, received, ignored map[string]uint64
	lastError               string
	lastErrorAt             time.Time
}

func newCounters() counters {
	return counters{state: StateStopped, sent: map[string]uint64{}, received: map[string]uint64{}, ignored: map[string]uint64{}}
}

func (c *counters) snapshot() Stats {
	return Stats{
		State: c.state, Sent: maps.Clone(c.sent), Received: maps.Clone(c.received),
		Ignored: maps.Clone(c.ignored), LastError: c.lastError, LastErrorAt: c.lastErrorAt,
	}
}

// Stats returns a snapshot of the counters.
func (c *Core[L, F]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.snapshot()
}

// SetState records the machine's state for Stats.
func (c *Core[L, F]) SetState(s string) {
	c.mu.Lock()
	c.stats.state = s
	c.mu.Unlock()
}

// Fail logs err and records it as the last error.
func (c *Core[L, F]) Fail(err error) {
	c.Log.Warn(c.topic, "err", err)
	c.mu.Lock()
	c.stats.lastError = err.Error()
	c.stats.lastErrorAt = c.Clock.Now()
	c.mu.Unlock()
}

// Ignore counts a frame that was not used, by reason.
func (c *Core[L, F]) Ignore(why string) { c.count(c.stats.ignored, why) }

// CountSent counts a message sent, by type.
func (c *Core[L, F]) CountSent(typ string) { c.count(c.stats.sent, typ) }

// CountReceived counts a reply for this client, by type.
func (c *Core[L, F]) CountReceived(typ string) { c.count(c.stats.received, typ) }

func (c *Core[L, F]) count(m map[string]uint64, key string) {
	c.mu.Lock()
	m[key]++
	c.mu.Unlock()
}
