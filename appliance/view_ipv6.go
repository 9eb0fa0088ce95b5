package main

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/webui"
)

// This file adapts the IPv6 router (route6) to the dashboard: its
// counters for the snapshot, its connections for the connection listing
// and its neighbour cache for the neighbour listing.

// ipv6Counters is the snapshot's IPv6 part; nil without an IPv6 router.
func ipv6Counters(st *dataplane.IPv6Stats) *webui.IPv6Counters {
	if st == nil {
		return nil
	}
	c := &webui.IPv6Counters{Forwarded: st.Actions[routing.Forward.String()], Conns: st.Conns, Neighbours: st.Neighbours,
		DADFailures: st.DADFailures, Drops: []webui.DropStat{}}
	for reason, n := range st.Drops {
		c.Drops = append(c.Drops, webui.DropStat{Reason: reason, Packets: n})
	}
	slices.SortFunc(c.Drops, func(a, b webui.DropStat) int { return strings.Compare(a.Reason, b.Reason) })
	return c
}

// v6Proto names route6's protocols as the connection listing does.
func v6Proto(p uint8) string {
	switch p {
	case frame.ProtoTCP:
		return "tcp"
	case frame.ProtoUDP:
		return "udp"
	case frame.ProtoICMPv6:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
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
	*w = webui.Conn{Proto: v6Proto(c.Proto), State: v6State(c), Kind: webui.ConnKindRouted, Src: lan, Dst: wan,
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

// v6Neighbours lists the IPv6 neighbour cache with the sides' port names.
func v6Neighbours(r6 *route6.Router, names map[uint16]string, now time.Time) []webui.Neighbour {
	if r6 == nil {
		return nil
	}
	cfg := r6.Config()
	port := [2]string{names[uint16(cfg.LAN.ID)], names[uint16(cfg.WAN.ID)]}
	ns := r6.Neighbours(now.UnixNano())
	out := make([]webui.Neighbour, 0, len(ns))
	for _, n := range ns {
		w := webui.Neighbour{Side: n.Side.String(), Port: port[n.Side&1], IP: netip.AddrFrom16(n.Addr), Resolved: n.State != route6.NeighIncomplete,
			State: n.State}
		if w.Resolved {
			w.MAC = net.HardwareAddr(n.MAC[:]).String()
			w.Confirmed = time.Unix(int64(n.Confirmed), 0).UTC()
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b webui.Neighbour) int {
		if c := strings.Compare(a.Side, b.Side); c != 0 {
			return c
		}
		return a.IP.Compare(b.IP)
	})
	return out
}

// portNames maps the engine's port ids to their names.
func portNames(e *dataplane.Engine) map[uint16]string {
	names := map[uint16]string{}
	for name, id := range e.Config().PortNames() {
		names[id] = name
	}
	return names
}
