package nat

import (
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// counters are one worker's counters: written by the worker only, read
// by Stats from any goroutine.
type counters struct {
	actions        [routing.NumActions]atomic.Uint64
	drops          [NumReasons]atomic.Uint64
	malformed      [frame.NumReasons]atomic.Uint64
	bytesFwd       atomic.Uint64
	newConns       atomic.Uint64
	arpRequests    atomic.Uint64
	arpReplies     atomic.Uint64
	echoReplies    atomic.Uint64
	icmpErrors     atomic.Uint64
	icmpTranslated atomic.Uint64
	resets         atomic.Uint64
	fragments      atomic.Uint64
	fragmentsOut   atomic.Uint64
	flushed        atomic.Uint64
	_              [64]byte
}

func (c *counters) count(r *Result, n int) {
	c.actions[r.Action].Add(1)
	switch r.Action {
	case routing.Drop:
		c.drops[r.Reason].Add(1)
	case routing.Forward:
		c.bytesFwd.Add(uint64(n))
	}
}

// Stats are counters summed over workers (Router.Stats) or of one worker.
type Stats struct {
	// Actions counts Results by Action; Forward also counts queued frames
	// later sent from the outbox.
	Actions [routing.NumActions]uint64
	// Drops counts frames not forwarded, by reason. Frames answered with
	// an ICMP error or RST count here too (ttl_exceeded, too_big,
	// rule_reject), as do queued frames dropped later (neigh_failed).
	Drops [NumReasons]uint64
	// Malformed breaks down ReasonMalformed drops from Handle by parse error.
	Malformed      [frame.NumReasons]uint64
	ForwardedBytes uint64
	NewConns       uint64 // connections created
	ARPRequests    uint64 // ARP requests sent
	ARPReplies     uint64 // ARP replies sent
	EchoReplies    uint64 // echo replies sent
	ICMPErrors     uint64 // ICMP errors sent
	ICMPTranslated uint64 // ICMP errors translated and forwarded
	Resets         uint64 // TCP RSTs sent for reject
	Fragments      uint64 // later fragments forwarded
	FragmentsOut   uint64 // fragments the box made of packets larger than the egress MTU
	Flushed        uint64 // queued frames sent after ARP resolution

	// Router-wide, filled by Router.Stats.
	Conns        int    // live connections
	MaxConns     int    // capacity
	Inserted     uint64 // connections inserted
	Evicted      uint64 // connections evicted to make room
	Expired      uint64 // connections removed after their timeout
	InsertFailed uint64 // inserts that failed (full, clash)
	// Unassured are the live connections not assured yet (what a flood
	// makes), Inbound those of them opened from the WAN; SourceLimited
	// counts new connections refused by a cap (Config.MaxInbound, ...).
	Unassured, Inbound int
	SourceLimited      uint64
}

func (c *counters) addTo(s *Stats) {
	routing.AddCounts(s.Actions[:], c.actions[:])
	routing.AddCounts(s.Drops[:], c.drops[:])
	routing.AddCounts(s.Malformed[:], c.malformed[:])
	s.ForwardedBytes += c.bytesFwd.Load()
	s.NewConns += c.newConns.Load()
	s.ARPRequests += c.arpRequests.Load()
	s.ARPReplies += c.arpReplies.Load()
	s.EchoReplies += c.echoReplies.Load()
	s.ICMPErrors += c.icmpErrors.Load()
	s.ICMPTranslated += c.icmpTranslated.Load()
	s.Resets += c.resets.Load()
	s.Fragments += c.fragments.Load()
	s.FragmentsOut += c.fragmentsOut.Load()
	s.Flushed += c.flushed.Load()
}

// Stats returns the worker's counters. It is safe to call from any goroutine.
func (w *Worker) Stats() Stats {
	var s Stats
	w.c.addTo(&s)
	return s
}

// Stats returns the counters of all workers summed, and the table's.
func (r *Router) Stats() Stats {
	var s Stats
	r.mu.Lock()
	for _, w := range r.workers {
		w.c.addTo(&s)
	}
	r.mu.Unlock()
	r.fast.addTo(&s)
	t := r.ct
	s.Conns = int(t.count.Load())
	s.MaxConns = len(t.entries)
	s.Inserted = t.inserted.Load()
	s.Evicted = t.evicted.Load()
	s.Expired = t.swept.Load()
	s.InsertFailed = t.failed.Load()
	s.Unassured, s.Inbound = int(t.unassured.Load()), int(t.inbound.Load())
	s.SourceLimited = t.limited.Load()
	return s
}
