package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
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
func (c *Chain) UnmarshalText(b []byte) error { return chainKind.unmarshal(c, b) }

func parseChain(s string) (Chain, bool) {
	if i := slices.Index(chainNames[:], s); i >= 0 {
		return Chain(i), true
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
	if i := slices.Index(actionNames[:], string(b)); i > 0 {
		*a = Action(i)
		return nil
	}
	return fmt.Errorf("unknown action %q (want accept, drop or reject)", b)
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
