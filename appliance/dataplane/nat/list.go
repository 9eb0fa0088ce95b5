package nat

import (
	"net/netip"

	"e1kbox/appliance/dataplane/frame"
)

// State is a connection's state as listed.
type State uint8

// The states. Non-TCP connections are Unreplied until a reply is seen.
const (
	StateUnreplied State = iota
	StateReplied
	StateSynSent
	StateSynRecv
	StateEstablished
	StateFinWait
	StateCloseWait
	StateLastAck
	StateTimeWait
	StateClose
)

var stateNames = [...]string{"unreplied", "replied", "syn_sent", "syn_recv", "established", "fin_wait",
	"close_wait", "last_ack", "time_wait", "close"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

func stateOf(proto uint8, st uint32) State {
	if proto == frame.ProtoTCP && st&stateMask != 0 {
		return StateSynSent + State(st&stateMask-stSynSent)
	}
	if st&flagReplied != 0 {
		return StateReplied
	}
	return StateUnreplied
}

// Kind is how a connection is translated.
type Kind uint8

// The kinds.
const (
	KindMasquerade Kind = Kind(kindSNAT)    // LAN host to the WAN
	KindForward    Kind = Kind(kindDNAT)    // WAN to a LAN host through a port forward
	KindHairpin    Kind = Kind(kindHairpin) // LAN host to a port forward on the WAN address
)

func (k Kind) String() string {
	switch k {
	case KindMasquerade:
		return "masquerade"
	case KindForward:
		return "forward"
	case KindHairpin:
		return "hairpin"
	}
	return "unknown"
}

// ConnID names a connection incarnation: deleting by a stale ID does
// nothing.
type ConnID uint64

// Conn is a connection as listed. Orig is the original direction as it
// arrived (from the initiator), Reply the reply direction as it arrives;
// for ICMP echo the port of the pinging side is the identifier.
type Conn struct {
	ID        ConnID
	Proto     uint8
	Kind      Kind
	State     State
	OrigSrc   netip.AddrPort
	OrigDst   netip.AddrPort
	ReplySrc  netip.AddrPort
	ReplyDst  netip.AddrPort
	Packets   [2]uint64 // [0] original direction, [1] reply direction
	Bytes     [2]uint64 // IP bytes
	Created   int64     // Unix seconds
	ExpiresIn int64     // seconds from the listing's now
}

// Filter selects connections; zero fields match everything.
type Filter struct {
	Proto    uint8
	Kind     Kind
	State    State // matched when HasState
	HasState bool
	// Addr matches any of the four addresses, Port any of the four ports.
	Addr netip.Addr
	Port uint16
}

func (f *Filter) match(c *Conn) bool {
	if f.Proto != 0 && c.Proto != f.Proto || f.Kind != 0 && c.Kind != f.Kind || f.HasState && c.State != f.State {
		return false
	}
	if f.Addr.IsValid() && c.OrigSrc.Addr() != f.Addr && c.OrigDst.Addr() != f.Addr &&
		c.ReplySrc.Addr() != f.Addr && c.ReplyDst.Addr() != f.Addr {
		return false
	}
	if f.Port != 0 && c.OrigSrc.Port() != f.Port && c.OrigDst.Port() != f.Port &&
		c.ReplySrc.Port() != f.Port && c.ReplyDst.Port() != f.Port {
		return false
	}
	return true
}

func srcOf(k key) netip.AddrPort { return netip.AddrPortFrom(addrOf(k.src()), k.sport()) }
func dstOf(k key) netip.AddrPort { return netip.AddrPortFrom(addrOf(k.dst()), k.dport()) }

// read copies live entry idx into c.
func (r *Router) read(idx uint32, now int64, c *Conn) bool {
	t := r.ct
	e, cold := &t.entries[idx], &t.cold[idx]
	g := cold.gen.Load()
	s0, s1, ok := t.lockEntry(idx, g)
	if !ok {
		return false
	}
	k, kind, created := e.keys, cold.kind, cold.created
	st, dl := e.state.Load(), e.deadline.Load()
	pkts, bytes := e.packets(cold), e.byteCounts(cold)
	t.unlock2(s0, s1)
	*c = Conn{
		ID: ConnID(uint64(idx)<<32 | uint64(g)), Proto: k[0].proto(), Kind: Kind(kind), State: stateOf(k[0].proto(), st),
		OrigSrc: srcOf(k[0]), OrigDst: dstOf(k[0]), ReplySrc: srcOf(k[1]), ReplyDst: dstOf(k[1]),
		Packets: pkts, Bytes: bytes,
		Created: int64(created), ExpiresIn: int64(int32(dl - uint32(now/1e9))),
	}
	return true
}

// Conns appends to dst up to limit connections matching f, starting at
// table position cursor (0 for the first page), and returns them with the
// cursor of the next page, which is 0 after the last. Pages follow table
// positions, so paging through a changing table neither repeats nor
// skips a connection that lives throughout. now (Unix ns) dates ExpiresIn.
func (r *Router) Conns(f Filter, cursor, limit int, now int64, dst []Conn) ([]Conn, int) {
	n := len(r.ct.entries)
	var c Conn
	for i := max(cursor, 0); i < n; i++ {
		if limit > 0 && len(dst) >= limit {
			return dst, i
		}
		if r.read(uint32(i), now, &c) && f.match(&c) {
			dst = append(dst, c)
		}
	}
	return dst, 0
}

// CountConns returns how many connections match f.
func (r *Router) CountConns(f Filter) int {
	if f == (Filter{}) {
		return int(r.ct.count.Load())
	}
	n := 0
	var c Conn
	for i := range r.ct.entries {
		if r.read(uint32(i), 0, &c) && f.match(&c) {
			n++
		}
	}
	return n
}

// DeleteConn deletes the connection id; false when it no longer exists.
func (r *Router) DeleteConn(id ConnID) bool {
	idx := uint32(id >> 32)
	if int(idx) >= len(r.ct.entries) {
		return false
	}
	return r.ct.remove(idx, uint32(id), rmAny, 0)
}

// DeleteConns deletes the connections matching f and returns how many.
func (r *Router) DeleteConns(f Filter) int {
	n := 0
	var c Conn
	for i := range r.ct.entries {
		if r.read(uint32(i), 0, &c) && f.match(&c) && r.DeleteConn(c.ID) {
			n++
		}
	}
	return n
}
