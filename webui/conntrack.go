package webui

import (
	"cmp"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ConnQuery selects, sorts and pages connections. Zero fields match
// everything.
type ConnQuery struct {
	// Addr matches connections with any of their addresses in the prefix
	// (a single address is a /32 or /128).
	Addr netip.Prefix
	// Port matches connections with any of their ports equal to it.
	Port  uint16
	Proto string // "tcp", "udp", "icmp", ...
	State string // "established", ...
	Kind  string // "masquerade", "forward", "hairpin"
	Sort  ConnSort
	// Asc sorts ascending; the default is descending (largest first).
	Asc    bool
	Offset int
	Limit  int
}

// ConnSort is a sort key for connections.
type ConnSort string

// Sort keys.
const (
	SortBytes   ConnSort = "bytes"
	SortPackets ConnSort = "packets"
	SortAge     ConnSort = "age" // descending: oldest first
)

// Paging bounds of ParseConnQuery: a page deeper than MaxConnOffset is
// refused, so that answering one keeps a bounded number of entries.
const (
	DefaultConnLimit = 100
	MaxConnLimit     = 1000
	MaxConnOffset    = 100000
)

// ParseConnQuery reads a query from URL parameters: addr, port, proto,
// state, kind, sort (bytes, packets, age), order (asc, desc), offset, limit.
func ParseConnQuery(v url.Values) (ConnQuery, error) {
	q := ConnQuery{Sort: SortBytes, Limit: DefaultConnLimit}
	if a := strings.TrimSpace(v.Get("addr")); a != "" {
		if strings.Contains(a, "/") {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return ConnQuery{}, fmt.Errorf("addr: %w", err)
			}
			q.Addr = p.Masked()
		} else {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return ConnQuery{}, fmt.Errorf("addr: %w", err)
			}
			ip = ip.Unmap()
			q.Addr = netip.PrefixFrom(ip, ip.BitLen())
		}
	}
	if p := strings.TrimSpace(v.Get("port")); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return ConnQuery{}, fmt.Errorf("port: want 1-65535, not %q", p)
		}
		q.Port = uint16(n)
	}
	q.Proto = strings.ToLower(strings.TrimSpace(v.Get("proto")))
	if !validWord(q.Proto) {
		return ConnQuery{}, fmt.Errorf("proto: bad value %q", q.Proto)
	}
	q.State = strings.ToLower(strings.TrimSpace(v.Get("state")))
	if !validWord(q.State) {
		return ConnQuery{}, fmt.Errorf("state: bad value %q", q.State)
	}
	q.Kind = strings.ToLower(strings.TrimSpace(v.Get("kind")))
	if !validWord(q.Kind) {
		return ConnQuery{}, fmt.Errorf("kind: bad value %q", q.Kind)
	}
	switch s := ConnSort(v.Get("sort")); s {
	case "":
	case SortBytes, SortPackets, SortAge:
		q.Sort = s
	default:
		return ConnQuery{}, fmt.Errorf("sort: want bytes, packets or age, not %q", s)
	}
	switch o := v.Get("order"); o {
	case "", "desc":
	case "asc":
		q.Asc = true
	default:
		return ConnQuery{}, fmt.Errorf("order: want asc or desc, not %q", o)
	}
	var err error
	if q.Offset, err = intParam(v, "offset", 0, 0, MaxConnOffset); err != nil {
		return ConnQuery{}, err
	}
	if q.Limit, err = intParam(v, "limit", DefaultConnLimit, 1, MaxConnLimit); err != nil {
		return ConnQuery{}, err
	}
	return q, nil
}

func intParam(v url.Values, name string, def, lo, hi int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: want %d-%d, not %q", name, lo, hi, s)
	}
	return n, nil
}

// validWord accepts "" and short lower-case words like "syn_sent".
func validWord(s string) bool {
	if len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Match reports whether c passes q's filters.
func (q *ConnQuery) Match(c *Conn) bool {
	if q.Proto != "" && !strings.EqualFold(c.Proto, q.Proto) {
		return false
	}
	if q.State != "" && !strings.EqualFold(c.State, q.State) {
		return false
	}
	if q.Kind != "" && !strings.EqualFold(c.Kind, q.Kind) {
		return false
	}
	if q.Addr.IsValid() {
		in := func(ap netip.AddrPort) bool { return ap.IsValid() && q.Addr.Contains(ap.Addr().Unmap()) }
		if !in(c.Src) && !in(c.Dst) && !in(c.NATSrc) && !in(c.NATDst) {
			return false
		}
	}
	if q.Port != 0 {
		has := func(ap netip.AddrPort) bool { return ap.IsValid() && ap.Port() == q.Port }
		if !has(c.Src) && !has(c.Dst) && !has(c.NATSrc) && !has(c.NATDst) {
			return false
		}
	}
	return true
}

// compare orders connections by q's key, largest (or oldest) first unless
// Asc, ties broken by ID (and, for IPv6 ones, by endpoints) so pages do
// not overlap.
func (q *ConnQuery) compare(a, b *Conn) int {
	var c int
	switch q.Sort {
	case SortPackets:
		c = cmp.Compare(b.Packets, a.Packets)
	case SortAge:
		// An unknown age (IPv6) ranks after every known one.
		if az, bz := a.Created.IsZero(), b.Created.IsZero(); az != bz {
			if az {
				return 1
			}
			return -1
		}
		c = a.Created.Compare(b.Created)
	default:
		c = cmp.Compare(b.Bytes, a.Bytes)
	}
	if q.Asc {
		c = -c
	}
	if c == 0 {
		c = cmp.Compare(a.ID, b.ID)
	}
	// IPv6 connections all have ID 0: their endpoints and protocol name
	// them, so that pages still do not overlap.
	if c == 0 && a.ID == 0 {
		c = cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), strings.Compare(a.Proto, b.Proto))
	}
	return c
}

// FilterConns answers a query over a slice of connections (which it does
// not modify): the requested page of the matching entries and their
// number.
func FilterConns(all []Conn, q ConnQuery) ([]Conn, int) {
	sel := NewConnSelector(q)
	for i := range all {
		sel.Add(&all[i])
	}
	return sel.Page()
}

// ConnSelector picks one page of a query's answer from a stream of
// connections, keeping no more than the page and the entries ranked
// before it (Offset+Limit, at most MaxConnOffset+MaxConnLimit): a
// Conntrack implementation pages through a big table with it without
// copying the table.
type ConnSelector struct {
	q     ConnQuery
	k     int
	best  []Conn // a heap with the worst of the best k at [0]
	total int
}

// NewConnSelector returns a selector for q.
func NewConnSelector(q ConnQuery) *ConnSelector {
	k := q.Offset + q.Limit
	if q.Limit <= 0 {
		k = 0
	}
	return &ConnSelector{q: q, k: k, best: make([]Conn, 0, min(k, 1024))}
}

// Add offers c; it is copied if it ranks among the best Offset+Limit.
func (s *ConnSelector) Add(c *Conn) {
	if !s.q.Match(c) {
		return
	}
	s.total++
	switch {
	case s.k == 0:
	case len(s.best) < s.k:
		s.best = append(s.best, *c)
		s.up(len(s.best) - 1)
	case s.q.compare(c, &s.best[0]) < 0:
		s.best[0] = *c
		s.down(0)
	}
}

// Page returns the page in order and the number of matching entries.
func (s *ConnSelector) Page() ([]Conn, int) {
	slices.SortFunc(s.best, func(a, b Conn) int { return s.q.compare(&a, &b) })
	if s.q.Offset >= len(s.best) {
		return []Conn{}, s.total
	}
	return s.best[s.q.Offset:], s.total
}

// worse reports whether best[i] ranks after best[j].
func (s *ConnSelector) worse(i, j int) bool { return s.q.compare(&s.best[i], &s.best[j]) > 0 }

func (s *ConnSelector) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.worse(i, p) {
			return
		}
		s.best[i], s.best[p] = s.best[p], s.best[i]
		i = p
	}
}

func (s *ConnSelector) down(i int) {
	for {
		w, l, r := i, 2*i+1, 2*i+2
		if l < len(s.best) && s.worse(l, w) {
			w = l
		}
		if r < len(s.best) && s.worse(r, w) {
			w = r
		}
		if w == i {
			return
		}
		s.best[i], s.best[w] = s.best[w], s.best[i]
		i = w
	}
}
