package dashboard

import (
	"net/netip"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/webui"
)

// The connection listing: the NAT table's and the IPv6 router's.

// Query lists connections for the web UI: the router's table, then the
// IPv6 router's, streamed in chunks through a selector that keeps only
// the page and the entries ranked before it, never a copy of a table.
func (v *Box) Query(q webui.ConnQuery) ([]webui.Conn, int) {
	e := v.engine()
	if e == nil {
		return nil, 0
	}
	e.SyncFastPath() // the counters and deadlines of what the fast path forwarded
	sel := webui.NewConnSelector(q)
	now := time.Now()
	eachV6Conn(e.IPv6(), &q, sel, now)
	if !wantsV4(&q) {
		return sel.Page()
	}
	var wc webui.Conn
	err := dataplane.EachConn(e.NAT(), connFilter(q), func(c *dataplane.Conn) bool {
		wc = webui.Conn{ID: c.ID, Proto: c.Proto, State: c.State, Kind: c.Kind, Src: c.Orig.Src, Dst: c.Orig.Dst,
			Packets: c.Packets[0] + c.Packets[1], Bytes: c.Bytes[0] + c.Bytes[1], Created: c.Created,
			Expires: now.Add(time.Duration(c.ExpiresIn))}
		if c.Reply.Dst != c.Orig.Src {
			wc.NATSrc = c.Reply.Dst
		}
		if c.Reply.Src != c.Orig.Dst {
			wc.NATDst = c.Reply.Src
		}
		sel.Add(&wc)
		return true
	})
	if err != nil {
		return nil, 0
	}
	return sel.Page()
}

// Delete deletes a NAT connection; IPv6 ones (ID 0) are not deleted.
func (v *Box) Delete(id uint64) error {
	e := v.engine()
	if e == nil || id == 0 {
		return webui.ErrNotFound
	}
	if e.NAT() == nil || !e.NAT().DeleteConn(nat.ConnID(id)) {
		return webui.ErrNotFound
	}
	e.SyncFastPath() // the deleted connection's flows leave the kernel
	return nil
}

// connFilter is the part of a web UI query the router's listing filters
// by itself: the rest (address prefixes, sort, paging) is FilterConns'.
func connFilter(q webui.ConnQuery) dataplane.ConnFilter {
	f := dataplane.ConnFilter{Proto: q.Proto, State: q.State, Kind: q.Kind, Port: q.Port}
	if q.Addr.IsValid() && q.Addr.IsSingleIP() {
		f.Addr = q.Addr.Addr()
	}
	return f
}

// DeleteMatching deletes the connections matching q: in the router's
// table directly, or (for an address prefix) by the IDs a listing finds.
// IPv6 connections are not deleted: a query only they match deletes none.
func (v *Box) DeleteMatching(q webui.ConnQuery) (int, error) {
	e := v.engine()
	if e == nil || e.NAT() == nil || !wantsV4(&q) {
		return 0, nil
	}
	defer e.SyncFastPath() // the deleted connections' flows leave the kernel
	if !q.Addr.IsValid() || q.Addr.IsSingleIP() {
		return dataplane.DeleteConns(e.NAT(), connFilter(q))
	}
	var ids []nat.ConnID
	err := dataplane.EachConn(e.NAT(), connFilter(q), func(c *dataplane.Conn) bool {
		if q.Addr.Contains(c.Orig.Src.Addr()) || q.Addr.Contains(c.Orig.Dst.Addr()) ||
			q.Addr.Contains(c.Reply.Src.Addr()) || q.Addr.Contains(c.Reply.Dst.Addr()) {
			ids = append(ids, nat.ConnID(c.ID))
		}
		return true
	})
	n := 0
	for _, id := range ids {
		if e.NAT().DeleteConn(id) {
			n++
		}
	}
	return n, err
}

// v6State names route6's connection states with the NAT table's names,
// so that one state filter serves both: TCP's syn_sent, established,
// fin_wait (a FIN seen), close (an RST seen); unreplied or replied for
// the rest.
func v6State(c *route6.Conn) string {
	switch c.State {
	case "syn_sent", "established":
		return c.State
	case "closing":
		return "fin_wait"
	case "closed":
		return "close"
	}
	if c.Replied {
		return "replied"
	}
	return "unreplied"
}

// v6Conn fills w with route6's connection c: Src and Dst as the opener
// sent it (from the WAN for an inbound one), the packets of both sides.
func v6Conn(c *route6.Conn, w *webui.Conn) {
	lan := netip.AddrPortFrom(netip.AddrFrom16(c.LAN), c.LANPort)
	wan := netip.AddrPortFrom(netip.AddrFrom16(c.WAN), c.WANPort)
	*w = webui.Conn{Proto: dataplane.ProtoName(c.Proto), State: v6State(c), Kind: webui.ConnKindRouted, Src: lan, Dst: wan,
		Packets: c.Packets[route6.LAN] + c.Packets[route6.WAN], Expires: time.Unix(int64(c.Expires), 0)}
	if c.Inbound {
		w.Src, w.Dst = wan, lan
	}
}

// wantsV4 and wantsV6 say whether q can match connections of the NAT
// table and of the IPv6 router (a NAT kind, "icmp" or an IPv4 address
// only the former, "routed", "icmpv6" or an IPv6 address the latter).
func wantsV4(q *webui.ConnQuery) bool {
	return q.Kind != webui.ConnKindRouted && q.Proto != "icmpv6" && (!q.Addr.IsValid() || q.Addr.Addr().Is4())
}

func wantsV6(q *webui.ConnQuery) bool {
	return (q.Kind == "" || q.Kind == webui.ConnKindRouted) && q.Proto != "icmp" && (!q.Addr.IsValid() || q.Addr.Addr().Is6())
}

// eachV6Conn offers the IPv6 router's connections matching q to sel.
func eachV6Conn(r6 *route6.Router, q *webui.ConnQuery, sel *webui.ConnSelector, now time.Time) {
	if r6 == nil || !wantsV6(q) {
		return
	}
	var wc webui.Conn
	r6.EachConn(now.UnixNano(), func(c *route6.Conn) bool {
		v6Conn(c, &wc)
		sel.Add(&wc)
		return true
	})
}
