package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
)

// ErrNotNAT is returned by the connection and neighbour listings for an
// engine in bridge mode (no router).
var ErrNotNAT = errors.New("dataplane: not in NAT mode")

// MaxConnPage bounds the connections one Conns call returns.
const MaxConnPage = 1000

// ConnFilter selects connections; zero fields match everything.
type ConnFilter struct {
	// Proto is "tcp", "udp", "icmp" or an IP protocol number.
	Proto string `json:"proto,omitempty"`
	// Kind is "masquerade", "forward" or "hairpin".
	Kind string `json:"kind,omitempty"`
	// State is a nat.State name: "unreplied", "replied" (non-TCP),
	// "syn_sent", "syn_recv", "established", "fin_wait", "close_wait",
	// "last_ack", "time_wait", "close".
	State string `json:"state,omitempty"`
	// Addr matches any address of either direction, Port any port (or
	// ICMP echo identifier).
	Addr netip.Addr `json:"addr,omitzero"`
	Port uint16     `json:"port,omitempty"`
}

// natFilter compiles f; errors name the field.
func (f *ConnFilter) natFilter() (nat.Filter, error) {
	nf := nat.Filter{Addr: f.Addr, Port: f.Port}
	switch p := strings.ToLower(f.Proto); p {
	case "":
	case "tcp":
		nf.Proto = frame.ProtoTCP
	case "udp":
		nf.Proto = frame.ProtoUDP
	case "icmp":
		nf.Proto = frame.ProtoICMP
	default:
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || n == 0 {
			return nf, fmt.Errorf("proto: %q is not tcp, udp, icmp or a protocol number 1-255", f.Proto)
		}
		nf.Proto = uint8(n)
	}
	if f.Kind != "" {
		found := false
		for _, k := range []nat.Kind{nat.KindMasquerade, nat.KindForward, nat.KindHairpin} {
			if k.String() == f.Kind {
				nf.Kind, found = k, true
			}
		}
		if !found {
			return nf, fmt.Errorf("kind: %q is not masquerade, forward or hairpin", f.Kind)
		}
	}
	if f.State != "" {
		for s := nat.StateUnreplied; s <= nat.StateClose; s++ {
			if s.String() == f.State {
				nf.State, nf.HasState = s, true
			}
		}
		if !nf.HasState {
			return nf, fmt.Errorf("state: %q is not a connection state", f.State)
		}
	}
	if f.Addr.IsValid() {
		nf.Addr = f.Addr.Unmap()
	}
	return nf, nil
}

// Conn is a tracked connection as the API shows it.
type Conn struct {
	// ID names this incarnation of the connection for DeleteConn
	// (a string in JSON: it needs more than 53 bits).
	ID    uint64 `json:"id,string"`
	Proto string `json:"proto"`
	Kind  string `json:"kind"`
	State string `json:"state"`
	// Orig is the original direction as it arrived at the router (from
	// the initiator), Reply the reply direction as it arrives.
	Orig  ConnTuple `json:"orig"`
	Reply ConnTuple `json:"reply"`
	// Packets and Bytes (IP bytes) per direction: [original, reply].
	Packets [2]uint64 `json:"packets"`
	Bytes   [2]uint64 `json:"bytes"`
	Created time.Time `json:"created"`
	// ExpiresIn is the idle time left before the connection expires.
	ExpiresIn Duration `json:"expiresIn"`
}

// ConnTuple is one direction of a connection.
type ConnTuple struct {
	Src netip.AddrPort `json:"src"`
	Dst netip.AddrPort `json:"dst"`
}

// ConnPage is one page of a connection listing.
type ConnPage struct {
	Conns []Conn `json:"conns"`
	// Next is the cursor of the next page, 0 after the last page.
	Next int `json:"next"`
	// Total is how many connections match the filter.
	Total int `json:"total"`
}

// ProtoName names IP protocol p as the connection listings do (Conn.Proto,
// for the NAT table's connections and route6's alike).
func ProtoName(p uint8) string {
	switch p {
	case frame.ProtoTCP:
		return "tcp"
	case frame.ProtoUDP:
		return "udp"
	case frame.ProtoICMP:
		return "icmp"
	case frame.ProtoICMPv6:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

func connOf(c *nat.Conn) Conn {
	return Conn{
		ID: uint64(c.ID), Proto: ProtoName(c.Proto), Kind: c.Kind.String(), State: c.State.String(),
		Orig:    ConnTuple{Src: c.OrigSrc, Dst: c.OrigDst},
		Reply:   ConnTuple{Src: c.ReplySrc, Dst: c.ReplyDst},
		Packets: c.Packets, Bytes: c.Bytes,
		Created:   time.Unix(c.Created, 0).UTC(),
		ExpiresIn: Duration(time.Duration(c.ExpiresIn) * time.Second),
	}
}

// Neighbour is an entry of the router's ARP cache.
type Neighbour struct {
	Side     string     `json:"side"` // "lan" or "wan"
	IP       netip.Addr `json:"ip"`
	MAC      string     `json:"mac,omitempty"` // empty while unresolved
	Resolved bool       `json:"resolved"`
	// Confirmed is when the neighbour last answered (or the entry was made).
	Confirmed time.Time `json:"confirmed"`
}

func neighbourOf(n *nat.Neighbour) Neighbour {
	v := Neighbour{Side: n.Side.String(), IP: netip.AddrFrom4(n.IP), Resolved: n.Resolved,
		Confirmed: time.Unix(0, n.Confirmed).UTC()}
	if n.Resolved {
		v.MAC = net.HardwareAddr(n.MAC[:]).String()
	}
	return v
}

// connChunk is how many connections a listing reads from the table at a time.
const connChunk = 1024

// ListConns lists the live connections of router r matching f, at most limit of them
// (1..MaxConnPage; 0 means MaxConnPage) from table position cursor (0 for
// the first page); ConnPage.Next continues the listing. Paging through a
// changing table neither repeats nor skips a connection that lives
// throughout. Connections past their timeout that the sweep has not
// removed yet are left out, as the router no longer matches them.
func ListConns(r *nat.Router, f ConnFilter, cursor, limit int) (ConnPage, error) {
	return listConnsAt(r, f, cursor, limit, time.Now().UnixNano())
}

// listConnsAt is ListConns at time now (Unix ns).
func listConnsAt(r *nat.Router, f ConnFilter, cursor, limit int, now int64) (ConnPage, error) {
	if r == nil {
		return ConnPage{}, ErrNotNAT
	}
	nf, err := f.natFilter()
	if err != nil {
		return ConnPage{}, fmt.Errorf("dataplane: connection filter: %w", err)
	}
	if limit <= 0 || limit > MaxConnPage {
		limit = MaxConnPage
	}
	page := ConnPage{Conns: []Conn{}}
	buf := make([]nat.Conn, 0, connChunk)
	// Total: every live match, in chunks.
	for c := 0; ; {
		buf, c = r.Conns(nf, c, connChunk, now, buf[:0])
		for i := range buf {
			if buf[i].ExpiresIn > 0 {
				page.Total++
			}
		}
		if c == 0 {
			break
		}
	}
	// The page, from the cursor.
	for c := max(cursor, 0); ; {
		buf, c = r.Conns(nf, c, limit-len(page.Conns), now, buf[:0])
		for i := range buf {
			if buf[i].ExpiresIn > 0 {
				page.Conns = append(page.Conns, connOf(&buf[i]))
			}
		}
		if c == 0 || len(page.Conns) == limit {
			page.Next = c
			break
		}
	}
	return page, nil
}

// EachConn calls fn for every live connection of router r that matches f,
// reading the table in chunks of connChunk: a listing of any size needs
// no copy of the table. fn's Conn is valid only during the call; EachConn
// stops when fn returns false.
func EachConn(r *nat.Router, f ConnFilter, fn func(*Conn) bool) error {
	if r == nil {
		return ErrNotNAT
	}
	nf, err := f.natFilter()
	if err != nil {
		return fmt.Errorf("dataplane: connection filter: %w", err)
	}
	now := time.Now().UnixNano()
	buf := make([]nat.Conn, 0, connChunk)
	var c Conn
	for cursor := 0; ; {
		buf, cursor = r.Conns(nf, cursor, connChunk, now, buf[:0])
		for i := range buf {
			if buf[i].ExpiresIn <= 0 {
				continue
			}
			c = connOf(&buf[i])
			if !fn(&c) {
				return nil
			}
		}
		if cursor == 0 {
			return nil
		}
	}
}

// DeleteConns deletes router r's connections matching f and returns how
// many. (nat.Router.DeleteConn deletes one by its Conn.ID.)
func DeleteConns(r *nat.Router, f ConnFilter) (int, error) {
	if r == nil {
		return 0, ErrNotNAT
	}
	nf, err := f.natFilter()
	if err != nil {
		return 0, fmt.Errorf("dataplane: connection filter: %w", err)
	}
	return r.DeleteConns(nf), nil
}

// Neighbours lists router r's ARP cache.
func Neighbours(r *nat.Router) ([]Neighbour, error) {
	if r == nil {
		return nil, ErrNotNAT
	}
	ns := r.Neighbours()
	out := make([]Neighbour, len(ns))
	for i := range ns {
		out[i] = neighbourOf(&ns[i])
	}
	return out, nil
}
