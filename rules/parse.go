package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a rule set in text form (see the package documentation).
// Each rule is checked as Validate would, except for port names, which
// only Compile knows. The error is an ErrorList whose entries read
// "line:col: message".
func Parse(src string) (*Ruleset, error) {
	rs := &Ruleset{Rules: []Rule{}}
	var errs ErrorList
	policyLine := map[Chain]int{}
	chain := Forward
	v := newValidator(0)
	for lineNo, text := range strings.Split(src, "\n") {
		lineNo++
		toks, err := tokenize(lineNo, text)
		if err != nil {
			errs = append(errs, err)
		} else if len(toks) > 0 {
			p := &lineParser{line: lineNo, toks: toks, end: utf8.RuneCountInString(text) + 1, rule: -1}
			switch toks[0].s {
			case "policy":
				err = p.policy(rs, policyLine)
			case "chain":
				chain, err = p.chain()
			default:
				p.rule = len(rs.Rules)
				p.r.Chain = chain
				p.r.Line = lineNo
				err = p.parseRule()
				if err == nil {
					err = p.check()
				}
				if err == nil {
					rs.Rules = append(rs.Rules, p.r)
					err = v.dup(rs, p.rule)
					if err != nil {
						err.Col = toks[0].col
					}
				}
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) >= maxErrors {
			break
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return rs, nil
}

type token struct {
	s      string
	col    int // 1-based, in characters
	quoted bool
	eol    bool // the end of the line, not a real token
}

// tokenize splits one line into words, quoted strings and the punctuation
// "& ( ) | , { } ==". A '#' outside a string starts a comment.
func tokenize(line int, text string) ([]token, *Error) {
	var toks []token
	col := 1
	i := 0
	errAt := func(col int, format string, args ...any) *Error {
		return &Error{Line: line, Col: col, Rule: -1, Msg: fmt.Sprintf(format, args...)}
	}
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
			col++
		case c == '#':
			return toks, nil
		case c == '"':
			start := col
			var b strings.Builder
			i++
			col++
			for {
				if i >= len(text) {
					return nil, errAt(start, "unterminated string: add a closing '\"'")
				}
				r, n := utf8.DecodeRuneInString(text[i:])
				i += n
				col++
				if r == '"' {
					break
				}
				if r == '\\' {
					if i >= len(text) || (text[i] != '"' && text[i] != '\\') {
						return nil, errAt(col-1, "unknown escape in string: only \\\" and \\\\ are allowed")
					}
					r = rune(text[i])
					i++
					col++
				}
				b.WriteRune(r)
			}
			toks = append(toks, token{s: b.String(), col: start, quoted: true})
		case strings.IndexByte("&()|,{}", c) >= 0:
			toks = append(toks, token{s: text[i : i+1], col: col})
			i++
			col++
		case c == '=':
			if i+1 >= len(text) || text[i+1] != '=' {
				return nil, errAt(col, "want '==' here")
			}
			toks = append(toks, token{s: "==", col: col})
			i += 2
			col += 2
		case c == '!':
			return nil, errAt(col, "negation ('!=') is not supported")
		default:
			start, startCol := i, col
			for i < len(text) && strings.IndexByte(" \t\r#\"&()|,{}=!", text[i]) < 0 {
				_, n := utf8.DecodeRuneInString(text[i:])
				i += n
				col++
			}
			toks = append(toks, token{s: text[start:i], col: startCol})
		}
	}
	return toks, nil
}

// lineParser parses one line.
type lineParser struct {
	line int
	toks []token
	i    int
	end  int // column just past the end of the line
	rule int // index of the rule being parsed, -1 for other lines

	r   Rule
	pos [numFields]int // column where each field was given, 0 if not
}

func (p *lineParser) next() token {
	if p.i >= len(p.toks) {
		return token{col: p.end, eol: true}
	}
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *lineParser) peek() token {
	if p.i >= len(p.toks) {
		return token{col: p.end, eol: true}
	}
	return p.toks[p.i]
}

func (p *lineParser) errAt(t token, format string, args ...any) *Error {
	return &Error{Line: p.line, Col: t.col, Rule: p.rule, Msg: fmt.Sprintf(format, args...)}
}

// word returns the next token, which must be a word; what names it in the
// error ("a port name").
func (p *lineParser) word(what string) (token, *Error) {
	t := p.next()
	switch {
	case t.eol:
		return t, p.errAt(t, "missing %s at end of line", what)
	case t.quoted || len(t.s) == 1 && strings.Contains("&()|,{}", t.s) || t.s == "==":
		return t, p.errAt(t, "want %s, found %s", what, describe(t))
	}
	return t, nil
}

func describe(t token) string {
	if t.eol {
		return "end of line"
	}
	if t.quoted {
		return strconv.Quote(t.s)
	}
	return "'" + t.s + "'"
}

// expectEOL reports tokens left after a complete line.
func (p *lineParser) expectEOL(after string) *Error {
	if t := p.next(); !t.eol {
		return p.errAt(t, "unexpected %s after %s", describe(t), after)
	}
	return nil
}

func (p *lineParser) policy(rs *Ruleset, seen map[Chain]int) *Error {
	p.next()
	t, err := p.word("a chain (input, forward or output)")
	if err != nil {
		return err
	}
	c, ok := parseChain(t.s)
	if !ok {
		return p.errAt(t, "unknown chain %q (want input, forward or output)", t.s)
	}
	at, err := p.word("a policy (accept or drop)")
	if err != nil {
		return err
	}
	var a Action
	switch at.s {
	case "accept":
		a = Accept
	case "drop":
		a = Drop
	default:
		return p.errAt(at, "unknown policy %q (want accept or drop)", at.s)
	}
	if first, dup := seen[c]; dup {
		return p.errAt(t, "policy for chain %s given twice (first on line %d)", c, first)
	}
	if err := p.expectEOL("the policy"); err != nil {
		return err
	}
	seen[c] = p.line
	if rs.Policy == nil {
		rs.Policy = map[Chain]Action{}
	}
	rs.Policy[c] = a
	return nil
}

func (p *lineParser) chain() (Chain, *Error) {
	p.next()
	t, err := p.word("a chain (input, forward or output)")
	if err != nil {
		return 0, err
	}
	c, ok := parseChain(t.s)
	if !ok {
		return 0, p.errAt(t, "unknown chain %q (want input, forward or output)", t.s)
	}
	return c, p.expectEOL("the chain name")
}

// set records that field f is given at token t; a field is given once.
func (p *lineParser) set(f field, t token, name string) *Error {
	if first := p.pos[f]; first != 0 {
		return p.errAt(t, "%s given twice (first at col %d)", name, first)
	}
	p.pos[f] = t.col
	return nil
}

// setProto records the L4 protocol implied or named at token t.
func (p *lineParser) setProto(t token, proto Proto) *Error {
	if p.r.Proto != 0 && p.r.Proto != proto {
		return p.errAt(t, "%s conflicts with %s at col %d: a rule matches one protocol", proto, p.r.Proto, p.pos[fProto])
	}
	if p.r.Proto == 0 {
		p.r.Proto = proto
		p.pos[fProto] = t.col
	}
	return nil
}

// setEther records the ether type implied or named at token t.
func (p *lineParser) setEther(t token, e EtherType) *Error {
	if p.r.EtherType != 0 && p.r.EtherType != e {
		return p.errAt(t, "ether type %s conflicts with %s at col %d", e, p.r.EtherType, p.pos[fEtherType])
	}
	if p.r.EtherType == 0 {
		p.r.EtherType = e
		p.pos[fEtherType] = t.col
	}
	return nil
}

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
		f, dst := fSrcMAC, &p.r.SrcMAC
		if sub.s == "daddr" {
			f, dst = fDstMAC, &p.r.DstMAC
		}
		if err := p.set(f, t, "ether "+sub.s); err != nil {
			return err
		}
		v, err := p.word("a MAC address")
		if err != nil {
			return err
		}
		mac, ok := parseMAC(v.s)
		if !ok {
			return p.errAt(v, "bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", v.s)
		}
		*dst = &mac
		return nil
	case "type":
		v, err := p.word("an ether type")
		if err != nil {
			return err
		}
		e, ok := parseEtherType(v.s)
		if !ok {
			return p.errAt(v, "unknown ether type %q (want ip, ip6, arp or a number like 0x88cc)", v.s)
		}
		return p.setEther(t, e)
	}
	return p.errAt(sub, "unknown ether field %s (want saddr, daddr or type)", describe(sub))
}

func (p *lineParser) vlan(t token) *Error {
	sub, err := p.word("id after vlan")
	if err != nil {
		return err
	}
	if sub.s != "id" {
		return p.errAt(sub, "unknown vlan field %s (want id)", describe(sub))
	}
	if err := p.set(fVLAN, t, "vlan id"); err != nil {
		return err
	}
	v, err := p.word("a VLAN id")
	if err != nil {
		return err
	}
	n, perr := strconv.ParseUint(v.s, 10, 16)
	if perr != nil || n > 4095 {
		return p.errAt(v, "bad vlan id %q (want 0-4095)", v.s)
	}
	id := uint16(n)
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
		f, dst := fSrcIP, &p.r.SrcIP
		if sub.s == "daddr" {
			f, dst = fDstIP, &p.r.DstIP
		}
		if err := p.set(f, t, t.s+" "+sub.s); err != nil {
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
	v, err := p.word("a protocol")
	if err != nil {
		return err
	}
	proto, ok := parseProto(v.s)
	if !ok {
		return p.errAt(v, "unknown protocol %q (want a name like tcp, udp, icmp, icmpv6 or a number 1-255)", v.s)
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
		v, err := p.word("an ether type")
		if err != nil {
			return err
		}
		e, ok := parseEtherType(v.s)
		if !ok {
			return p.errAt(v, "unknown ether type %q (want ip, ip6, arp or a number like 0x88cc)", v.s)
		}
		return p.setEther(t, e)
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
		f, dst := fSrcPort, &p.r.SrcPort
		if sub.s == "dport" {
			f, dst = fDstPort, &p.r.DstPort
		}
		if err := p.setProto(t, proto); err != nil {
			return err
		}
		if err := p.set(f, t, t.s+" "+sub.s); err != nil {
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
			f, err := p.word("a tcp flag")
			if err != nil {
				return 0, err
			}
			bit, ok := parseTCPFlag(f.s)
			if !ok {
				return 0, p.errAt(f, "unknown tcp flag %q (want %s)", f.s, strings.Join(tcpFlagNames[:], ", "))
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
			return 0, p.errAt(t, "unknown tcp flag %q (want %s)", t.s, strings.Join(tcpFlagNames[:], ", "))
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
	switch sub.s {
	case "type":
		if err := p.setProto(t, proto); err != nil {
			return err
		}
		if err := p.set(fICMPType, t, t.s+" type"); err != nil {
			return err
		}
		v, err := p.word("an " + t.s + " type")
		if err != nil {
			return err
		}
		n, ok := parseICMPType(proto, v.s)
		if !ok {
			return p.errAt(v, "unknown %s type %q (want a name like echo-request or a number 0-255)", t.s, v.s)
		}
		p.r.ICMPType = &n
		return nil
	case "code":
		if err := p.setProto(t, proto); err != nil {
			return err
		}
		if err := p.set(fICMPCode, t, t.s+" code"); err != nil {
			return err
		}
		v, err := p.word("an " + t.s + " code")
		if err != nil {
			return err
		}
		n, perr := strconv.ParseUint(v.s, 10, 8)
		if perr != nil {
			return p.errAt(v, "bad %s code %q (want 0-255)", t.s, v.s)
		}
		c := uint8(n)
		p.r.ICMPCode = &c
		return nil
	}
	return p.errAt(sub, "unknown %s field %s (want type or code)", t.s, describe(sub))
}

func (p *lineParser) ct(t token) *Error {
	sub, err := p.word("state after ct")
	if err != nil {
		return err
	}
	if sub.s != "state" {
		return p.errAt(sub, "unknown ct field %s (want state)", describe(sub))
	}
	if err := p.set(fCtState, t, "ct state"); err != nil {
		return err
	}
	braced := false
	if p.peek().s == "{" {
		p.next()
		braced = true
	}
	var set CtState
	for {
		v, err := p.word("a connection state")
		if err != nil {
			return err
		}
		bit, ok := parseCtState(v.s)
		if !ok {
			return p.errAt(v, "unknown ct state %q (want %s)", v.s, strings.Join(ctNames[:], ", "))
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

// check runs the semantic checks on the parsed rule, pointing each error
// at the column of its field, and then drops words implied by others.
func (p *lineParser) check() *Error {
	if errs := checkRule(&p.r); len(errs) > 0 {
		fe := errs[0]
		col := p.pos[fe.f]
		if col == 0 {
			col = p.toks[0].col
		}
		return &Error{Line: p.line, Col: col, Rule: p.rule, Field: fieldJSON[fe.f], Msg: fe.msg}
	}
	if fam, _ := prefixFamily(&p.r.Match); fam != famAny && etherFamily(p.r.EtherType) == fam {
		p.r.EtherType = 0
	}
	return nil
}
