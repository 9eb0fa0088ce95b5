package offload

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// The workers' side: after the slow path forwarded a frame of a flow the
// fast path could take over, the worker offers the flow to the manager
// (once per Reoffer per flow, never blocking); a TCP SYN, FIN or RST of
// an offloaded connection first takes the connection out of the kernel;
// a station that moved takes its flows out. These run on the workers'
// per-frame path: they allocate nothing and take the manager's lock only
// for those rare events.

// Path is where a flow goes through the engine: its ingress and egress
// ports and its VLAN as the FDB keys it (a LAN source's, for a routed
// flow).
type Path struct {
	In, Out, VID uint16
}

// Pre is a routed frame's flow as it arrived, taken before the router
// rewrites it (Worker.Before); the zero Pre is none.
type Pre struct {
	ok     bool
	v6     bool // flow6, not tuple
	tuple  nat.Tuple
	flow6  route6.Flow
	srcMAC [6]byte
	icmp   uint8
}

// OK reports whether the frame is of a flow the fast path may take.
func (p *Pre) OK() bool { return p.ok }

// IPv6 reports whether it is a routed IPv6 flow (route6 judges it),
// not a NAT one.
func (p *Pre) IPv6() bool { return p.v6 }

func (p *Pre) fromLAN() bool {
	if p.v6 {
		return p.flow6.Side == route6.LAN
	}
	return p.tuple.Side == nat.LAN
}

// offer is a flow offered to the manager.
type offer struct {
	path Path
	// routed: a NAT or IPv6 flow (pre), sent to the next hop with MAC
	// nhMAC; else a bridged one.
	routed bool
	pre    Pre
	nhMAC  [6]byte
	// Bridged: the pair (Ifindex filled in by the manager), the egress
	// form, the rule key the slow path looked up (the manager judges it
	// again with the current table), and the microflow.
	pair   fastpath.PairKey
	egress fastpath.Egress
	rk     rules.Key
	micro  bool
	mk     fastpath.MicroKey
}

// seenSlots is the size of a worker's table of recent offers.
const seenSlots = 1024

// Worker is one dataplane worker's side of the manager. It belongs to the
// worker's goroutine.
type Worker struct {
	m    *Manager
	seen [seenSlots]uint64 // flow hash of the offer in this slot
	when [seenSlots]int64  // engine clock of that offer
}

// NewWorker returns a worker's side of the manager, nil when the fast
// path does not run.
func (m *Manager) NewWorker() *Worker {
	if !m.On() {
		return nil
	}
	return &Worker{m: m}
}

// recent reports whether the flow of hash h was offered within Reoffer
// before now; if not, it is offered now.
func (w *Worker) recent(h uint64, now int64) bool {
	i := h % seenSlots
	if w.seen[i] == h && now-w.when[i] < int64(Reoffer) {
		return true
	}
	w.seen[i], w.when[i] = h, now
	return false
}

// offer queues o; a full queue drops it.
func (w *Worker) offer(o *offer) {
	select {
	case w.m.offers <- *o:
	default:
		w.m.c.dropped.Add(1)
	}
}

// Before takes into p the flow of the routed frame f (arriving on the
// WAN side when wan) before the router rewrites it; p stays the zero Pre
// for a frame the fast path cannot take. A TCP SYN, FIN or RST of an
// offloaded connection takes the connection out of the kernel first, so
// that the router judges it with everything the fast path forwarded
// counted.
func (w *Worker) Before(f *frame.Frame, wan bool, p *Pre) {
	v6 := f.IsIPv6()
	if v6 {
		if f.NTags != 0 || f.Fragment || f.IPv6.Exts != 0 || f.L4Off != f.L3Off+frame.IPv6HeaderLen {
			return
		}
	} else if !f.IsIPv4() || f.NTags != 0 || f.Fragment || f.L4Off == 0 || f.IPv4.IHL != 5 {
		return
	}
	// The ports as the routers key a flow: an echo's identifier is a
	// request's source port and a reply's destination port.
	var icmpProto, request, reply uint8 = frame.ProtoICMP, frame.ICMPEchoRequest, frame.ICMPEchoReply
	if v6 {
		icmpProto, request, reply = frame.ProtoICMPv6, frame.ICMPv6EchoRequest, frame.ICMPv6EchoReply
	}
	var sport, dport uint16
	var icmp uint8
	ctl := false // a TCP SYN, FIN or RST
	switch {
	case f.Proto == frame.ProtoTCP:
		sport, dport = f.TCP.SrcPort, f.TCP.DstPort
		ctl = f.TCP.Flags&(frame.TCPSyn|frame.TCPFin|frame.TCPRst) != 0
	case f.Proto == frame.ProtoUDP:
		sport, dport = f.UDP.SrcPort, f.UDP.DstPort
	case f.Proto == icmpProto && f.ICMP.Type == request:
		sport, icmp = f.ICMP.ID, request
	case f.Proto == icmpProto && f.ICMP.Type == reply:
		dport, icmp = f.ICMP.ID, reply
	default:
		return
	}
	if v6 {
		p.flow6 = route6.Flow{Side: route6.LAN, Src: f.IPv6.Src, Dst: f.IPv6.Dst, SrcPort: sport, DstPort: dport, Proto: f.Proto}
		if wan {
			p.flow6.Side = route6.WAN
		}
	} else {
		p.tuple = nat.Tuple{Side: nat.LAN, Src: f.IPv4.Src, Dst: f.IPv4.Dst, SrcPort: sport, DstPort: dport, Proto: f.Proto}
		if wan {
			p.tuple.Side = nat.WAN
		}
	}
	p.v6 = v6
	if ctl {
		if w.m.mark[markOf(p.hash())].Load() > 0 {
			w.m.evictConn(p)
		}
		*p = Pre{}
		return
	}
	p.ok, p.srcMAC, p.icmp = true, f.Src, icmp
}

// OfferRoute offers the routed flow p of a frame the router forwarded
// along path to the next hop with MAC nhMAC.
func (w *Worker) OfferRoute(p *Pre, path Path, nhMAC [6]byte, now int64) {
	var h uint64 // p.hash(), with tupleHash inlined
	if p.v6 {
		h = flow6Hash(&p.flow6)
	} else {
		h = tupleHash(&p.tuple)
	}
	if w.recent(h, now) {
		return
	}
	o := offer{path: path, routed: true, pre: *p, nhMAC: nhMAC}
	w.offer(&o)
}

// OfferPair offers the bridged flow of the unicast frame f that the slow
// path sent along path in the form egress, after the rules accepted it
// with key rk; stripped says the kernel stripped its outer tag, tag.
func (w *Worker) OfferPair(f *frame.Frame, rk *rules.Key, path Path, egress fastpath.Egress, stripped bool, tag frame.VLANTag, now int64) {
	pk := fastpath.PairKey{Dst: f.Dst, Src: f.Src}
	if stripped {
		pk.VID = tag.TCI & 0xfff
		pk.Tag = fastpath.Tag8021Q
		if tag.TPID != frame.EtherTypeVLAN {
			if egress != fastpath.EgressAsIs {
				return // the slow path drops the 802.1ad tag there; left to it
			}
			pk.Tag = fastpath.Tag8021AD
		}
	}
	h := mix(mix(uint64(path.In)<<48|uint64(pk.VID)<<32|uint64(pk.Tag), macWord(&f.Dst)), macWord(&f.Src))
	micro := (f.IsIPv4() || f.IsIPv6()) && f.L4Off != 0 && !f.Fragment && (f.Proto == frame.ProtoTCP || f.Proto == frame.ProtoUDP)
	if micro {
		h = mix(mix(mix(h, word128(&rk.SrcIP)), word128(&rk.DstIP)), uint64(rk.SrcPort)<<24|uint64(rk.DstPort)<<8|uint64(f.Proto))
	}
	if w.recent(h, now) {
		return
	}
	o := offer{path: path, pair: pk, egress: egress, rk: *rk, micro: micro}
	if micro {
		o.mk = fastpath.MicroKey{EtherType: f.EtherType, Proto: f.Proto, Src: rk.SrcIP, Dst: rk.DstIP,
			SrcPort: rk.SrcPort, DstPort: rk.DstPort}
	}
	w.offer(&o)
}

// Moved takes the flows to mac (in VLAN vid) out of the kernel: the slow
// path learned it on another port.
func (w *Worker) Moved(mac *[6]byte, vid uint16) { w.m.macMoved(*mac, vid) }

// hash is the hash of p's flow: its offers' and its connection's mark.
func (p *Pre) hash() uint64 {
	if p.v6 {
		return flow6Hash(&p.flow6)
	}
	return tupleHash(&p.tuple)
}

func markOf(h uint64) uint32 { return uint32(h % marks) }

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

func tupleHash(t *nat.Tuple) uint64 {
	h := mix(uint64(binary.BigEndian.Uint32(t.Src[:]))<<32|uint64(binary.BigEndian.Uint32(t.Dst[:])), 1)
	return mix(h, uint64(t.SrcPort)<<32|uint64(t.DstPort)<<16|uint64(t.Proto)<<8|uint64(t.Side))
}

func flow6Hash(f *route6.Flow) uint64 {
	h := mix(word128(&f.Src), 6)
	h = mix(h, word128(&f.Dst))
	return mix(h, uint64(f.SrcPort)<<32|uint64(f.DstPort)<<16|uint64(f.Proto)<<8|uint64(f.Side))
}

// word128 folds a 16-byte address into a word.
func word128(a *[16]byte) uint64 {
	return binary.BigEndian.Uint64(a[:8]) ^ binary.BigEndian.Uint64(a[8:])
}

func macWord(m *[6]byte) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}
