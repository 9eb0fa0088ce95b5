package dataplane

import (
	"sync/atomic"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/appliance/dataplane/routing"
)

// FastPathStats are the fast path's state and counters (Snapshot).
type FastPathStats = offload.Stats

// counters are a worker's own counters: plain fields, written by the
// worker only, published to its sharedCounters once per batch.
type counters struct {
	rxPackets, rxBytes     uint64
	flooded, rejectsSent   uint64
	txFlushErrors, batches uint64
	cacheHits, cacheMisses uint64
	drops                  Drops
	txPackets, txBytes     []uint64 // by out port id
}

func (c *counters) init(nports int) {
	c.txPackets = make([]uint64, nports)
	c.txBytes = make([]uint64, nports)
}

// add adds o's counts to c (a restarted port's new worker carries on
// from the stopped ones).
func (c *counters) add(o *counters) {
	c.rxPackets += o.rxPackets
	c.rxBytes += o.rxBytes
	c.flooded += o.flooded
	c.rejectsSent += o.rejectsSent
	c.txFlushErrors += o.txFlushErrors
	c.batches += o.batches
	c.cacheHits += o.cacheHits
	c.cacheMisses += o.cacheMisses
	for i := range c.drops {
		c.drops[i] += o.drops[i]
	}
	for i := range min(len(c.txPackets), len(o.txPackets)) {
		c.txPackets[i] += o.txPackets[i]
		c.txBytes[i] += o.txBytes[i]
	}
}

// sharedCounters is the published copy of a worker's counters, read by
// Snapshot. It sits on its own cache lines: the worker stores to it once
// per batch, readers load.
type sharedCounters struct {
	_                      [64]byte
	rxPackets, rxBytes     atomic.Uint64
	flooded, rejectsSent   atomic.Uint64
	txFlushErrors, batches atomic.Uint64
	cacheHits, cacheMisses atomic.Uint64
	drops                  [NumDrops]atomic.Uint64
	txPackets, txBytes     []atomic.Uint64
	_                      [64]byte
}

func newSharedCounters(nports int) *sharedCounters {
	return &sharedCounters{txPackets: make([]atomic.Uint64, nports), txBytes: make([]atomic.Uint64, nports)}
}

func (s *sharedCounters) publish(c *counters) {
	s.rxPackets.Store(c.rxPackets)
	s.rxBytes.Store(c.rxBytes)
	s.flooded.Store(c.flooded)
	s.rejectsSent.Store(c.rejectsSent)
	s.txFlushErrors.Store(c.txFlushErrors)
	s.batches.Store(c.batches)
	s.cacheHits.Store(c.cacheHits)
	s.cacheMisses.Store(c.cacheMisses)
	for i := range c.drops {
		if v := c.drops[i]; v != 0 {
			s.drops[i].Store(v)
		}
	}
	for i := range c.txPackets {
		s.txPackets[i].Store(c.txPackets[i])
		s.txBytes[i].Store(c.txBytes[i])
	}
}

// Duration is a time.Duration written as text ("1m30s") in the
// dataplane's JSON output.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Snapshot is the dataplane's state and counters at one moment, for the
// API and the dashboard. Counters only grow while the engine runs.
type Snapshot struct {
	Time    time.Time     `json:"time"`
	Uptime  Duration      `json:"uptime"`
	Mode    Mode          `json:"mode"`
	Ports   []PortStats   `json:"ports"`
	Workers []WorkerStats `json:"workers"`
	// Drops sums the drops of all ports by reason.
	// In NAT mode its nat_* reasons are the router's counts (see
	// NATStats), which also count frames the router answered instead of
	// forwarding and queued frames it dropped later.
	Drops Drops        `json:"drops"`
	FDB   bridge.Stats `json:"fdb"`
	Rules RuleStats    `json:"rules"`
	// NAT is the router's state in NAT mode.
	NAT *NATStats `json:"nat,omitempty"`
	// FastPath is the in-kernel fast path's state: its mode, or why it
	// is off. Its frames are in the ports' counters too.
	FastPath *FastPathStats `json:"fastPath,omitempty"`
	// IPv6 is the IPv6 router's state (NAT.IPv6).
	IPv6 *IPv6Stats `json:"ipv6,omitempty"`
}

// NATStats are the router's counters and its connection table's state.
type NATStats struct {
	Conns    int `json:"conns"`    // live connections
	MaxConns int `json:"maxConns"` // the table's capacity
	// NewConns connections were created, Evicted of them removed to make
	// room in a full table (never an established one), Expired removed
	// after their timeout; InsertFailed new connections found no room
	// (table_full) or clashed.
	NewConns     uint64 `json:"newConns"`
	Evicted      uint64 `json:"evicted"`
	Expired      uint64 `json:"expired"`
	InsertFailed uint64 `json:"insertFailed"`
	// Unassured live connections are those not assured yet (no TCP
	// handshake completed, no UDP stream): what a flood makes. Inbound of
	// them were opened from the WAN through a port forward.
	// SourceLimited new connections were refused by a cap on unassured
	// ones (per LAN host, per WAN address, or from the WAN in all).
	Unassured     int    `json:"unassured"`
	Inbound       int    `json:"inbound"`
	SourceLimited uint64 `json:"sourceLimited"`
	// Frames by what the router did with them.
	Forwarded uint64 `json:"forwarded"`
	Replied   uint64 `json:"replied"`
	Queued    uint64 `json:"queued"` // waited for ARP resolution
	Consumed  uint64 `json:"consumed"`
	ToHost    uint64 `json:"toHost"`
	Dropped   uint64 `json:"dropped"`

	ForwardedBytes uint64 `json:"forwardedBytes"`
	ARPRequests    uint64 `json:"arpRequests"`
	ARPReplies     uint64 `json:"arpReplies"`
	EchoReplies    uint64 `json:"echoReplies"`
	ICMPErrors     uint64 `json:"icmpErrors"`     // sent by the router (TTL, MTU, reject)
	ICMPTranslated uint64 `json:"icmpTranslated"` // errors about connections, translated
	Resets         uint64 `json:"resets"`         // TCP RSTs sent for reject rules
	Fragments      uint64 `json:"fragments"`      // later fragments forwarded
	FragmentsOut   uint64 `json:"fragmentsOut"`   // fragments made of packets larger than the egress MTU
	// The router's addresses in force: LAN, WAN (empty while a DHCP
	// client has none), the gateway and the WAN MTU.
	LAN     string `json:"lan"`
	WAN     string `json:"wan"`
	Gateway string `json:"gateway,omitempty"`
	WANMTU  int    `json:"wanMTU"`
}

func natStats(s *nat.Stats) *NATStats {
	return &NATStats{
		Conns: s.Conns, MaxConns: s.MaxConns,
		NewConns: s.NewConns, Evicted: s.Evicted, Expired: s.Expired, InsertFailed: s.InsertFailed,
		Unassured: s.Unassured, Inbound: s.Inbound, SourceLimited: s.SourceLimited,
		Forwarded: s.Actions[routing.Forward], Replied: s.Actions[routing.Reply], Queued: s.Actions[routing.Queued],
		Consumed: s.Actions[routing.Consumed], ToHost: s.Actions[routing.ToHost], Dropped: s.Actions[routing.Drop],
		ForwardedBytes: s.ForwardedBytes, ARPRequests: s.ARPRequests, ARPReplies: s.ARPReplies,
		EchoReplies: s.EchoReplies, ICMPErrors: s.ICMPErrors, ICMPTranslated: s.ICMPTranslated,
		Resets: s.Resets, Fragments: s.Fragments, FragmentsOut: s.FragmentsOut,
	}
}

// addrs fills in the router's addresses from its configuration.
func (n *NATStats) addrs(c *nat.Config) {
	n.LAN = c.LAN.Addr.String()
	if c.WAN.Addr.IsValid() {
		n.WAN = c.WAN.Addr.String()
	}
	if c.Gateway.IsValid() {
		n.Gateway = c.Gateway.String()
	}
	n.WANMTU = c.WAN.MTU
}

// PortStats are one port's counters, summed over its workers (RX side)
// and over the workers that transmit to it (TX side).
type PortStats struct {
	ID        uint16 `json:"id"`
	Name      string `json:"name"`
	Interface string `json:"interface"`
	Kind      string `json:"kind"` // "data" or "host"
	MTU       int    `json:"mtu"`
	LinkUp    bool   `json:"linkUp"`
	Workers   int    `json:"workers"`
	Running   int    `json:"running"` // workers in their loop (not restarting)
	// KernelDrop: the kernel's network stack gets none of the port's
	// received frames (package ingressdrop; data ports only).
	KernelDrop      bool   `json:"kernelDrop"`
	KernelDropError string `json:"kernelDropError,omitempty"` // why it is not in place
	// AfterTCX: the port's rings are bound to EtherTypes and see its
	// frames after tcx ingress, where the fast path forwards its own
	// without a socket filter; false: they tap every frame before it.
	AfterTCX bool `json:"afterTcx"`
	// Blocked: a loop through this port was found and the port forwards
	// nothing until it is gone; LoopWith names the other port of the
	// loop (this one's own name for a loop back to itself). Blocks counts
	// the times it was blocked.
	Blocked  bool   `json:"blocked"`
	LoopWith string `json:"loopWith,omitempty"`
	Blocks   uint64 `json:"blocks"`

	RxPackets uint64 `json:"rxPackets"`
	RxBytes   uint64 `json:"rxBytes"`
	TxPackets uint64 `json:"txPackets"`
	TxBytes   uint64 `json:"txBytes"`
	Flooded   uint64 `json:"flooded"` // frames received here that were flooded
	// Drops are the frames received on the port that were dropped (for
	// a flood, each dropped copy), by reason.
	Drops       Drops     `json:"drops"`
	RejectsSent uint64    `json:"rejectsSent"`
	Ring        RingStats `json:"ring"`
}

// RingStats are the kernel-side counters of a port's sockets: RX of its
// own rings, TX of every socket that transmits on it.
type RingStats struct {
	RxDrops       uint64 `json:"rxDrops"`   // PACKET_STATISTICS tp_drops: ring full
	RxFreezes     uint64 `json:"rxFreezes"` // tp_freeze_q_cnt
	RxTruncated   uint64 `json:"rxTruncated"`
	RxCorrupt     uint64 `json:"rxCorrupt"`
	TxENOBUFS     uint64 `json:"txENOBUFS"`
	TxEAGAIN      uint64 `json:"txEAGAIN"`
	TxStalls      uint64 `json:"txStalls"`
	TxWrongFormat uint64 `json:"txWrongFormat"`
	TxOversize    uint64 `json:"txOversize"`
	TxDropped     uint64 `json:"txDropped"`
	TxErrors      uint64 `json:"txErrors"` // failed flushes (frames kept queued) or host port writes
}

// WorkerStats describe one worker goroutine.
type WorkerStats struct {
	ID       int    `json:"id"`
	Port     string `json:"port"`
	CPU      int    `json:"cpu"` // pinned CPU, -1 if not pinned
	Running  bool   `json:"running"`
	Batches  uint64 `json:"batches"`
	Panics   uint64 `json:"panics"`
	Restarts uint64 `json:"restarts"`
	// LastPanic is the last recovered panic with its stack.
	LastPanic   string `json:"lastPanic,omitempty"`
	CacheHits   uint64 `json:"cacheHits"`
	CacheMisses uint64 `json:"cacheMisses"`
}

// RuleStats summarize the rule table.
type RuleStats struct {
	Generation     uint64 `json:"generation"`
	Rules          int    `json:"rules"`
	RejectsLimited uint64 `json:"rejectsLimited"`
}

// FDBEntry is an FDB entry with its port's name.
type FDBEntry struct {
	bridge.Entry
	PortName string `json:"portName"`
}
