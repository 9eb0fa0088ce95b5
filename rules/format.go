package rules

import (
	"net/netip"
	"strconv"
	"strings"
)

// Format returns the canonical text form of a rule set: policies first
// (input, forward, output), then the rules in order, with a "chain" line
// wherever the chain changes (rules start in chain forward). Parsing the
// result yields the same rule set, and formatting that again yields the
// same text.
func Format(rs *Ruleset) string {
	var b []byte
	for _, c := range chainOrder {
		if a, ok := rs.Policy[c]; ok {
			b = append(b, "policy "...)
			b = append(b, c.String()...)
			b = append(b, ' ')
			b = append(b, a.String()...)
			b = append(b, '\n')
		}
	}
	cur := Forward
	for i := range rs.Rules {
		r := &rs.Rules[i]
		if r.Chain != cur {
			cur = r.Chain
			b = append(b, "chain "...)
			b = append(b, cur.String()...)
			b = append(b, '\n')
		}
		b = appendRule(b, r)
		b = append(b, '\n')
	}
	return string(b)
}

// String returns the rule's canonical text (without its chain).
func (r *Rule) String() string { return string(appendRule(nil, r)) }

// String returns the match's canonical text.
func (m *Match) String() string { return string(appendMatch(nil, m)) }

func appendRule(b []byte, r *Rule) []byte {
	b = appendMatch(b, &r.Match)
	if r.Counter {
		b = appendWord(b, "counter")
	}
	if r.Log {
		b = appendWord(b, "log")
	}
	b = appendWord(b, r.Action.String())
	if r.Comment != "" {
		b = appendWord(b, "comment")
		b = append(b, ' ')
		b = appendQuoted(b, r.Comment)
	}
	return b
}

// appendIdentity appends the text that identifies a rule across rule sets:
// its chain and canonical match, and its verdict when withAction is set.
// Flags, comment and position are not part of it.
func appendIdentity(b []byte, r *Rule, withAction bool) []byte {
	b = append(b, r.Chain.String()...)
	b = append(b, ' ')
	b = appendMatch(b, &r.Match)
	if withAction {
		b = appendWord(b, r.Action.String())
	}
	return b
}

// appendWord appends w after a space; an empty w appends just the space,
// for a value appended next.
func appendWord(b []byte, w string) []byte {
	if n := len(b); n > 0 && b[n-1] != ' ' && b[n-1] != '\n' {
		b = append(b, ' ')
	}
	return append(b, w...)
}

func appendWords(b []byte, ws ...string) []byte {
	for _, w := range ws {
		b = appendWord(b, w)
	}
	return b
}

// appendMatch appends the canonical text of m, fields in a fixed order.
// Words implied by others are left out: "ether type ip" next to an IPv4
// prefix, "meta l4proto tcp" next to "tcp dport".
func appendMatch(b []byte, m *Match) []byte {
	if m.InPort != "" {
		b = appendWords(b, "iif", m.InPort)
	}
	if m.OutPort != "" {
		b = appendWords(b, "oif", m.OutPort)
	}
	if m.SrcMAC != nil {
		b = appendMAC(appendWords(b, "ether", "saddr", ""), m.SrcMAC)
	}
	if m.DstMAC != nil {
		b = appendMAC(appendWords(b, "ether", "daddr", ""), m.DstMAC)
	}
	if m.VLAN != nil {
		b = strconv.AppendUint(appendWords(b, "vlan", "id", ""), uint64(*m.VLAN), 10)
	}
	if fam, _ := prefixFamily(m); m.EtherType != 0 && (fam == famAny || etherFamily(m.EtherType) != fam) {
		b = appendWords(b, "ether", "type", m.EtherType.String())
	}
	if m.SrcIP.IsValid() {
		b = appendPrefix(appendWords(b, ipKeyword(m.SrcIP.Addr().Is4()), "saddr", ""), m.SrcIP)
	}
	if m.DstIP.IsValid() {
		b = appendPrefix(appendWords(b, ipKeyword(m.DstIP.Addr().Is4()), "daddr", ""), m.DstIP)
	}
	l4 := ""
	switch m.Proto {
	case ProtoTCP, ProtoUDP:
		if m.SrcPort != nil || m.DstPort != nil || (m.Proto == ProtoTCP && m.TCPFlags != (TCPFlags{})) {
			l4 = m.Proto.String()
		}
	case ProtoICMP, ProtoICMPv6:
		if m.ICMPType != nil || m.ICMPCode != nil {
			l4 = m.Proto.String()
		}
	}
	if m.Proto != 0 && l4 == "" {
		b = appendWords(b, "meta", "l4proto", m.Proto.String())
	}
	proto := l4
	if proto == "" {
		// Invalid combinations (ports without tcp/udp) still print, so that
		// a validation error can show the rule.
		proto = "th"
	}
	if m.SrcPort != nil {
		b = appendWords(b, proto, "sport", m.SrcPort.String())
	}
	if m.DstPort != nil {
		b = appendWords(b, proto, "dport", m.DstPort.String())
	}
	if m.TCPFlags != (TCPFlags{}) {
		value := m.TCPFlags.Value.String()
		if strings.Contains(value, "|") {
			value = "(" + value + ")"
		}
		b = appendWords(b, "tcp", "flags", "&", "("+m.TCPFlags.Mask.String()+")", "==", value)
	}
	icmp := "icmp"
	if m.Proto == ProtoICMPv6 {
		icmp = "icmpv6"
	}
	if m.ICMPType != nil {
		b = appendWords(b, icmp, "type", icmpTypeString(m.Proto, *m.ICMPType))
	}
	if m.ICMPCode != nil {
		b = appendWords(b, icmp, "code", strconv.Itoa(int(*m.ICMPCode)))
	}
	if m.CtState != 0 {
		b = appendCtState(appendWords(b, "ct", "state", ""), m.CtState)
	}
	return b
}

// appendPrefix appends p, without the length of a host prefix:
// "10.0.0.1", not "10.0.0.1/32".
func appendPrefix(b []byte, p netip.Prefix) []byte {
	b = p.Addr().AppendTo(b)
	if p.Bits() != p.Addr().BitLen() {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.Bits()), 10)
	}
	return b
}

func appendMAC(b []byte, m *MAC) []byte {
	const hex = "0123456789abcdef"
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&0xf])
	}
	return b
}

func appendCtState(b []byte, s CtState) []byte {
	if s&^ctAll != 0 {
		return append(b, s.String()...)
	}
	first := true
	for i, n := range ctNames {
		if s&(1<<i) != 0 {
			if !first {
				b = append(b, ',')
			}
			b = append(b, n...)
			first = false
		}
	}
	return b
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
