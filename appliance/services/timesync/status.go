package timesync

import "time"

// Status is what the client last did, for the dashboard.
type Status struct {
	// Synced reports whether the clock has been set from servers.
	Synced bool
	// LastSync is the (corrected) clock's time when it was last set.
	LastSync time.Time
	// Offset is the correction applied then; Stepped says whether the
	// clock was stepped (else slewed).
	Offset  time.Duration
	Stepped bool
	// Server and Address are the server the correction came from and the
	// address asked; Stratum, RTT and RootDistance describe its answer.
	Server       string
	Address      string
	Stratum      uint8
	RTT          time.Duration
	RootDistance time.Duration
	// Poll is the time from the last round to the next.
	Poll time.Duration
	// LastError says why the last round set nothing; empty if it did.
	LastError string
	// Servers is each configured server's state, in Config order.
	Servers []ServerStatus
}

// ServerStatus is one server's state.
type ServerStatus struct {
	Server  string
	Address string // the address last asked
	// LastAnswer is the clock's time of the last usable answer; Offset,
	// RTT and Stratum are that answer's.
	LastAnswer time.Time
	Offset     time.Duration
	RTT        time.Duration
	Stratum    uint8
	// Falseticker: the last usable answer disagreed with the majority.
	Falseticker bool
	// Queries counts queries sent, Errors those that gave no usable
	// answer; LastError is the latest such error, cleared by a good answer.
	Queries   uint64
	Errors    uint64
	LastError string
	// Backoff is how long the server is still skipped after failures.
	Backoff time.Duration
	// Denied: the server sent a DENY or RSTR kiss of death and is no
	// longer asked (until Update names it anew after removing it).
	Denied bool
}

// Status returns what the client last did and each server's state.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	now := time.Now()
	st.Servers = make([]ServerStatus, 0, len(c.sources))
	for _, s := range c.sources {
		ss := s.st
		ss.Denied = s.denied
		ss.Backoff = max(s.next.Sub(now), 0)
		st.Servers = append(st.Servers, ss)
	}
	return st
}
