package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Chain selects which rule list a frame is evaluated against. Every rule
// belongs to exactly one chain; a frame is only compared with the rules of
// the chain named in its Key.
type Chain uint8

// The chains. Forward is the zero value.
const (
	// Forward holds rules for transit frames: bridged between data ports
	// (bridge mode, every frame) or routed through the NAT (NAT mode, every
	// new connection).
	Forward Chain = iota
	// Input holds rules for frames addressed to the box itself, i.e. frames
	// the dataplane delivers to its host port.
	Input
	// Output holds rules for frames the box itself sends, i.e. frames
	// arriving from its host port.
	Output
	numChains
)

var chainNames = [numChains]string{Forward: "forward", Input: "input", Output: "output"}

// chainOrder is the order in which Format prints policies (nftables' order).
var chainOrder = [numChains]Chain{Input, Forward, Output}

func (c Chain) String() string {
	if c < numChains {
		return chainNames[c]
	}
	return "chain(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText implements encoding.TextMarshaler.
func (c Chain) MarshalText() ([]byte, error) {
	if c >= numChains {
		return nil, fmt.Errorf("invalid chain %d", c)
	}
	return []byte(chainNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Chain) UnmarshalText(b []byte) error {
	v, ok := parseChain(string(b))
	if !ok {
		return fmt.Errorf("unknown chain %q (want input, forward or output)", b)
	}
	*c = v
	return nil
}

func parseChain(s string) (Chain, bool) {
	for i, n := range chainNames {
		if n == s {
			return Chain(i), true
		}
	}
	return 0, false
}

// Action is what happens to a frame that matches a rule (or no rule: the
// chain's policy). The zero value is not a valid action.
type Action uint8

// The actions.
const (
	Accept Action = iota + 1
	Drop
	// Reject drops the frame and asks the dataplane to answer it: with a
	// TCP RST for TCP, with an ICMP/ICMPv6 port unreachable otherwise.
	Reject
	numActions
)

var actionNames = [numActions]string{Accept: "accept", Drop: "drop", Reject: "reject"}

func (a Action) String() string {
	if a > 0 && a < numActions {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

func (a Action) valid() bool { return a > 0 && a < numActions }

// MarshalText implements encoding.TextMarshaler.
func (a Action) MarshalText() ([]byte, error) {
	if !a.valid() {
		return nil, fmt.Errorf("invalid action %d", a)
	}
	return []byte(actionNames[a]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Action) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if n != "" && n == string(b) {
			*a = Action(i)
			return nil
		}
	}
	return fmt.Errorf("unknown action %q (want accept, drop or reject)", b)
}

// CtState is a set of connection-tracking states. A rule matches when the
// packet's state (one bit, carried in Key.CtState) is in the rule's set.
type CtState uint8

// The connection states, with nftables' bit order.
const (
	CtInvalid CtState = 1 << iota
	CtEstablished
	CtRelated
	CtNew
	CtUntracked
	ctAll = CtInvalid | CtEstablished | CtRelated | CtNew | CtUntracked
)

var ctNames = [...]string{"invalid", "established", "related", "new", "untracked"}

func (s CtState) String() string {
	if s == 0 {
		return "none"
	}
	var b strings.Builder
	for i, n := range ctNames {
		if s&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n)
		}
	}
	if rest := s &^ ctAll; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "0x%x", uint8(rest))
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler ("established,related").
func (s CtState) MarshalText() ([]byte, error) {
	if s&^ctAll != 0 {
		return nil, fmt.Errorf("invalid ct state bits 0x%x", uint8(s&^ctAll))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *CtState) UnmarshalText(b []byte) error {
	var v CtState
	for _, name := range strings.Split(string(b), ",") {
		bit, ok := parseCtState(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("unknown ct state %q (want %s)", name, strings.Join(ctNames[:], ", "))
		}
		v |= bit
	}
	*s = v
	return nil
}

func parseCtState(s string) (CtState, bool) {
	for i, n := range ctNames {
		if n == s {
			return 1 << i, true
		}
	}
	return 0, false
}

// Proto is an IP protocol number (the L4 protocol after IPv6 extension
// headers). Zero means "not set".
type Proto uint8

// Protocol numbers with special meaning in rules.
const (
	ProtoICMP   Proto = 1
	ProtoTCP    Proto = 6
	ProtoUDP    Proto = 17
	ProtoICMPv6 Proto = 58
)

var protoNames = map[Proto]string{
	1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 47: "gre", 50: "esp", 51: "ah",
	58: "icmpv6", 132: "sctp", 136: "udplite",
}

func (p Proto) String() string {
	if n, ok := protoNames[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}

// MarshalText implements encoding.TextMarshaler.
func (p Proto) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (a name or a number).
func (p *Proto) UnmarshalText(b []byte) error {
	v, ok := parseProto(string(b))
	if !ok {
		return fmt.Errorf("unknown protocol %q (want a name like tcp, udp, icmp, icmpv6 or a number 1-255)", b)
	}
	*p = v
	return nil
}

func parseProto(s string) (Proto, bool) {
	if s == "ipv6-icmp" {
		return ProtoICMPv6, true
	}
	for v, n := range protoNames {
		if n == s {
			return v, true
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n == 0 {
		return 0, false
	}
	return Proto(n), true
}

// EtherType is an Ethernet frame type (after any VLAN tag). Zero means
// "not set".
type EtherType uint16

// Ethernet types with special meaning in rules.
const (
	EtherTypeIPv4 EtherType = 0x0800
	EtherTypeARP  EtherType = 0x0806
	EtherTypeIPv6 EtherType = 0x86dd
)

var etherTypeNames = map[EtherType]string{
	0x0800: "ip", 0x0806: "arp", 0x86dd: "ip6", 0x8035: "rarp", 0x88cc: "lldp",
	0x8863: "pppoe-discovery", 0x8864: "pppoe-session", 0x888e: "eapol",
}

func (e EtherType) String() string {
	if n, ok := etherTypeNames[e]; ok {
		return n
	}
	return fmt.Sprintf("0x%04x", uint16(e))
}

// MarshalText implements encoding.TextMarshaler.
func (e EtherType) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (a name or 0xNNNN).
func (e *EtherType) UnmarshalText(b []byte) error {
	v, ok := parseEtherType(string(b))
	if !ok {
		return fmt.Errorf("unknown ether type %q (want ip, ip6, arp or a number like 0x88cc)", b)
	}
	*e = v
	return nil
}

func parseEtherType(s string) (EtherType, bool) {
	for v, n := range etherTypeNames {
		if n == s {
			return v, true
		}
	}
	n, err := strconv.ParseUint(s, 0, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return EtherType(n), true
}

// MAC is an Ethernet address.
type MAC [6]byte

func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *MAC) UnmarshalText(b []byte) error {
	v, ok := parseMAC(string(b))
	if !ok {
		return fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", b)
	}
	*m = v
	return nil
}

func parseMAC(s string) (MAC, bool) {
	var m MAC
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return m, false
	}
	for i, p := range parts {
		if len(p) != 2 {
			return m, false
		}
		n, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return m, false
		}
		m[i] = byte(n)
	}
	return m, true
}

// PortRange is an inclusive range of TCP/UDP ports; a single port has
// Lo == Hi. Its text form is "22" or "1000-2000".
type PortRange struct {
	Lo, Hi uint16
}

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// MarshalText implements encoding.TextMarshaler.
func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. It does not check that
// Lo <= Hi; validation does, with a message naming the rule.
func (r *PortRange) UnmarshalText(b []byte) error {
	v, err := parsePortRange(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

func parsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := parsePort(lo)
	if err != nil {
		return PortRange{}, err
	}
	if !isRange {
		return PortRange{a, a}, nil
	}
	b, err := parsePort(hi)
	if err != nil {
		return PortRange{}, err
	}
	return PortRange{a, b}, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bad port %q (want a number 0-65535 or a range like 1000-2000)", s)
	}
	return uint16(n), nil
}

// TCPFlagSet is a set of TCP header flags; text form "syn|ack".
type TCPFlagSet uint8

// The TCP flags.
const (
	FlagFIN TCPFlagSet = 1 << iota
	FlagSYN
	FlagRST
	FlagPSH
	FlagACK
	FlagURG
	FlagECN
	FlagCWR
)

var tcpFlagNames = [8]string{"fin", "syn", "rst", "psh", "ack", "urg", "ecn", "cwr"}

func (f TCPFlagSet) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range tcpFlagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler.
func (f TCPFlagSet) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *TCPFlagSet) UnmarshalText(b []byte) error {
	if string(b) == "0" {
		*f = 0
		return nil
	}
	var v TCPFlagSet
	for _, name := range strings.Split(string(b), "|") {
		bit, ok := parseTCPFlag(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("unknown tcp flag %q (want %s)", name, strings.Join(tcpFlagNames[:], ", "))
		}
		v |= bit
	}
	*f = v
	return nil
}

func parseTCPFlag(s string) (TCPFlagSet, bool) {
	for i, n := range tcpFlagNames {
		if n == s {
			return 1 << i, true
		}
	}
	return 0, false
}

// TCPFlags matches (flags & Mask) == Value, like nftables'
// "tcp flags & (syn|ack) == syn". A zero Mask means "not set".
type TCPFlags struct {
	Mask  TCPFlagSet `json:"mask"`
	Value TCPFlagSet `json:"value"`
}

// Match is the set of conditions of a rule; all set fields must hold.
// Unset fields (zero, nil or an invalid netip.Prefix) match anything.
type Match struct {
	// InPort and OutPort are port names, mapped to port ids at compile time.
	InPort  string `json:"iif,omitempty"`
	OutPort string `json:"oif,omitempty"`
	SrcMAC  *MAC   `json:"ether_saddr,omitempty"`
	DstMAC  *MAC   `json:"ether_daddr,omitempty"`
	// EtherType is only needed where no address implies it: an IPv4
	// prefix implies ip, an IPv6 prefix ip6.
	EtherType EtherType `json:"ether_type,omitempty"`
	// VLAN matches the VLAN id of tagged frames (0-4095).
	VLAN *uint16 `json:"vlan_id,omitempty"`
	// SrcIP and DstIP are IPv4 or IPv6 prefixes; the family follows from
	// the prefix.
	SrcIP netip.Prefix `json:"saddr,omitzero"`
	DstIP netip.Prefix `json:"daddr,omitzero"`
	Proto Proto        `json:"l4proto,omitempty"`
	// SrcPort and DstPort need Proto tcp or udp.
	SrcPort  *PortRange `json:"sport,omitempty"`
	DstPort  *PortRange `json:"dport,omitempty"`
	TCPFlags TCPFlags   `json:"tcp_flags,omitzero"`
	// ICMPType and ICMPCode need Proto icmp or icmpv6.
	ICMPType *uint8  `json:"icmp_type,omitempty"`
	ICMPCode *uint8  `json:"icmp_code,omitempty"`
	CtState  CtState `json:"ct_state,omitempty"`
}

// Rule is one line of a rule set: a chain, conditions, a verdict and flags.
// Its priority is its position in Ruleset.Rules (first match wins).
type Rule struct {
	Chain Chain `json:"chain,omitempty"`
	Match
	Action Action `json:"action"`
	// Counter keeps packet/byte/last-hit counters for the rule.
	Counter bool `json:"counter,omitempty"`
	// Log sends a (rate-limited) log record for each match.
	Log     bool   `json:"log,omitempty"`
	Comment string `json:"comment,omitempty"`
	// Line is the rule's line in the text it was parsed from, 0 otherwise.
	Line int `json:"-"`
}

// Ruleset is a complete rule configuration: policies and ordered rules.
type Ruleset struct {
	// Policy is the action for frames no rule of a chain matches; chains
	// not listed accept.
	Policy map[Chain]Action `json:"policy,omitempty"`
	Rules  []Rule           `json:"rules"`
}

// PolicyFor returns the policy of chain c (Accept unless set).
func (rs *Ruleset) PolicyFor(c Chain) Action {
	if a, ok := rs.Policy[c]; ok {
		return a
	}
	return Accept
}

// icmpTypeNames names ICMP (index 0) and ICMPv6 (index 1) types.
var icmpTypeNames = [2]map[uint8]string{
	{
		0: "echo-reply", 3: "destination-unreachable", 4: "source-quench", 5: "redirect",
		8: "echo-request", 9: "router-advertisement", 10: "router-solicitation",
		11: "time-exceeded", 12: "parameter-problem", 13: "timestamp-request",
		14: "timestamp-reply", 15: "info-request", 16: "info-reply",
		17: "address-mask-request", 18: "address-mask-reply",
	},
	{
		1: "destination-unreachable", 2: "packet-too-big", 3: "time-exceeded",
		4: "parameter-problem", 128: "echo-request", 129: "echo-reply",
		130: "mld-listener-query", 131: "mld-listener-report", 132: "mld-listener-done",
		133: "nd-router-solicit", 134: "nd-router-advert", 135: "nd-neighbor-solicit",
		136: "nd-neighbor-advert", 137: "nd-redirect", 138: "router-renumbering",
		141: "ind-neighbor-solicit", 142: "ind-neighbor-advert", 143: "mld2-listener-report",
	},
}

func icmpFamily(p Proto) int {
	if p == ProtoICMPv6 {
		return 1
	}
	return 0
}

func icmpTypeString(p Proto, t uint8) string {
	if n, ok := icmpTypeNames[icmpFamily(p)][t]; ok {
		return n
	}
	return strconv.Itoa(int(t))
}

func parseICMPType(p Proto, s string) (uint8, bool) {
	for v, n := range icmpTypeNames[icmpFamily(p)] {
		if n == s {
			return v, true
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, false
	}
	return uint8(n), true
}
