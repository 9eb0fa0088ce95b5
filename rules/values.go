package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// kind is how one kind of value is read from a word, by Parse and by
// UnmarshalText alike, so that both say the same about a bad word: parse,
// and bad, the error's format with one verb, %q, for the word.
type kind[T any] struct {
	parse func(string) (T, bool)
	bad   string
}

// The kinds of words that rules name by themselves.
var (
	chainKind     = kind[Chain]{parseChain, "unknown chain %q (want input, forward or output)"}
	ctStateKind   = kind[CtState]{parseCtState, "unknown ct state %q (want " + strings.Join(ctNames[:], ", ") + ")"}
	protoKind     = kind[Proto]{parseProto, "unknown protocol %q (want a name like tcp, udp, icmp, icmpv6 or a number 1-255)"}
	etherTypeKind = kind[EtherType]{parseEtherType, "unknown ether type %q (want ip, ip6, arp or a number like 0x88cc)"}
	macKind       = kind[MAC]{parseMAC, "bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)"}
	tcpFlagKind   = kind[TCPFlagSet]{parseTCPFlag, "unknown tcp flag %q (want " + strings.Join(tcpFlagNames[:], ", ") + ")"}
)

// unmarshal sets *v to the value of word b (UnmarshalText).
func (k kind[T]) unmarshal(v *T, b []byte) error {
	x, ok := k.parse(string(b))
	if !ok {
		return fmt.Errorf(k.bad, b)
	}
	*v = x
	return nil
}

// bitSet is a set of flags with a name each, the name of bit i at i.
type bitSet interface{ ~uint8 }

// bit returns the bit that names has s for.
func bit[T bitSet](names []string, s string) (T, bool) {
	if i := slices.Index(names, s); i >= 0 {
		return 1 << i, true
	}
	return 0, false
}

// formatBits returns the names of the bits of v, joined by sep.
func formatBits[T bitSet](v T, names []string, sep string) string {
	var b strings.Builder
	for i, n := range names {
		if v&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// parseBits reads the names of k, joined by sep, into a set.
func parseBits[T bitSet](b []byte, sep string, k kind[T]) (T, error) {
	var v T
	for _, name := range strings.Split(string(b), sep) {
		x, ok := k.parse(strings.TrimSpace(name))
		if !ok {
			return 0, fmt.Errorf(k.bad, name)
		}
		v |= x
	}
	return v, nil
}

// parseNumbered returns the value names has for s, or s as a number
// (nonzero, of size bits, in base as strconv.ParseUint reads it).
func parseNumbered[T ~uint8 | ~uint16](names map[T]string, s string, base, size int) (T, bool) {
	for v, n := range names {
		if n == s {
			return v, true
		}
	}
	n, err := strconv.ParseUint(s, base, size)
	if err != nil || n == 0 {
		return 0, false
	}
	return T(n), true
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
	str := formatBits(s, ctNames[:], ",")
	if rest := s &^ ctAll; rest != 0 {
		if str != "" {
			str += ","
		}
		str += fmt.Sprintf("0x%x", uint8(rest))
	}
	return str
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
	v, err := parseBits(b, ",", ctStateKind)
	if err == nil {
		*s = v
	}
	return err
}

func parseCtState(s string) (CtState, bool) { return bit[CtState](ctNames[:], s) }

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
func (p *Proto) UnmarshalText(b []byte) error { return protoKind.unmarshal(p, b) }

func parseProto(s string) (Proto, bool) {
	if s == "ipv6-icmp" {
		return ProtoICMPv6, true
	}
	return parseNumbered(protoNames, s, 10, 8)
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
func (e *EtherType) UnmarshalText(b []byte) error { return etherTypeKind.unmarshal(e, b) }

func parseEtherType(s string) (EtherType, bool) { return parseNumbered(etherTypeNames, s, 0, 16) }

// MAC is an Ethernet address.
type MAC [6]byte

func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *MAC) UnmarshalText(b []byte) error { return macKind.unmarshal(m, b) }

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
	return formatBits(f, tcpFlagNames[:], "|")
}

// MarshalText implements encoding.TextMarshaler.
func (f TCPFlagSet) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *TCPFlagSet) UnmarshalText(b []byte) error {
	if string(b) == "0" {
		*f = 0
		return nil
	}
	v, err := parseBits(b, "|", tcpFlagKind)
	if err == nil {
		*f = v
	}
	return err
}

func parseTCPFlag(s string) (TCPFlagSet, bool) { return bit[TCPFlagSet](tcpFlagNames[:], s) }

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
