package rules

import "net/netip"

// Linear is the reference implementation: it walks the rules in order and
// returns the first that matches, testing each field of the Key directly.
// It is the oracle for Table's tests and the baseline of its benchmarks.
type Linear struct {
	rules  []linRule
	policy [numChains]Action
}

type linRule struct {
	chain             Chain
	inPort, outPort   int32 // -1: any
	srcMAC, dstMAC    *MAC
	etherType         EtherType
	vlan              int32 // -1: any
	src, dst          netip.Prefix
	proto             Proto
	sport, dport      *PortRange
	flags             TCPFlags
	icmpType, icmpCod int16 // -1: any
	ct                CtState
	meta              uint64
}

// NewLinear validates rs like Compile and returns its linear form.
func NewLinear(rs *Ruleset, opts Options) (*Linear, error) {
	// Compile does all the checking; its result is not needed.
	if _, err := Compile(rs, opts); err != nil {
		return nil, err
	}
	l := &Linear{rules: make([]linRule, len(rs.Rules))}
	for c := range numChains {
		l.policy[c] = rs.PolicyFor(c)
	}
	for i := range rs.Rules {
		r := &rs.Rules[i]
		lr := linRule{
			chain: r.Chain, inPort: -1, outPort: -1, srcMAC: r.SrcMAC, dstMAC: r.DstMAC,
			etherType: r.effectiveEtherType(), vlan: -1, src: r.SrcIP, dst: r.DstIP,
			proto: r.Proto, sport: r.SrcPort, dport: r.DstPort, flags: r.TCPFlags,
			icmpType: -1, icmpCod: -1, ct: r.CtState, meta: metaOf(r, i),
		}
		if r.InPort != "" {
			lr.inPort = int32(opts.Ports[r.InPort])
		}
		if r.OutPort != "" {
			lr.outPort = int32(opts.Ports[r.OutPort])
		}
		if r.VLAN != nil {
			lr.vlan = int32(*r.VLAN)
		}
		if r.ICMPType != nil {
			lr.icmpType = int16(*r.ICMPType)
		}
		if r.ICMPCode != nil {
			lr.icmpCod = int16(*r.ICMPCode)
		}
		l.rules[i] = lr
	}
	return l, nil
}

// Lookup returns the verdict of the first matching rule or the policy.
func (l *Linear) Lookup(k *Key) Verdict {
	for i := range l.rules {
		if l.rules[i].matches(k) {
			return metaVerdict(l.rules[i].meta, &l.policy, k.Chain)
		}
	}
	return metaVerdict(0, &l.policy, k.Chain)
}

func (r *linRule) matches(k *Key) bool {
	switch {
	case r.chain != k.Chain,
		r.inPort >= 0 && uint16(r.inPort) != k.InPort,
		r.outPort >= 0 && uint16(r.outPort) != k.OutPort,
		r.srcMAC != nil && *r.srcMAC != k.SrcMAC,
		r.dstMAC != nil && *r.dstMAC != k.DstMAC,
		r.etherType != 0 && r.etherType != k.EtherType,
		r.vlan >= 0 && (!k.Tagged || uint16(r.vlan) != k.VLAN&0xfff),
		r.src.IsValid() && !r.src.Contains(keyAddr(&k.SrcIP, r.src.Addr().Is4())),
		r.dst.IsValid() && !r.dst.Contains(keyAddr(&k.DstIP, r.dst.Addr().Is4())),
		r.proto != 0 && r.proto != k.Proto,
		r.sport != nil && (k.SrcPort < r.sport.Lo || k.SrcPort > r.sport.Hi),
		r.dport != nil && (k.DstPort < r.dport.Lo || k.DstPort > r.dport.Hi),
		k.TCPFlags&r.flags.Mask != r.flags.Value,
		r.icmpType >= 0 && uint8(r.icmpType) != k.ICMPType,
		r.icmpCod >= 0 && uint8(r.icmpCod) != k.ICMPCode,
		r.ct != 0 && (r.ct&k.CtState == 0 || k.CtState&(k.CtState-1) != 0):
		return false
	}
	return true
}

func keyAddr(b *[16]byte, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(*b)
}
