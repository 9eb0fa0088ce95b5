package dhcp6c

import (
	"maps"
	"time"
)

// Stats is what the client did: messages by type, dropped frames by
// reason, its state and its last error.
type Stats struct {
	// State is soliciting, requesting, bound, renewing, rebinding,
	// declining, or stopped outside Run.
	State string
	// Sent counts the messages sent by type (SOLICIT, REQUEST, RENEW,
	// REBIND, DECLINE), retransmissions included.
	Sent map[string]uint64
	// Received counts the messages for our client ID by type (ADVERTISE,
	// REPLY), used or not.
	Received map[string]uint64
	// Ignored counts the frames that were not used, by reason.
	Ignored map[string]uint64
	// LastError is the last failure (a send, the socket, the state
	// files), empty when there was none; LastErrorAt is when it happened.
	LastError   string
	LastErrorAt time.Time
}

// state is the client's state in RFC 8415's exchanges.
type state int

const (
	stateStopped state = iota
	stateSoliciting
	stateRequesting
	stateBound
	stateRenewing
	stateRebinding
	stateDeclining
)

var stateNames = [...]string{"stopped", "soliciting", "requesting", "bound", "renewing", "rebinding", "declining"}

func (s state) String() string { return stateNames[s] }

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
		State: c.state.String(), Sent: maps.Clone(c.sent), Received: maps.Clone(c.received),
		Ignored: maps.Clone(c.ignored), LastError: c.lastError, LastErrorAt: c.lastErrorAt,
	}
}
