package wanclient

import (
	"maps"
	"time"
)

// Stats is what the client did: packets by type, dropped frames by
// reason, its state and its last error.
type Stats struct {
	// State is the RFC 2131 state: init-reboot, init, selecting,
	// requesting, bound, renewing, rebinding; stopped outside Run.
	State string
	// Sent counts the messages sent by DHCP type (DISCOVER, REQUEST,
	// RELEASE).
	Sent map[string]uint64
	// Received counts the replies for our client hardware address by DHCP
	// type (OFFER, ACK, NAK), used or not.
	Received map[string]uint64
	// Ignored counts the frames that were not used, by reason (malformed,
	// for another host or client, another exchange, unexpected).
	Ignored map[string]uint64
	// LastError is the last failure (a send, the socket, the lease file),
	// empty when there was none; LastErrorAt is when it happened.
	LastError   string
	LastErrorAt time.Time
}

// counters is Stats as the client keeps it, under Client.mu.
type counters struct {
	state       state
	sent        map[string]uint64
	received    map[string]uint64
	ignored     map[string]uint64
	lastError   string
	lastErrorAt time.Time
}

func newCounters() counters {
	return counters{sent: map[string]uint64{}, received: map[string]uint64{}, ignored: map[string]uint64{}}
}

func (c *counters) snapshot() Stats {
	return Stats{
		State:       c.state.String(),
		Sent:        maps.Clone(c.sent),
		Received:    maps.Clone(c.received),
		Ignored:     maps.Clone(c.ignored),
		LastError:   c.lastError,
		LastErrorAt: c.lastErrorAt,
	}
}
