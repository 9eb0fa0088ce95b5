package rules

import (
	"fmt"
	"hash"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
)

// Error is a problem with one rule (or one line of rule text). Its message
// names the place (line:col for text, rules[i].field for JSON-shaped rules)
// and the field.
type Error struct {
	// Line and Col are 1-based positions in rule text; 0 when unknown
	// (rules decoded from JSON). Col is counted in characters.
	Line, Col int
	// Rule is the index of the rule in Ruleset.Rules, -1 when the error is
	// not about a rule (e.g. a policy line).
	Rule int
	// Field is the JSON name of the offending field ("dport"), "" if none.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
	case e.Line > 0 && e.Rule >= 0:
		return fmt.Sprintf("line %d (rule %d): %s", e.Line, e.Rule, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.Rule >= 0 && e.Field != "":
		return fmt.Sprintf("rules[%d].%s: %s", e.Rule, e.Field, e.Msg)
	case e.Rule >= 0:
		return fmt.Sprintf("rules[%d]: %s", e.Rule, e.Msg)
	case e.Field != "":
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return e.Msg
}

// ErrorList is every problem found in a rule set, in input order.
type ErrorList []*Error

// maxErrors bounds how many problems one Parse or Validate reports.
const maxErrors = 50

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// field identifies a rule field for error positions and JSON paths.
type field uint8

const (
	fChain field = iota
	fInPort
	fOutPort
	fSrcMAC
	fDstMAC
	fEtherType
	fVLAN
	fSrcIP
	fDstIP
	fProto
	fSrcPort
	fDstPort
	fTCPFlags
	fICMPType
	fICMPCode
	fCtState
	fAction
	fComment
	numFields
)

var fieldJSON = [numFields]string{
	fChain: "chain", fInPort: "iif", fOutPort: "oif", fSrcMAC: "ether_saddr",
	fDstMAC: "ether_daddr", fEtherType: "ether_type", fVLAN: "vlan_id",
	fSrcIP: "saddr", fDstIP: "daddr", fProto: "l4proto", fSrcPort: "sport",
	fDstPort: "dport", fTCPFlags: "tcp_flags", fICMPType: "icmp_type",
	fICMPCode: "icmp_code", fCtState: "ct_state", fAction: "action", fComment: "comment",
}

type fieldError struct {
	f   field
	msg string
}

// family is an address family a match is restricted to.
type family uint8

const (
	famAny family = iota
	famIPv4
	famIPv6
	famOther // a non-IP ether type
)

func etherFamily(e EtherType) family {
	switch e {
	case 0:
		return famAny
	case EtherTypeIPv4:
		return famIPv4
	case EtherTypeIPv6:
		return famIPv6
	}
	return famOther
}

// Text names of fields as a user writes them, for messages.
func srcIPName(m *Match) string {
	if m.SrcIP.Addr().Is4() {
		return "ip saddr"
	}
	return "ip6 saddr"
}

func dstIPName(m *Match) string {
	if m.DstIP.Addr().Is4() {
		return "ip daddr"
	}
	return "ip6 daddr"
}

func ipKeyword(v4 bool) string {
	if v4 {
		return "ip"
	}
	return "ip6"
}

func prefixFamily(m *Match) (family, string) {
	if m.SrcIP.IsValid() {
		if m.SrcIP.Addr().Is4() {
			return famIPv4, srcIPName(m)
		}
		return famIPv6, srcIPName(m)
	}
	if m.DstIP.IsValid() {
		if m.DstIP.Addr().Is4() {
			return famIPv4, dstIPName(m)
		}
		return famIPv6, dstIPName(m)
	}
	return famAny, ""
}

// effectiveEtherType is the ether type a match requires: the explicit one
// or the one its addresses imply.
func (m *Match) effectiveEtherType() EtherType {
	if m.EtherType != 0 {
		return m.EtherType
	}
	switch fam, _ := prefixFamily(m); fam {
	case famIPv4:
		return EtherTypeIPv4
	case famIPv6:
		return EtherTypeIPv6
	}
	return 0
}

// checkRule reports everything wrong with one rule on its own.
func checkRule(r *Rule) []fieldError {
	var errs []fieldError
	add := func(f field, format string, args ...any) {
		errs = append(errs, fieldError{f, fmt.Sprintf(format, args...)})
	}
	m := &r.Match
	if r.Chain >= numChains {
		add(fChain, "unknown chain %d", r.Chain)
	}
	if !r.Action.valid() {
		add(fAction, "missing or invalid verdict: want accept, drop or reject")
	}
	if m.InPort != "" {
		if msg := checkPortName(m.InPort); msg != "" {
			add(fInPort, "iif: %s", msg)
		}
	}
	if m.OutPort != "" {
		if msg := checkPortName(m.OutPort); msg != "" {
			add(fOutPort, "oif: %s", msg)
		}
	}
	if m.VLAN != nil && *m.VLAN > 4095 {
		add(fVLAN, "vlan id %d out of range 0-4095", *m.VLAN)
	}
	if m.EtherType != 0 && m.EtherType < 0x0600 {
		add(fEtherType, "ether type 0x%04x is a length, not a type (want 0x0600 or more)", uint16(m.EtherType))
	}

	// Address families.
	checkPrefix := func(f field, name string, p netip.Prefix) {
		if p.IsValid() && p.Masked() != p {
			add(f, "%s %s has host bits set (did you mean %s?)", ipKeyword(p.Addr().Is4()), name, p.Masked())
		}
	}
	checkPrefix(fSrcIP, "saddr", m.SrcIP)
	checkPrefix(fDstIP, "daddr", m.DstIP)
	if m.SrcIP.IsValid() && m.DstIP.IsValid() && m.SrcIP.Addr().Is4() != m.DstIP.Addr().Is4() {
		add(fDstIP, "%s conflicts with %s: one rule matches one address family", dstIPName(m), srcIPName(m))
	}
	fam, famBy := prefixFamily(m)
	if m.EtherType != 0 && fam != famAny && etherFamily(m.EtherType) != fam {
		add(fEtherType, "ether type %s conflicts with %s", m.EtherType, famBy)
	}
	if fam == famAny {
		fam, famBy = etherFamily(m.EtherType), "ether type "+m.EtherType.String()
	}

	// Layer 4.
	switch {
	case m.Proto != 0 && fam == famOther:
		add(fProto, "meta l4proto %s needs IP traffic but the rule matches %s", m.Proto, famBy)
	case m.Proto == ProtoICMP && fam == famIPv6:
		f := fProto
		if m.ICMPType != nil || m.ICMPCode != nil {
			f = fICMPType
		}
		add(f, "icmp cannot match IPv6 traffic (%s): use icmpv6", famBy)
	case m.Proto == ProtoICMPv6 && fam == famIPv4:
		f := fProto
		if m.ICMPType != nil || m.ICMPCode != nil {
			f = fICMPType
		}
		add(f, "icmpv6 cannot match IPv4 traffic (%s): use icmp", famBy)
	}
	for _, p := range []struct {
		f    field
		name string
		r    *PortRange
	}{{fSrcPort, "sport", m.SrcPort}, {fDstPort, "dport", m.DstPort}} {
		if p.r == nil {
			continue
		}
		if m.Proto != ProtoTCP && m.Proto != ProtoUDP {
			add(p.f, "%s needs l4proto tcp or udp (have %s); write tcp %s or udp %s", p.name, protoDesc(m.Proto), p.name, p.name)
		}
		if p.r.Lo > p.r.Hi {
			add(p.f, "%s range %d-%d is reversed (want %d-%d)", p.name, p.r.Lo, p.r.Hi, p.r.Hi, p.r.Lo)
		}
	}
	if m.TCPFlags.Mask != 0 || m.TCPFlags.Value != 0 {
		switch {
		case m.Proto != ProtoTCP:
			add(fTCPFlags, "tcp flags need l4proto tcp (have %s)", protoDesc(m.Proto))
		case m.TCPFlags.Mask == 0:
			add(fTCPFlags, "tcp flags value %s without a mask", m.TCPFlags.Value)
		case m.TCPFlags.Value&^m.TCPFlags.Mask != 0:
			add(fTCPFlags, "tcp flags & (%s) == %s never matches: value has flags outside the mask", m.TCPFlags.Mask, m.TCPFlags.Value)
		}
	}
	if (m.ICMPType != nil || m.ICMPCode != nil) && m.Proto != ProtoICMP && m.Proto != ProtoICMPv6 {
		f := fICMPType
		if m.ICMPType == nil {
			f = fICMPCode
		}
		add(f, "icmp type/code needs l4proto icmp or icmpv6 (have %s)", protoDesc(m.Proto))
	}
	if m.CtState&^ctAll != 0 {
		add(fCtState, "unknown ct state bits 0x%x", uint8(m.CtState&^ctAll))
	}
	if msg := checkComment(r.Comment); msg != "" {
		add(fComment, "comment: %s", msg)
	}
	return errs
}

func protoDesc(p Proto) string {
	if p == 0 {
		return "none"
	}
	return p.String()
}

const maxPortName = 15 // IFNAMSIZ - 1

func checkPortName(s string) string {
	if len(s) > maxPortName {
		return fmt.Sprintf("port name %q longer than %d bytes", s, maxPortName)
	}
	for _, c := range s {
		if !isNameChar(c) {
			return fmt.Sprintf("port name %q has invalid character %q (want letters, digits, '_', '.', '-')", s, c)
		}
	}
	return ""
}

func isNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

const maxComment = 128

func checkComment(s string) string {
	if len(s) > maxComment {
		return fmt.Sprintf("longer than %d bytes", maxComment)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return fmt.Sprintf("control character %q not allowed", c)
		}
	}
	return ""
}

// Validate checks a rule set without port names: every rule on its own,
// the policies, and duplicates (two rules of a chain with the same match:
// the second could never match). Parse runs the same checks. The error is
// an ErrorList.
func Validate(rs *Ruleset) error {
	var errs ErrorList
	v := newValidator(len(rs.Rules))
	for i := range rs.Rules {
		r := &rs.Rules[i]
		for _, fe := range checkRule(r) {
			errs = append(errs, ruleError(r, i, fe.f, fe.msg))
		}
		if e := v.dup(rs, i); e != nil {
			errs = append(errs, e)
		}
		if len(errs) >= maxErrors {
			return errs
		}
	}
	errs = append(errs, checkPolicies(rs)...)
	return errs.err()
}

func checkPolicies(rs *Ruleset) ErrorList {
	var errs ErrorList
	for _, c := range chainOrder {
		a, ok := rs.Policy[c]
		if ok && a != Accept && a != Drop {
			errs = append(errs, &Error{Rule: -1, Field: "policy." + c.String(),
				Msg: fmt.Sprintf("policy %s %s: a policy is accept or drop", c, a)})
		}
	}
	for c := range rs.Policy {
		if c >= numChains {
			errs = append(errs, &Error{Rule: -1, Field: "policy", Msg: fmt.Sprintf("unknown chain %d", c)})
		}
	}
	return errs
}

func ruleError(r *Rule, i int, f field, msg string) *Error {
	return &Error{Line: r.Line, Rule: i, Field: fieldJSON[f], Msg: msg}
}

// validator finds rules whose match repeats an earlier one in the same
// chain. It keys on a 128-bit hash of the canonical text, which keeps it
// small for large rule sets.
type validator struct {
	seen map[[16]byte]int
	buf  []byte
	h    hash.Hash
}

func newValidator(n int) *validator {
	return &validator{seen: make(map[[16]byte]int, n), h: fnv.New128a()}
}

func (v *validator) dup(rs *Ruleset, i int) *Error {
	r := &rs.Rules[i]
	v.buf = appendIdentity(v.buf[:0], r, false)
	v.h.Reset()
	v.h.Write(v.buf)
	var k [16]byte
	v.h.Sum(k[:0])
	j, ok := v.seen[k]
	if !ok {
		v.seen[k] = i
		return nil
	}
	first := &rs.Rules[j]
	where := "rule " + strconv.Itoa(j)
	if first.Line > 0 {
		where = "line " + strconv.Itoa(first.Line)
	}
	msg := fmt.Sprintf("duplicate of %s", where)
	if first.Action != r.Action {
		msg = fmt.Sprintf("never matches: %s has the same match with verdict %s", where, first.Action)
	}
	return &Error{Line: r.Line, Rule: i, Msg: msg}
}
