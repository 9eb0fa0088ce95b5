package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

const matchKeywords = "iif, oif, ether, vlan, ip, ip6, meta, tcp, udp, icmp, icmpv6, ct"

func (p *lineParser) parseRule() *Error {
	for {
		t := p.next()
		if t.eol {
			return p.errAt(t, "rule has no verdict: end it with accept, drop or reject")
		}
		if t.quoted {
			return p.errAt(t, "unexpected string %s (a comment goes after the verdict: drop comment \"...\")", describe(t))
		}
		var err *Error
		switch t.s {
		case "iif", "iifname":
			err = p.portName(t, fInPort, &p.r.InPort)
		case "oif", "oifname":
			err = p.portName(t, fOutPort, &p.r.OutPort)
		case "ether":
			err = p.ether(t)
		case "vlan":
			err = p.vlan(t)
		case "ip", "ip6":
			err = p.ip(t)
		case "meta":
			err = p.meta(t)
		case "tcp", "udp":
			err = p.transport(t)
		case "icmp", "icmpv6":
			err = p.icmp(t)
		case "ct":
			err = p.ct(t)
		case "counter":
			if p.r.Counter {
				err = p.errAt(t, "counter given twice")
			}
			p.r.Counter = true
		case "log":
			if p.r.Log {
				err = p.errAt(t, "log given twice")
			}
			p.r.Log = true
		case "accept", "drop", "reject":
			p.pos[fAction] = t.col
			_ = p.r.Action.UnmarshalText([]byte(t.s))
			return p.tail()
		case "comment":
			err = p.errAt(t, "comment goes after the verdict: ... accept comment \"text\"")
		default:
			err = p.errAt(t, "unknown keyword %s: want a match (%s), counter, log or a verdict (accept, drop, reject)", describe(t), matchKeywords)
		}
		if err != nil {
			return err
		}
	}
}

// tail parses what may follow the verdict: an optional comment.
func (p *lineParser) tail() *Error {
	t := p.next()
	if t.eol {
		return nil
	}
	if t.s != "comment" || t.quoted {
		return p.errAt(t, "unexpected %s after the verdict (only comment \"...\" may follow)", describe(t))
	}
	c := p.next()
	if !c.quoted {
		return p.errAt(c, "want a quoted comment, found %s", describe(c))
	}
	p.pos[fComment] = c.col
	p.r.Comment = c.s
	return p.expectEOL("the comment")
}

func (p *lineParser) portName(t token, f field, dst *string) *Error {
	if err := p.set(f, t, t.s); err != nil {
		return err
	}
	n := p.next()
	if n.eol || (!n.quoted && len(n.s) == 1 && strings.Contains("&()|,{}", n.s)) {
		return p.errAt(n, "missing port name after %s", t.s)
	}
	if msg := checkPortName(n.s); msg != "" || n.s == "" {
		if n.s == "" {
			msg = "empty port name"
		}
		return p.errAt(n, "%s: %s", t.s, msg)
	}
	*dst = n.s
	return nil
}

func (p *lineParser) ether(t token) *Error {
	sub, err := p.word("saddr, daddr or type after ether")
	if err != nil {
		return err
	}
	switch sub.s {
	case "saddr", "daddr":
		_, dst, err := srcDst(p, t, sub, fSrcMAC, fDstMAC, &p.r.SrcMAC, &p.r.DstMAC)
		if err != nil {
			return err
		}
		mac, err := value(p, "a MAC address", macKind)
		if err != nil {
			return err
		}
		*dst = &mac
		return nil
	case "type":
		return p.etherType(t)
	}
	return p.errAt(sub, "unknown ether field %s (want saddr, daddr or type)", describe(sub))
}

// etherType reads the ether type that "ether type" and "meta protocol" (at
// token t) name.
func (p *lineParser) etherType(t token) *Error {
	e, err := value(p, "an ether type", etherTypeKind)
	if err != nil {
		return err
	}
	return p.setEther(t, e)
}

// srcDst records the source or the destination field that sub names
// ("saddr", "sport": the source; "daddr", "dport": the destination) as
// given at token t, and returns it and where its value goes.
func srcDst[T any](p *lineParser, t, sub token, fsrc, fdst field, src, dst *T) (field, *T, *Error) {
	f, v := fsrc, src
	if sub.s == "daddr" || sub.s == "dport" {
		f, v = fdst, dst
	}
	return f, v, p.set(f, t, t.s+" "+sub.s)
}

// only reads the one field name a keyword has ("vlan id", "ct state") and
// records that field as given at token t.
func (p *lineParser) only(t token, name string, f field) *Error {
	sub, err := p.word(name + " after " + t.s)
	if err != nil {
		return err
	}
	if sub.s != name {
		return p.errAt(sub, "unknown %s field %s (want %s)", t.s, describe(sub), name)
	}
	return p.set(f, t, t.s+" "+name)
}

// vlanKind is a VLAN id.
var vlanKind = kind[uint16]{func(s string) (uint16, bool) {
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err == nil && n <= 4095
}, "bad vlan id %q (want 0-4095)"}

func (p *lineParser) vlan(t token) *Error {
	if err := p.only(t, "id", fVLAN); err != nil {
		return err
	}
	id, err := value(p, "a VLAN id", vlanKind)
	if err != nil {
		return err
	}
	p.r.VLAN = &id
	return nil
}

func (p *lineParser) ip(t token) *Error {
	v4 := t.s == "ip"
	want := "saddr, daddr or protocol after ip"
	if !v4 {
		want = "saddr, daddr or nexthdr after ip6"
	}
	sub, err := p.word(want)
	if err != nil {
		return err
	}
	switch {
	case sub.s == "saddr" || sub.s == "daddr":
		f, dst, err := srcDst(p, t, sub, fSrcIP, fDstIP, &p.r.SrcIP, &p.r.DstIP)
		if err != nil {
			return err
		}
		v, err := p.word("an address or prefix")
		if err != nil {
			return err
		}
		pr, msg := parsePrefix(v.s, v4)
		if msg != "" {
			return p.errAt(v, "%s %s: %s", t.s, sub.s, msg)
		}
		p.pos[f] = v.col // later errors (host bits) are about the value
		*dst = pr
		return nil
	case v4 && sub.s == "protocol" || !v4 && sub.s == "nexthdr":
		e := EtherTypeIPv6
		if v4 {
			e = EtherTypeIPv4
		}
		if err := p.setEther(t, e); err != nil {
			return err
		}
		return p.protoValue(t)
	}
	return p.errAt(sub, "unknown %s field %s (want %s)", t.s, describe(sub), strings.TrimSuffix(want, " after "+t.s))
}

// parsePrefix parses "10.0.0.0/8" or a single address; v4 says which family
// the keyword wants. The message is empty on success.
func parsePrefix(s string, v4 bool) (netip.Prefix, string) {
	var pr netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		pr, err = netip.ParsePrefix(s)
		if err != nil {
			return pr, fmt.Sprintf("bad prefix %q (want an address like 10.0.0.0/8 or 2001:db8::/32)", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return pr, fmt.Sprintf("bad address %q", s)
		}
		pr = netip.PrefixFrom(a, a.BitLen())
	}
	if pr.Addr().Is4() != v4 {
		if v4 {
			return pr, fmt.Sprintf("%s is not an IPv4 prefix (use ip6)", s)
		}
		return pr, fmt.Sprintf("%s is not an IPv6 prefix (use ip)", s)
	}
	return pr, ""
}

func (p *lineParser) protoValue(t token) *Error {
	proto, err := value(p, "a protocol", protoKind)
	if err != nil {
		return err
	}
	return p.setProto(t, proto)
}

func (p *lineParser) meta(t token) *Error {
	sub, err := p.word("l4proto, protocol or nfproto after meta")
	if err != nil {
		return err
	}
	switch sub.s {
	case "l4proto":
		return p.protoValue(t)
	case "protocol":
		return p.etherType(t)
	case "nfproto":
		v, err := p.word("ipv4 or ipv6")
		if err != nil {
			return err
		}
		switch v.s {
		case "ipv4":
			return p.setEther(t, EtherTypeIPv4)
		case "ipv6":
			return p.setEther(t, EtherTypeIPv6)
		}
		return p.errAt(v, "unknown nfproto %q (want ipv4 or ipv6)", v.s)
	}
	return p.errAt(sub, "unknown meta field %s (want l4proto, protocol or nfproto)", describe(sub))
}

func (p *lineParser) transport(t token) *Error {
	proto := ProtoTCP
	want := "sport, dport or flags after tcp"
	if t.s == "udp" {
		proto, want = ProtoUDP, "sport or dport after udp"
	}
	sub, err := p.word(want)
	if err != nil {
		return err
	}
	switch {
	case sub.s == "sport" || sub.s == "dport":
		if err := p.setProto(t, proto); err != nil {
			return err
		}
		_, dst, err := srcDst(p, t, sub, fSrcPort, fDstPort, &p.r.SrcPort, &p.r.DstPort)
		if err != nil {
			return err
		}
		v := p.next()
		if v.s == "{" && !v.quoted {
			return p.errAt(v, "port sets are not supported: write one rule per port or use a range like 1000-2000")
		}
		if v.eol || v.quoted {
			return p.errAt(v, "want a port or range after %s %s, found %s", t.s, sub.s, describe(v))
		}
		r, perr := parsePortRange(v.s)
		if perr != nil {
			return p.errAt(v, "%s %s: %v", t.s, sub.s, perr)
		}
		if r.Lo > r.Hi {
			return p.errAt(v, "%s %s: range %s is reversed (want %d-%d)", t.s, sub.s, v.s, r.Hi, r.Lo)
		}
		*dst = &r
		return nil
	case proto == ProtoTCP && sub.s == "flags":
		if err := p.setProto(t, proto); err != nil {
			return err
		}
		if err := p.set(fTCPFlags, t, "tcp flags"); err != nil {
			return err
		}
		return p.tcpFlags()
	}
	return p.errAt(sub, "unknown %s field %s (want %s)", t.s, describe(sub), strings.TrimSuffix(want, " after "+t.s))
}

// tcpFlags parses "& (syn|ack) == syn" (after "tcp flags").
func (p *lineParser) tcpFlags() *Error {
	const form = "want tcp flags & (syn|ack) == syn"
	if t := p.next(); t.s != "&" || t.quoted {
		return p.errAt(t, "%s: found %s where '&' belongs", form, describe(t))
	}
	mask, err := p.flagSet(form)
	if err != nil {
		return err
	}
	if t := p.next(); t.s != "==" || t.quoted {
		return p.errAt(t, "%s: found %s where '==' belongs", form, describe(t))
	}
	vt := p.peek()
	value, err := p.flagSet(form)
	if err != nil {
		return err
	}
	if mask == 0 {
		return p.errAt(vt, "tcp flags mask is empty")
	}
	if value&^mask != 0 {
		return p.errAt(vt, "tcp flags & (%s) == %s never matches: value has flags outside the mask", mask, value)
	}
	p.r.TCPFlags = TCPFlags{Mask: mask, Value: value}
	return nil
}

// flagSet parses "syn", "0", "syn|ack" or "(syn|ack|...)".
func (p *lineParser) flagSet(form string) (TCPFlagSet, *Error) {
	t := p.next()
	if t.s == "(" && !t.quoted {
		var set TCPFlagSet
		for {
			bit, err := value(p, "a tcp flag", tcpFlagKind)
			if err != nil {
				return 0, err
			}
			set |= bit
			sep := p.next()
			if sep.s == ")" {
				return set, nil
			}
			if sep.s != "|" {
				return 0, p.errAt(sep, "%s: found %s where '|' or ')' belongs", form, describe(sep))
			}
		}
	}
	if t.eol || t.quoted {
		return 0, p.errAt(t, "%s: found %s", form, describe(t))
	}
	if t.s == "0" {
		return 0, nil
	}
	var set TCPFlagSet
	for {
		bit, ok := parseTCPFlag(t.s)
		if !ok {
			return 0, p.errAt(t, tcpFlagKind.bad, t.s)
		}
		set |= bit
		if p.peek().s != "|" {
			return set, nil
		}
		p.next()
		var err *Error
		if t, err = p.word("a tcp flag"); err != nil {
			return 0, err
		}
	}
}

func (p *lineParser) icmp(t token) *Error {
	proto := ProtoICMP
	if t.s == "icmpv6" {
		proto = ProtoICMPv6
	}
	sub, err := p.word("type or code after " + t.s)
	if err != nil {
		return err
	}
	var f field
	var dst **uint8
	var k kind[uint8]
	switch sub.s {
	case "type":
		f, dst = fICMPType, &p.r.ICMPType
		k = kind[uint8]{func(s string) (uint8, bool) { return parseICMPType(proto, s) },
			"unknown " + t.s + " type %q (want a name like echo-request or a number 0-255)"}
	case "code":
		f, dst = fICMPCode, &p.r.ICMPCode
		k = kind[uint8]{parseICMPCode, "bad " + t.s + " code %q (want 0-255)"}
	default:
		return p.errAt(sub, "unknown %s field %s (want type or code)", t.s, describe(sub))
	}
	if err := p.setProto(t, proto); err != nil {
		return err
	}
	if err := p.set(f, t, t.s+" "+sub.s); err != nil {
		return err
	}
	n, err := value(p, "an "+t.s+" "+sub.s, k)
	if err != nil {
		return err
	}
	*dst = &n
	return nil
}

func parseICMPCode(s string) (uint8, bool) {
	n, err := strconv.ParseUint(s, 10, 8)
	return uint8(n), err == nil
}

func (p *lineParser) ct(t token) *Error {
	if err := p.only(t, "state", fCtState); err != nil {
		return err
	}
	braced := false
	if p.peek().s == "{" {
		p.next()
		braced = true
	}
	var set CtState
	for {
		bit, err := value(p, "a connection state", ctStateKind)
		if err != nil {
			return err
		}
		set |= bit
		if p.peek().s != "," {
			break
		}
		p.next()
	}
	if braced {
		if c := p.next(); c.s != "}" {
			return p.errAt(c, "want '}' to close the ct state set, found %s", describe(c))
		}
	}
	p.r.CtState = set
	return nil
}
