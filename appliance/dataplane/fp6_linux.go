package dataplane

import (
	"encoding/binary"
	"time"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/route6"
)

// The fast path's routed IPv6 flows: one direction of a route6
// connection each (route6.Offloadable), installed, harvested into route6
// and evicted like the NAT flows. Everything here but fpBefore6 runs
// under fp.mu.

// fpR6 is one direction of a route6 connection in the kernel.
type fpR6 struct {
	key       fastpath.IPv6Key
	flow6     route6.Flow // as its packets arrive
	rev       route6.Flow // the other direction's
	in, out   uint16
	outSide   route6.Side
	vid       uint16 // the FDB VLAN of a LAN source
	srcMAC    [6]byte
	nh        [16]byte
	flow      fastpath.IPv6Flow
	idle      int64 // ns without a packet before it leaves the kernel
	active    int64 // engine clock of its install or last packet
	markIndex uint64
	revMark   uint64
}

// fpHop6 is a routed IPv6 flow's next hop.
type fpHop6 struct {
	side route6.Side
	ip   [16]byte
	mac  [6]byte
}

func flow6Hash(f *route6.Flow) uint64 {
	h := mix(binary.BigEndian.Uint64(f.Src[:8])^binary.BigEndian.Uint64(f.Src[8:]), 6)
	h = mix(h, binary.BigEndian.Uint64(f.Dst[:8])^binary.BigEndian.Uint64(f.Dst[8:]))
	return mix(h, uint64(f.SrcPort)<<32|uint64(f.DstPort)<<16|uint64(f.Proto)<<8|uint64(f.Side))
}

// marked6 reports whether a flow of either direction of f's connection
// may be in the kernel (a hash filter: false positives only).
func (fp *fastPath) marked6(f *route6.Flow) bool { return fp.mark[flow6Hash(f)%fpMarks].Load() > 0 }

func (fp *fastPath) installR6(o *fpOffer) bool {
	v6 := fp.e.IPv6()
	if v6 == nil {
		return false
	}
	if old := fp.r6[o.flow6]; old != nil {
		if old.in == o.in && old.out == o.out && old.srcMAC == o.srcMAC && old.flow.DstMAC == o.nhMAC {
			return true // installed meanwhile
		}
		fp.evictR6(old) // the host moved or changed its MAC
	}
	clk := fp.clock()
	off, ok := v6.Offloadable(o.flow6, clk.wall)
	if !ok || off.NextHopMAC != o.nhMAC {
		return false
	}
	in, ok1 := fp.port(o.in)
	out, ok2 := fp.port(o.out)
	if !ok1 || !ok2 || (off.Out == route6.WAN) != (o.out == fp.e.wanID()) {
		return false
	}
	if off.Out == route6.LAN {
		if p, ok := fp.e.fdb.Lookup(&off.NextHopMAC, 0, clk.eng); !ok || p != o.out {
			return false
		}
	}
	slot, ok := fp.alloc()
	if !ok {
		return false
	}
	f := o.flow6
	rec := &fpR6{flow6: f, rev: f.Reverse(), in: o.in, out: o.out, outSide: off.Out, vid: o.vid, srcMAC: o.srcMAC,
		nh: off.NextHop, active: clk.eng, idle: min(int64(off.Timeout)*int64(time.Second)/2, int64(fpIdle))}
	rec.markIndex, rec.revMark = flow6Hash(&rec.flow6)%fpMarks, flow6Hash(&rec.rev)%fpMarks
	rec.key = fastpath.IPv6Key{Ifindex: fp.ifindex[o.in], Src: f.Src, Dst: f.Dst, SrcPort: f.SrcPort, DstPort: f.DstPort, Proto: f.Proto}
	rec.flow = fastpath.IPv6Flow{DstMAC: off.NextHopMAC, SrcMAC: off.OutMAC, InDstMAC: off.InMAC, InSrcMAC: o.srcMAC,
		CheckSrcMAC: f.Side == route6.LAN, OutIfindex: fp.ifindex[o.out], Slot: slot,
		MaxFrame: min(in.mtu, out.mtu) + frame.EthernetHeaderLen, MaxIP: off.OutMTU, ICMPType: o.icmp}
	if err := fp.prog.PutIPv6(rec.key, rec.flow); err != nil {
		fp.fail(err)
		fp.free = append(fp.free, slot)
		return false
	}
	fp.own(slot, fpSlot{rec: rec, in: o.in, out: o.out, ports: true, routed: true, v6: true, turns: turnsFor(rec.idle)})
	fp.r6[f] = rec
	fp.r6Rev[rec.rev] = rec
	fp.mark[rec.markIndex].Add(1)
	fp.mark[rec.revMark].Add(1)
	fp.c.installed.Add(1)
	return true
}

// applyR6 carries a routed IPv6 flow's new counts into route6, the FDB
// and the counters. It reports whether the flow may stay.
func (fp *fastPath) applyR6(r *fpR6, d fastpath.Stats, clk fpClock, set *settings) bool {
	if d.Packets == 0 {
		return true
	}
	v6 := fp.e.IPv6()
	alive := v6.Offloaded(r.flow6, route6.OffloadUse{Packets: d.Packets, Last: clk.unix(d.Last)})
	if r.flow6.Side == route6.LAN && !set.ports[r.in].noLearn {
		fp.e.fdb.Learn(&r.srcMAC, r.vid, r.in, clk.engine(d.Last))
	}
	r.active = clk.engine(d.Last)
	return alive
}

// r6Valid reports whether a routed IPv6 flow still forwards as route6
// would: its ports up, its next hop fresh (route6 would solicit it
// otherwise) and still the gateway on the WAN, a LAN next hop on its
// port, and a packet within its idle time.
func (fp *fastPath) r6Valid(r *fpR6, clk fpClock) bool {
	if _, ok := fp.port(r.in); !ok {
		return false
	}
	if _, ok := fp.port(r.out); !ok {
		return false
	}
	v6 := fp.e.IPv6()
	if r.outSide == route6.WAN {
		if !fp.gw6ok {
			fp.gw6, fp.gw6ok = [16]byte{}, true
			if gw, ok := v6.Gateway(clk.wall); ok {
				fp.gw6 = gw.As16()
			}
		}
		if fp.gw6 != r.nh {
			return false
		}
	}
	h := fpHop6{side: r.outSide, ip: r.nh, mac: r.flow.DstMAC}
	fresh, ok := fp.hops6[h]
	if !ok {
		fresh = v6.NeighbourFresh(r.outSide, r.nh, r.flow.DstMAC, clk.wall)
		fp.hops6[h] = fresh
	}
	if !fresh {
		return false
	}
	if r.outSide == route6.LAN {
		if p, ok := fp.e.fdb.Lookup(&r.flow.DstMAC, 0, clk.eng); !ok || p != r.out {
			return false
		}
	}
	return clk.eng-r.active < r.idle
}

// evictR6 takes a routed IPv6 flow out of the kernel; its last counts
// are read at the next harvest.
func (fp *fastPath) evictR6(r *fpR6) {
	if err := fp.prog.DeleteIPv6(r.key); err != nil {
		fp.fail(err)
	}
	delete(fp.r6, r.flow6)
	if fp.r6Rev[r.rev] == r {
		delete(fp.r6Rev, r.rev)
	}
	fp.mark[r.markIndex].Add(-1)
	fp.mark[r.revMark].Add(-1)
	fp.die(r.flow.Slot, r)
}

// evictConn6 takes both directions of f's connection out of the kernel
// (a worker, before route6 sees a TCP SYN, FIN or RST of it).
func (fp *fastPath) evictConn6(f route6.Flow) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	r, o := fp.r6[f], fp.r6Rev[f]
	if r != nil {
		fp.evictR6(r)
	}
	if o != nil {
		fp.evictR6(o)
	}
}

// revalidate6 takes out the routed IPv6 flows route6 no longer forwards
// as they were installed: renumbered prefixes, another gateway or MTU,
// a connection gone.
func (fp *fastPath) revalidate6(clk fpClock) {
	v6 := fp.e.IPv6()
	if v6 == nil {
		return
	}
	for _, r := range fp.r6 {
		o, ok := v6.Offloadable(r.flow6, clk.wall)
		f := &r.flow
		if !ok || o.Out != r.outSide || o.NextHop != r.nh || o.NextHopMAC != f.DstMAC || o.OutMAC != f.SrcMAC ||
			o.InMAC != f.InDstMAC || o.OutMTU != f.MaxIP {
			fp.evictR6(r)
		}
	}
}

// v6Changed follows a change of route6's configuration (route6.OnChange:
// SetPrefixes when the delegation changes): the flows it no longer routes
// as they were leave the kernel before SetPrefixes returns.
func (fp *fastPath) v6Changed() {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.on() && !fp.closed {
		fp.revalidate6(fp.clock())
	}
}

// fpBefore6 takes the flow of the IPv6 frame in w.f (arriving on the
// router's side of port id side) before route6 processes it. A TCP SYN,
// FIN or RST of an offloaded connection takes the connection out of the
// kernel first, so that route6 judges it with everything the fast path
// forwarded counted.
func (w *fwd) fpBefore6(side int) fpPre {
	f := &w.f
	if f.NTags != 0 || f.Fragment || f.IPv6.Exts != 0 || f.L4Off != f.L3Off+frame.IPv6HeaderLen {
		return fpPre{}
	}
	p := fpPre{ok: true, v6: true, srcMAC: f.Src,
		flow6: route6.Flow{Side: route6.LAN, Src: f.IPv6.Src, Dst: f.IPv6.Dst, Proto: f.Proto}}
	if side == int(w.wanID) {
		p.flow6.Side = route6.WAN
	}
	switch f.Proto {
	case frame.ProtoTCP:
		p.flow6.SrcPort, p.flow6.DstPort = f.TCP.SrcPort, f.TCP.DstPort
		if f.TCP.Flags&(frame.TCPSyn|frame.TCPFin|frame.TCPRst) != 0 {
			if w.fp.fp.marked6(&p.flow6) {
				w.fp.fp.evictConn6(p.flow6)
			}
			return fpPre{}
		}
	case frame.ProtoUDP:
		p.flow6.SrcPort, p.flow6.DstPort = f.UDP.SrcPort, f.UDP.DstPort
	case frame.ProtoICMPv6:
		switch f.ICMP.Type {
		case frame.ICMPv6EchoRequest:
			p.flow6.SrcPort = f.ICMP.ID
		case frame.ICMPv6EchoReply:
			p.flow6.DstPort = f.ICMP.ID
		default:
			return fpPre{}
		}
		p.icmp = f.ICMP.Type
	default:
		return fpPre{}
	}
	return p
}
