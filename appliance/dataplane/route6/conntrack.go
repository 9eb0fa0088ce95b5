package route6

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
)

// Connection states.
const (
	stFree uint8 = iota
	stTCPSynSent
	stTCPEstablished
	stTCPClosing // a FIN seen
	stTCPClosed  // an RST seen
	stUDP
	stICMP
	stOther
)

// Timeouts in seconds (as Linux conntrack's defaults).
var timeouts = [...]uint32{
	stTCPSynSent: 120, stTCPEstablished: 5 * 24 * 3600, stTCPClosing: 120, stTCPClosed: 10,
	stUDP: 30, stICMP: 30, stOther: 600,
}

// Timeouts once a reply was seen, where they differ.
const (
	udpReplied   = 180
	otherReplied = 600
)

// connKey is a connection by its LAN and WAN endpoints (no translation:
// the addresses on the wire). Ports are the ICMPv6 echo identifier and 0
// for echo, 0 for protocols without ports.
type connKey struct {
	lan, wan         [16]byte
	lanPort, wanPort uint16
	proto            uint8
}

// conn is one entry.
type conn struct {
	key      connKey
	state    uint8
	replied  bool // a packet came from the responder
	inbound  bool // opened from the WAN (an allow rule)
	deadline uint32
	packets  [2]uint64 // by side it came from
}

const bucketWays = 4

// bucket is four entries and the lock of their stripe.
type bucket struct {
	mu sync.Mutex
	e  [bucketWays]conn
}

// conntrack is the connection table: a fixed array of buckets, each
// locked on its own, allocated once.
type conntrack struct {
	b    []bucket
	mask uint64
	// used counts the entries not free (expired ones not yet swept
	// included): count and each skip the walk when it is 0.
	used atomic.Int64
}

func newConntrack(max int) *conntrack {
	n := 1
	for n*bucketWays < max {
		n <<= 1
	}
	return &conntrack{b: make([]bucket, n), mask: uint64(n - 1)}
}

func (k *connKey) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * 1099511628211 }
	mix(binary.LittleEndian.Uint64(k.lan[0:]))
	mix(binary.LittleEndian.Uint64(k.lan[8:]))
	mix(binary.LittleEndian.Uint64(k.wan[0:]))
	mix(binary.LittleEndian.Uint64(k.wan[8:]))
	mix(uint64(k.lanPort)<<24 | uint64(k.wanPort)<<8 | uint64(k.proto))
	return h ^ h>>29
}

// verdict is what the table says about a packet.
type verdict uint8

const (
	ctEstablished verdict = iota // of a known connection
	ctNew                        // no entry: a new connection (if allowed)
	ctInvalid                    // no entry and cannot open one (TCP without SYN)
	// ctUnanswered: from the WAN, of a connection opened from the WAN
	// that the LAN has not answered (a scan's, if its host is unknown).
	ctUnanswered
)

// lookup finds the connection of a packet from side with TCP flags
// (0 for other protocols), updates its state and deadline, and says
// whether it is known.
func (t *conntrack) lookup(k *connKey, side Side, tcpFlags uint8, now uint32) verdict {
	b := &t.b[k.hash()&t.mask]
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.e {
		e := &b.e[i]
		if e.state == stFree || e.key != *k {
			continue
		}
		if now >= e.deadline {
			e.state = stFree
			t.used.Add(-1)
			break
		}
		opener := side == LAN
		if e.inbound {
			opener = side == WAN
		}
		if !opener {
			e.replied = true
		}
		e.packets[side]++
		e.advance(k.proto, tcpFlags, now)
		if e.inbound && !e.replied {
			return ctUnanswered
		}
		return ctEstablished
	}
	if k.proto == frame.ProtoTCP && tcpFlags&(frame.TCPSyn|frame.TCPAck|frame.TCPRst|frame.TCPFin) != frame.TCPSyn {
		return ctInvalid
	}
	return ctNew
}

// peek says whether k is a live connection, changing nothing.
func (t *conntrack) peek(k *connKey, now uint32) bool {
	b := &t.b[k.hash()&t.mask]
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.e {
		if e := &b.e[i]; e.state != stFree && e.key == *k && now < e.deadline {
			return true
		}
	}
	return false
}

// advance moves a connection's state on a packet.
func (e *conn) advance(proto, flags uint8, now uint32) {
	switch proto {
	case frame.ProtoTCP:
		switch {
		case flags&frame.TCPRst != 0:
			e.state = stTCPClosed
		case flags&frame.TCPFin != 0:
			e.state = stTCPClosing
		case e.state == stTCPSynSent && e.replied:
			e.state = stTCPEstablished
		case e.state == stTCPClosed && flags&(frame.TCPSyn|frame.TCPAck) == frame.TCPSyn:
			e.state, e.replied = stTCPSynSent, false // reopened
		}
		e.deadline = now + timeouts[e.state]
	case frame.ProtoUDP:
		e.deadline = now + timeouts[stUDP]
		if e.replied {
			e.deadline = now + udpReplied
		}
	default:
		e.deadline = now + timeouts[e.state]
		if e.replied && e.state == stOther {
			e.deadline = now + otherReplied
		}
	}
}

// insert opens a connection for a first packet from side (inbound: from
// the WAN by an allow rule). It takes a free or expired way, else evicts
// the unreplied entry closest to expiry; false means the bucket holds only
// live replied connections (table full).
func (t *conntrack) insert(k *connKey, side Side, inbound bool, now uint32) bool {
	b := &t.b[k.hash()&t.mask]
	b.mu.Lock()
	defer b.mu.Unlock()
	victim := -1
	for i := range b.e {
		e := &b.e[i]
		if e.state == stFree || now >= e.deadline || e.key == *k {
			victim = i
			break
		}
		if !e.replied && (victim < 0 || e.deadline < b.e[victim].deadline) {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	st := stOther
	switch k.proto {
	case frame.ProtoTCP:
		st = stTCPSynSent
	case frame.ProtoUDP:
		st = stUDP
	case frame.ProtoICMPv6:
		st = stICMP
	}
	if b.e[victim].state == stFree {
		t.used.Add(1)
	}
	b.e[victim] = conn{key: *k, state: st, inbound: inbound, deadline: now + timeouts[st]}
	b.e[victim].packets[side] = 1
	return true
}

// sweep frees the expired entries of n buckets from *cursor on.
func (t *conntrack) sweep(cursor *uint64, n int, now uint32) {
	if t.used.Load() == 0 {
		return // a box without IPv6 connections: its NAT worker ticks after every batch
	}
	for range n {
		b := &t.b[*cursor&t.mask]
		*cursor++
		b.mu.Lock()
		for i := range b.e {
			if b.e[i].state != stFree && now >= b.e[i].deadline {
				b.e[i].state = stFree
				t.used.Add(-1)
			}
		}
		b.mu.Unlock()
	}
}

// flushLAN frees the entries whose LAN address is in one of nets and
// returns how many it freed.
func (t *conntrack) flushLAN(nets []netip.Prefix) int {
	if t.used.Load() == 0 || len(nets) == 0 {
		return 0
	}
	n := 0
	for i := range t.b {
		b := &t.b[i]
		b.mu.Lock()
		for j := range b.e {
			if e := &b.e[j]; e.state != stFree && inAny(nets, &e.key.lan) {
				e.state = stFree
				t.used.Add(-1)
				n++
			}
		}
		b.mu.Unlock()
	}
	return n
}

// Conn is a connection as Conns lists it.
type Conn struct {
	LAN, WAN         [16]byte
	LANPort, WANPort uint16
	Proto            uint8
	State            string
	Inbound, Replied bool
	Expires          uint32 // Unix seconds
	Packets          [2]uint64
}

var stateNames = [...]string{"free", "syn_sent", "established", "closing", "closed", "udp", "icmp", "other"}

// count is the number of live connections.
func (t *conntrack) count(now uint32) int {
	if t.used.Load() == 0 {
		return 0 // the dashboard's sample of a box without IPv6 connections
	}
	n := 0
	for i := range t.b {
		b := &t.b[i]
		b.mu.Lock()
		for _, e := range b.e {
			if e.state != stFree && now < e.deadline {
				n++
			}
		}
		b.mu.Unlock()
	}
	return n
}

// connOf is e as Conns lists it.
func connOf(e *conn) Conn {
	return Conn{LAN: e.key.lan, WAN: e.key.wan, LANPort: e.key.lanPort, WANPort: e.key.wanPort,
		Proto: e.key.proto, State: stateNames[e.state], Inbound: e.inbound, Replied: e.replied,
		Expires: e.deadline, Packets: e.packets}
}

// list appends the live connections to out, at most max.
func (t *conntrack) list(out []Conn, max int, now uint32) []Conn {
	t.each(now, func(c *Conn) bool {
		if len(out) >= max {
			return false
		}
		out = append(out, *c)
		return true
	})
	return out
}

// each calls fn with the live connections, bucket by bucket: a bucket's
// entries are copied under its lock and fn runs without it. fn returning
// false stops the walk.
func (t *conntrack) each(now uint32, fn func(*Conn) bool) {
	if t.used.Load() == 0 {
		return
	}
	var buf [bucketWays]Conn
	for i := range t.b {
		b := &t.b[i]
		n := 0
		b.mu.Lock()
		for j := range b.e {
			if e := &b.e[j]; e.state != stFree && now < e.deadline {
				buf[n] = connOf(e)
				n++
			}
		}
		b.mu.Unlock()
		for j := range n {
			if !fn(&buf[j]) {
				return
			}
		}
	}
}
