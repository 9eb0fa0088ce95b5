package route6

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// The ICMPv6 types of neighbour discovery (RFC 4861); package frame has
// the others.
const (
	icmpRS = 133
	icmpRA = 134
	icmpNS = 135
	icmpNA = 136
)

var loopback = [16]byte{15: 1}

func isLinkLocal(a *[16]byte) bool { return a[0] == 0xfe && a[1]&0xc0 == 0x80 }

func (w *Worker) process(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	if f.NTags != 0 {
		return drop(ReasonVLAN)
	}
	if !f.IsIPv6() || f.L3End > len(pkt) || f.L3Off+frame.IPv6HeaderLen > f.L3End {
		return drop(ReasonMalformed)
	}
	p := &s.side[side]
	group := f.Dst[0]&1 != 0
	if !group && f.Dst != p.MAC {
		return drop(ReasonNotForUs)
	}
	ip := &f.IPv6
	if ip.Src[0] == 0xff || ip.Src == loopback {
		return drop(ReasonMartian)
	}
	if needsL4(f) {
		return drop(ReasonMalformed)
	}
	if ip.Dst[0] == 0xff {
		return w.multicast(s, side, pkt, f)
	}
	if group { // a unicast address in a multicast frame
		return drop(ReasonNotForUs)
	}
	if ip.Src == ([16]byte{}) {
		return drop(ReasonMartian)
	}
	if s.boxAddr(side, &ip.Dst) || side == LAN && s.boxAddr(WAN, &ip.Dst) {
		return w.toBox(s, side, pkt, f)
	}
	if isLinkLocal(&ip.Src) || isLinkLocal(&ip.Dst) {
		return drop(ReasonLinkLocal)
	}
	return w.forward(s, side, pkt, f)
}

// needsL4 says a TCP, UDP or ICMPv6 packet that is not a later fragment
// lacks its transport header (Parse leaves L4Off 0 only then).
func needsL4(f *frame.Frame) bool {
	switch f.Proto {
	case frame.ProtoTCP, frame.ProtoUDP, frame.ProtoICMPv6:
		return f.L4Off == 0 && !f.LaterFragment
	}
	return false
}

// forward routes a transit packet: the extension header and fragment
// policy, anti-spoofing, the route, hop limit, MTU, the firewall, then the
// next hop.
func (w *Worker) forward(s *snapshot, side Side, pkt []byte, f *frame.Frame) Result {
	ip := &f.IPv6
	if ip.Exts&(frame.ExtHopByHop|frame.ExtRouting) != 0 {
		return drop(ReasonExtHeader)
	}
	if f.Fragment {
		return drop(ReasonFragment)
	}
	out := WAN
	if side == LAN {
		if !inAny(s.lanNets, &ip.Src) {
			return drop(ReasonMartian)
		}
		if inAny(s.lanNets, &ip.Dst) {
			return drop(ReasonNoRoute) // LAN to LAN is the switch's
		}
		if inAny(s.deleg, &ip.Dst) {
			return w.icmpError(s, side, pkt, f, frame.ICMPv6DestUnreach, 0, 0, ReasonNoRoute)
		}
	} else {
		out = LAN
		if inAny(s.lanNets, &ip.Src) || inAny(s.deleg, &ip.Src) {
			return drop(ReasonMartian)
		}
		if !inAny(s.lanNets, &ip.Dst) {
			if inAny(s.deleg, &ip.Dst) {
				return w.icmpError(s, side, pkt, f, frame.ICMPv6DestUnreach, 0, 0, ReasonNoRoute)
			}
			return drop(ReasonNotForUs)
		}
	}
	if ip.HopLimit <= 1 {
		return w.icmpError(s, side, pkt, f, frame.ICMPv6TimeExceeded, 0, 0, ReasonHopLimit)
	}
	if mtu := s.side[out].MTU; f.L3End-f.L3Off > mtu {
		return w.icmpError(s, side, pkt, f, frame.ICMPv6PacketTooBig, 0, uint32(mtu), ReasonTooBig)
	}
	why, kind := w.firewall(s, side, out, pkt, f)
	if why != ReasonNone {
		return drop(why)
	}
	hop := ip.Dst
	if out == WAN {
		gw, ok := w.r.gateway(s, w.sec)
		if !ok {
			return w.icmpError(s, side, pkt, f, frame.ICMPv6DestUnreach, 0, 0, ReasonNoRoute)
		}
		hop = gw
	}
	frame.DecTTL(pkt, f)
	return w.toNeighbour(s, out, hop, pkt[:f.L3End], kind)
}

// connKeyOf is the connection of f coming from side.
func connKeyOf(f *frame.Frame, side Side, k *connKey) {
	ip := &f.IPv6
	var sp, dp uint16
	switch f.Proto {
	case frame.ProtoTCP:
		sp, dp = f.TCP.SrcPort, f.TCP.DstPort
	case frame.ProtoUDP:
		sp, dp = f.UDP.SrcPort, f.UDP.DstPort
	case frame.ProtoICMPv6:
		sp = f.ICMP.ID // echo: the identifier on both sides
		dp = 0
	}
	if side == LAN {
		*k = connKey{lan: ip.Src, wan: ip.Dst, lanPort: sp, wanPort: dp, proto: f.Proto}
	} else {
		*k = connKey{lan: ip.Dst, wan: ip.Src, lanPort: dp, wanPort: sp, proto: f.Proto}
		if f.Proto == frame.ProtoICMPv6 {
			k.lanPort, k.wanPort = sp, 0
		}
	}
}

// firewall is the stateful filter: packets of known connections pass;
// from the LAN a new connection passes unless the forward chain drops it;
// from the WAN only with a forward rule that accepts it, and, to a LAN
// address without a resolved neighbour, within the scan limits (kind says
// it is such an unknown destination). ICMPv6 follows RFC 4890 4.3: errors
// only about known connections, echo requests in and out, echo replies of
// known echoes, nothing else.
func (w *Worker) firewall(s *snapshot, side, out Side, pkt []byte, f *frame.Frame) (Reason, lookupKind) {
	var k connKey
	if f.Proto == frame.ProtoICMPv6 {
		switch t := f.ICMP.Type; {
		case t == frame.ICMPv6DestUnreach || t == frame.ICMPv6PacketTooBig || t == frame.ICMPv6TimeExceeded || t == frame.ICMPv6ParamProblem:
			return w.related(side, pkt, f), lookupTrusted
		case t == frame.ICMPv6EchoReply:
			connKeyOf(f, side, &k)
			if v := w.r.ct.lookup(&k, side, 0, w.sec); v != ctEstablished && v != ctUnanswered {
				return ReasonICMPUnrelated, lookupTrusted
			}
			return ReasonNone, lookupTrusted
		case t != frame.ICMPv6EchoRequest:
			return ReasonICMPPolicy, lookupTrusted
		}
	}
	connKeyOf(f, side, &k)
	var flags uint8
	if f.Proto == frame.ProtoTCP {
		flags = f.TCP.Flags
	}
	switch w.r.ct.lookup(&k, side, flags, w.sec) {
	case ctEstablished:
		return ReasonNone, lookupTrusted
	case ctUnanswered:
		// Admitted once; resolving its host is still a scan's to pay
		// for until the host answers (or is known).
		return ReasonNone, lookupUnknown
	case ctInvalid:
		return ReasonInvalid, lookupTrusted
	}
	echoIn := side == WAN && f.Proto == frame.ProtoICMPv6
	if why := w.ruleCheck(s, side, out, f, echoIn); why != ReasonNone {
		return why, lookupTrusted
	}
	kind := lookupTrusted
	if side == WAN && !w.r.neigh.known(LAN, &f.IPv6.Dst) {
		if why := w.scanCheck(s, &f.IPv6.Src); why != ReasonNone {
			return why, kind
		}
		kind = lookupUnknown
	}
	if !w.r.ct.insert(&k, side, side == WAN, w.sec) {
		return ReasonTableFull, kind
	}
	return ReasonNone, kind
}

// ruleCheck consults the forward chain for a new connection: from the LAN
// it must not drop it; from the WAN a rule must accept it (the chain's
// policy does not count), except an echo request (RFC 4890 4.3.1), which
// only a dropping rule stops.
func (w *Worker) ruleCheck(s *snapshot, side, out Side, f *frame.Frame, echoIn bool) Reason {
	if w.rw == nil {
		if side == WAN && !echoIn {
			return ReasonFirewall
		}
		return ReasonNone
	}
	k := &w.key
	*k = rules.Key{Chain: rules.Forward, CtState: rules.CtNew, InPort: uint16(s.side[side].ID), OutPort: uint16(s.side[out].ID),
		EtherType: rules.EtherTypeIPv6, SrcMAC: f.Src, DstMAC: f.Dst, SrcIP: f.IPv6.Src, DstIP: f.IPv6.Dst, Proto: rules.Proto(f.Proto)}
	switch f.Proto {
	case frame.ProtoTCP:
		k.SrcPort, k.DstPort, k.TCPFlags = f.TCP.SrcPort, f.TCP.DstPort, rules.TCPFlagSet(f.TCP.Flags)
	case frame.ProtoUDP:
		k.SrcPort, k.DstPort = f.UDP.SrcPort, f.UDP.DstPort
	case frame.ProtoICMPv6:
		k.ICMPType, k.ICMPCode = f.ICMP.Type, f.ICMP.Code
	}
	v := w.rw.Lookup(k, f.L3End-f.L3Off, int64(w.sec)*1e9)
	switch {
	case v.Action != rules.Accept:
		return ReasonRule
	case side == WAN && v.Rule < 0 && !echoIn:
		return ReasonFirewall
	}
	return ReasonNone
}

// related passes an ICMPv6 error whose quoted packet belongs to a known
// connection (the quote is the packet the error's receiver sent).
func (w *Worker) related(side Side, pkt []byte, f *frame.Frame) Reason {
	if frame.ParseEmbedded(pkt, f, &w.in) != nil || w.in.L4Off == 0 {
		return ReasonICMPUnrelated
	}
	in := &w.in
	var k connKey
	// The quote went from the error's destination to the peer.
	if side == WAN {
		k = connKey{lan: in.IPv6.Src, wan: in.IPv6.Dst, lanPort: in.SrcPort, wanPort: in.DstPort, proto: in.Proto}
	} else {
		k = connKey{lan: in.IPv6.Dst, wan: in.IPv6.Src, lanPort: in.DstPort, wanPort: in.SrcPort, proto: in.Proto}
	}
	if in.Proto == frame.ProtoICMPv6 {
		k.lanPort, k.wanPort = in.ICMPID, 0
	}
	if k.lan != f.IPv6.Dst && k.lan != f.IPv6.Src {
		return ReasonICMPUnrelated
	}
	if w.r.ct.peek(&k, w.sec) {
		return ReasonNone
	}
	return ReasonICMPUnrelated
}

// icmpError answers f with an ICMPv6 error (rate-limited) and drops it
// with why.
func (w *Worker) icmpError(s *snapshot, side Side, pkt []byte, f *frame.Frame, typ, code uint8, rest uint32, why Reason) Result {
	if !w.errTok.take(s.icmpRate, w.sec) {
		return drop(why)
	}
	a := frame.Answer{MAC: s.side[side].MAC, Src6: s.src[side], TTL: 64, MTU: s.side[side].MTU}
	n := frame.PutICMPError(w.scratch, pkt, f, &a, typ, code, rest)
	if n == 0 {
		return drop(why)
	}
	w.c.errors.Add(1)
	return Result{Action: routing.Reply, Port: s.side[side].ID, Frame: w.scratch[:n], Reason: why}
}
