package dataplane

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// A worker's part of the fast path: after the slow path forwarded a
// frame of a flow the fast path could take over, the worker offers the
// flow to the manager (once per fpReoffer per flow, never blocking); a
// TCP SYN, FIN or RST of an offloaded connection first takes the
// connection out of the kernel; a station that moved takes its pairs out.

// fpOffer is a flow offered to the manager.
type fpOffer struct {
	nat bool
	// v6 (with nat): a routed IPv6 flow, flow6 instead of tuple.
	v6    bool
	flow6 route6.Flow
	// NAT: the frame's tuple as it arrived (before the router rewrote
	// it), its ingress port and source MAC, its ICMP type, the port the
	// slow path sent it to and its next hop's MAC.
	tuple  nat.Tuple
	in     uint16
	srcMAC [6]byte
	icmp   uint8
	out    uint16
	nhMAC  [6]byte
	// Bridge: the pair (Ifindex filled in by the manager), its VLAN as
	// the FDB keys it, the egress form, the rule key the slow path
	// looked up (the manager judges it again with the current table),
	// and the microflow.
	pair   fastpath.PairKey
	vid    uint16
	egress int
	rk     rules.Key
	micro  bool
	mk     fastpath.MicroKey
}

// fpSeen is the size of a worker's table of recent offers.
const fpSeen = 1024

// fpWorker is a worker's fast path state.
type fpWorker struct {
	fp   *fastPath
	seen [fpSeen]uint64 // flow hash of the offer in this slot
	when [fpSeen]int64  // engine clock of that offer
}

// fpPre is a NAT frame's tuple, taken before the router rewrites it.
type fpPre struct {
	ok     bool
	v6     bool // flow6, not tuple
	tuple  nat.Tuple
	flow6  route6.Flow
	srcMAC [6]byte
	icmp   uint8
}

// offer queues o unless the same flow (hash h) was offered within
// fpReoffer; a full queue drops it.
func (fw *fpWorker) offer(o *fpOffer, h uint64, now int64) {
	i := h % fpSeen
	if fw.seen[i] == h && now-fw.when[i] < int64(fpReoffer) {
		return
	}
	fw.seen[i], fw.when[i] = h, now
	select {
	case fw.fp.offers <- *o:
	default:
		fw.fp.c.dropped.Add(1)
	}
}

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

func tupleHash(t *nat.Tuple) uint64 {
	h := mix(uint64(binary.BigEndian.Uint32(t.Src[:]))<<32|uint64(binary.BigEndian.Uint32(t.Dst[:])), 1)
	return mix(h, uint64(t.SrcPort)<<32|uint64(t.DstPort)<<16|uint64(t.Proto)<<8|uint64(t.Side))
}

// fpBefore takes the tuple of the NAT frame in w.f (arriving on the
// router's side of port id side) before the router rewrites it. A TCP
// SYN, FIN or RST of an offloaded connection takes the connection out of
// the kernel first, so that the router judges it with everything the
// fast path forwarded counted.
func (w *fwd) fpBefore(side int) fpPre {
	f := &w.f
	if w.fp == nil || w.in.host {
		return fpPre{}
	}
	if f.IsIPv6() {
		return w.fpBefore6(side)
	}
	if !f.IsIPv4() || f.NTags != 0 || f.Fragment || f.L4Off == 0 || f.IPv4.IHL != 5 {
		return fpPre{}
	}
	p := fpPre{ok: true, tuple: nat.Tuple{Side: nat.LAN, Src: f.IPv4.Src, Dst: f.IPv4.Dst, Proto: f.Proto}, srcMAC: f.Src}
	if side == int(w.wanID) {
		p.tuple.Side = nat.WAN
	}
	switch f.Proto {
	case frame.ProtoTCP:
		p.tuple.SrcPort, p.tuple.DstPort = f.TCP.SrcPort, f.TCP.DstPort
		if f.TCP.Flags&(frame.TCPSyn|frame.TCPFin|frame.TCPRst) != 0 {
			if w.fp.fp.marked(&p.tuple) {
				w.fp.fp.evictConn(p.tuple)
			}
			return fpPre{}
		}
	case frame.ProtoUDP:
		p.tuple.SrcPort, p.tuple.DstPort = f.UDP.SrcPort, f.UDP.DstPort
	case frame.ProtoICMP:
		switch f.ICMP.Type {
		case frame.ICMPEchoRequest:
			p.tuple.SrcPort = f.ICMP.ID
		case frame.ICMPEchoReply:
			p.tuple.DstPort = f.ICMP.ID
		default:
			return fpPre{}
		}
		p.icmp = f.ICMP.Type
	default:
		return fpPre{}
	}
	return p
}

// fpAfter offers the NAT flow of a frame the router forwarded (b, to its
// port id port) when it went to one data port.
func (w *fwd) fpAfter(p fpPre, port int, b []byte) {
	if !p.ok || len(b) < frame.EthernetHeaderLen || w.hostID != 0 && port == int(w.hostID) {
		return // replies to the box's own stack stay on the rings
	}
	dst := [6]byte(b[0:6])
	out := w.wanID
	if port != int(w.wanID) {
		o, ok := w.fdb.Lookup(&dst, 0, w.mono)
		if !ok || o == w.wanID || int(o) >= len(w.ports) || w.ports[o].host {
			return
		}
		out = o
	}
	o := fpOffer{nat: true, tuple: p.tuple, in: w.in.id, vid: w.vid, srcMAC: p.srcMAC, icmp: p.icmp, out: out, nhMAC: dst}
	if p.v6 {
		o.v6, o.flow6 = true, p.flow6
		w.fp.offer(&o, flow6Hash(&p.flow6), w.mono)
		return
	}
	w.fp.offer(&o, tupleHash(&p.tuple), w.mono)
}

// fpPair offers the bridged flow of the unicast frame in w.f that
// forward sent to data port out in the form egress (after the rules
// accepted it with w.key).
func (w *fwd) fpPair(out uint16, egress int, stripped bool, tag frame.VLANTag) {
	f := &w.f
	if w.in.host || w.ports[out].host || w.tagged && !stripped {
		return
	}
	pk := fastpath.PairKey{Dst: f.Dst, Src: f.Src}
	if stripped {
		pk.VID = tag.TCI & 0xfff
		pk.Tag = fastpath.Tag8021Q
		if tag.TPID != frame.EtherTypeVLAN {
			if egress != egressAsIs {
				return // the slow path drops the 802.1ad tag there; left to it
			}
			pk.Tag = fastpath.Tag8021AD
		}
	}
	o := fpOffer{pair: pk, in: w.in.id, out: out, vid: w.vid, egress: egress, rk: w.key}
	h := mix(mix(uint64(w.in.id)<<48|uint64(pk.VID)<<32|uint64(pk.Tag), macWord(&f.Dst)), macWord(&f.Src))
	if (f.IsIPv4() || f.IsIPv6()) && f.L4Off != 0 && !f.Fragment && (f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP) {
		o.micro = true
		o.mk = fastpath.MicroKey{EtherType: f.EtherType, Proto: f.Proto, Src: w.key.SrcIP, Dst: w.key.DstIP,
			SrcPort: w.key.SrcPort, DstPort: w.key.DstPort}
		h = mix(mix(mix(h, binary.BigEndian.Uint64(o.mk.Src[:8])^binary.BigEndian.Uint64(o.mk.Src[8:])),
			binary.BigEndian.Uint64(o.mk.Dst[:8])^binary.BigEndian.Uint64(o.mk.Dst[8:])),
			uint64(o.mk.SrcPort)<<24|uint64(o.mk.DstPort)<<8|uint64(o.mk.Proto))
	}
	w.fp.offer(&o, h, w.mono)
}

// fpMoved takes the flows to mac (in VLAN vid) out of the kernel: the
// slow path learned it on another port.
func (w *fwd) fpMoved(mac *[6]byte, vid uint16) {
	if w.fp != nil {
		w.fp.fp.macMoved(*mac, vid)
	}
}

func macWord(m *[6]byte) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}
