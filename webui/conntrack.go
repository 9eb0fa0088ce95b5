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

// Paging bounds of ParseConnQuery.
const (
	DefaultConnLimit = 100
	MaxConnLimit     = 1000
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
	if q.Offset, err = intParam(v, "offset", 0, 0, 1<<30); err != nil {
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
// Asc, ties broken by ID so pages do not overlap.
func (q *ConnQuery) compare(a, b *Conn) int {
	var c int
	switch q.Sort {
	case SortPackets:
		c = cmp.Compare(b.Packets, a.Packets)
	case SortAge:
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
	return c
}

// FilterConns answers a query over a slice of connections (which it does
// not modify): the requested page of the matching entries and their
// number. A Conntrack implementation can snapshot its table and call it.
// Early pages cost one pass (a bounded top list); deep pages a sort.
func FilterConns(all []Conn, q ConnQuery) ([]Conn, int) {
	k := q.Offset + q.Limit
	if q.Limit <= 0 {
		k = 0
	}
	var top []*Conn // the best k so far, in order, while k is small
	var match []*Conn
	small := k <= topListMax
	if small {
		top = make([]*Conn, 0, k)
	} else {
		match = make([]*Conn, 0, len(all))
	}
	total := 0
	for i := range all {
		c := &all[i]
		if !q.Match(c) {
			continue
		}
		total++
		if !small {
			match = append(match, c)
			continue
		}
		if k == 0 || (len(top) == k && q.compare(c, top[k-1]) >= 0) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, c, q.compare)
		if len(top) < k {
			top = append(top, nil)
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = c
	}
	if !small {
		slices.SortFunc(match, q.compare)
		top = match[:min(k, len(match))]
	}
	if q.Offset >= len(top) {
		return []Conn{}, total
	}
	page := make([]Conn, 0, len(top)-q.Offset)
	for _, c := range top[q.Offset:] {
		page = append(page, *c)
	}
	return page, total
}

// topListMax bounds the pages FilterConns answers with a top list.
const topListMax = 2000
