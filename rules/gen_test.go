package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
)

// Random rule sets and keys for differential tests and benchmarks. Values
// come from small pools so that rules overlap and keys hit them, which is
// where first-match order matters.

var testPorts = map[string]uint16{"lan0": 1, "lan1": 2, "wan0": 3, "host0": 7}

var (
	poolPortNames = []string{"lan0", "lan1", "wan0", "host0"}
	poolMACs      = []MAC{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	poolV4        = []netip.Addr{netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("10.1.2.0"), netip.MustParseAddr("192.168.1.128")}
	poolV6        = []netip.Addr{netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8:0:1::"), netip.MustParseAddr("fe80::")}
	poolL4Ports   = []uint16{0, 1, 22, 53, 80, 443, 1000, 1023, 1024, 2000, 8080, 65535}
	poolProtos    = []Proto{ProtoTCP, ProtoUDP, ProtoICMP, ProtoICMPv6, 47}
	poolVLANs     = []uint16{0, 5, 4095}
	poolFlags     = []TCPFlagSet{FlagSYN, FlagACK, FlagFIN, FlagRST}
	poolEther     = []EtherType{EtherTypeIPv4, EtherTypeIPv6, EtherTypeARP}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func ptr[T any](v T) *T { return &v }

// genConfig sets how likely each field is in a random rule.
type genConfig struct {
	p        float64 // probability of each optional field
	maxChain int     // chains used: 1 = forward only
}

func randPortRange(r *rand.Rand) *PortRange {
	a, b := pick(r, poolL4Ports), pick(r, poolL4Ports)
	if r.IntN(3) == 0 {
		b = a
	}
	if a > b {
		a, b = b, a
	}
	return &PortRange{a, b}
}

func randPrefix(r *rand.Rand, v4 bool) netip.Prefix {
	if v4 {
		return netip.PrefixFrom(pick(r, poolV4), pick(r, []int{0, 8, 16, 24, 25, 31, 32})).Masked()
	}
	return netip.PrefixFrom(pick(r, poolV6), pick(r, []int{0, 16, 32, 48, 64, 65, 127, 128})).Masked()
}

func randRule(r *rand.Rand, cfg genConfig) Rule {
	var ru Rule
	on := func() bool { return r.Float64() < cfg.p }
	ru.Chain = Chain(r.IntN(cfg.maxChain))
	if on() {
		ru.InPort = pick(r, poolPortNames)
	}
	if on() {
		ru.OutPort = pick(r, poolPortNames)
	}
	if on() {
		ru.SrcMAC = ptr(pick(r, poolMACs))
	}
	if on() {
		ru.DstMAC = ptr(pick(r, poolMACs))
	}
	if on() {
		ru.VLAN = ptr(pick(r, poolVLANs))
	}
	fam := r.IntN(4) // 0 any, 1 v4, 2 v6, 3 explicit ether type
	switch fam {
	case 1, 2:
		if on() || !on() && r.IntN(2) == 0 {
			ru.SrcIP = randPrefix(r, fam == 1)
		}
		if on() {
			ru.DstIP = randPrefix(r, fam == 1)
		}
		if !ru.SrcIP.IsValid() && !ru.DstIP.IsValid() {
			ru.EtherType = []EtherType{0, EtherTypeIPv4, EtherTypeIPv6}[fam]
		}
	case 3:
		ru.EtherType = pick(r, poolEther)
	}
	if on() || r.IntN(3) == 0 {
		ru.Proto = pick(r, poolProtos)
		switch ru.Proto {
		case ProtoTCP, ProtoUDP:
			if on() {
				ru.SrcPort = randPortRange(r)
			}
			if r.IntN(3) > 0 {
				ru.DstPort = randPortRange(r)
			}
			if ru.Proto == ProtoTCP && on() {
				for range 1 + r.IntN(3) {
					ru.TCPFlags.Mask |= pick(r, poolFlags)
				}
				ru.TCPFlags.Value = ru.TCPFlags.Mask & TCPFlagSet(r.IntN(256))
			}
		case ProtoICMP, ProtoICMPv6:
			if r.IntN(2) == 0 {
				ru.ICMPType = ptr(uint8(pick(r, []int{0, 3, 8, 128, 129})))
			}
			if on() {
				ru.ICMPCode = ptr(uint8(r.IntN(3)))
			}
		}
	}
	if on() {
		ru.CtState = CtState(1 + r.IntN(int(ctAll)))
	}
	ru.Action = Action(1 + r.IntN(3))
	ru.Counter = r.IntN(2) == 0
	ru.Log = r.IntN(8) == 0
	return ru
}

// randRuleset returns n valid rules (invalid or duplicate draws are
// dropped and drawn again) and random policies.
func randRuleset(r *rand.Rand, n int, cfg genConfig) *Ruleset {
	rs := &Ruleset{Rules: make([]Rule, 0, n), Policy: map[Chain]Action{}}
	for c := range Chain(cfg.maxChain) {
		if r.IntN(2) == 0 {
			rs.Policy[c] = Drop
		}
	}
	v := newValidator(n)
	for tries := 0; len(rs.Rules) < n && tries < 20*n+100; tries++ {
		ru := randRule(r, cfg)
		if len(checkRule(&ru)) > 0 {
			continue
		}
		rs.Rules = append(rs.Rules, ru)
		if v.dup(rs, len(rs.Rules)-1) != nil {
			rs.Rules = rs.Rules[:len(rs.Rules)-1]
		}
	}
	return rs
}

// randKey returns a key that often satisfies rule (when rule != nil),
// sometimes with one field perturbed.
func randKey(r *rand.Rand, rule *Rule) Key {
	var k Key
	k.Chain = Chain(r.IntN(int(numChains)))
	k.InPort = testPorts[pick(r, poolPortNames)]
	k.OutPort = testPorts[pick(r, poolPortNames)]
	k.SrcMAC, k.DstMAC = pick(r, poolMACs), pick(r, poolMACs)
	if r.IntN(2) == 0 {
		k.Tagged, k.VLAN = true, pick(r, poolVLANs)|uint16(r.IntN(2))<<13 // PCP bits must be ignored
	}
	switch r.IntN(3) {
	case 0:
		k.SetAddrs(randAddrIn(r, randPrefix(r, true)), randAddrIn(r, randPrefix(r, true)))
	case 1:
		k.SetAddrs(randAddrIn(r, randPrefix(r, false)), randAddrIn(r, randPrefix(r, false)))
	default:
		k.EtherType = pick(r, poolEther)
	}
	if k.EtherType == EtherTypeIPv4 || k.EtherType == EtherTypeIPv6 {
		k.Proto = pick(r, poolProtos)
		k.SrcPort, k.DstPort = randPortNear(r), randPortNear(r)
		k.TCPFlags = TCPFlagSet(r.IntN(256))
		k.ICMPType, k.ICMPCode = uint8(pick(r, []int{0, 3, 8, 128, 129})), uint8(r.IntN(3))
	}
	k.CtState = CtState(1) << r.IntN(6) // includes one invalid bit (1<<5)
	if r.IntN(20) == 0 {
		k.CtState = CtState(r.IntN(256))
	}
	if rule != nil {
		satisfy(r, &k, rule)
		if r.IntN(4) == 0 {
			perturb(r, &k)
		}
	}
	return k
}

func randPortNear(r *rand.Rand) uint16 {
	p := int(pick(r, poolL4Ports)) + r.IntN(3) - 1
	return uint16(min(max(p, 0), 65535))
}

func randAddrIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		hostBits := max(0, min(8, (i+1)*8-p.Bits()))
		b[i] |= byte(r.IntN(256)) & byte(1<<hostBits-1)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// satisfy sets k's fields so that rule matches it.
func satisfy(r *rand.Rand, k *Key, ru *Rule) {
	k.Chain = ru.Chain
	if ru.InPort != "" {
		k.InPort = testPorts[ru.InPort]
	}
	if ru.OutPort != "" {
		k.OutPort = testPorts[ru.OutPort]
	}
	if ru.SrcMAC != nil {
		k.SrcMAC = *ru.SrcMAC
	}
	if ru.DstMAC != nil {
		k.DstMAC = *ru.DstMAC
	}
	if ru.VLAN != nil {
		k.Tagged, k.VLAN = true, *ru.VLAN
	}
	if e := ru.effectiveEtherType(); e != 0 && e != k.EtherType {
		switch e {
		case EtherTypeIPv4:
			k.SetAddrs(randAddrIn(r, randPrefix(r, true)), randAddrIn(r, randPrefix(r, true)))
		case EtherTypeIPv6:
			k.SetAddrs(randAddrIn(r, randPrefix(r, false)), randAddrIn(r, randPrefix(r, false)))
		}
		k.EtherType = e
	}
	if ru.SrcIP.IsValid() {
		a := randAddrIn(r, ru.SrcIP)
		k.SrcIP = [16]byte{}
		copy(k.SrcIP[:], a.AsSlice())
	}
	if ru.DstIP.IsValid() {
		a := randAddrIn(r, ru.DstIP)
		k.DstIP = [16]byte{}
		copy(k.DstIP[:], a.AsSlice())
	}
	if ru.Proto != 0 {
		k.Proto = ru.Proto
	}
	if ru.SrcPort != nil {
		k.SrcPort = ru.SrcPort.Lo + uint16(r.IntN(int(ru.SrcPort.Hi-ru.SrcPort.Lo)+1))
	}
	if ru.DstPort != nil {
		k.DstPort = ru.DstPort.Lo + uint16(r.IntN(int(ru.DstPort.Hi-ru.DstPort.Lo)+1))
	}
	k.TCPFlags = k.TCPFlags&^ru.TCPFlags.Mask | ru.TCPFlags.Value
	if ru.ICMPType != nil {
		k.ICMPType = *ru.ICMPType
	}
	if ru.ICMPCode != nil {
		k.ICMPCode = *ru.ICMPCode
	}
	if ru.CtState != 0 {
		for {
			s := CtState(1) << r.IntN(5)
			if ru.CtState&s != 0 {
				k.CtState = s
				break
			}
		}
	}
}

// perturb changes one field of k a little.
func perturb(r *rand.Rand, k *Key) {
	switch r.IntN(10) {
	case 0:
		k.SrcPort ^= 1 << r.IntN(16)
	case 1:
		k.DstPort += uint16(r.IntN(3)) - 1
	case 2:
		k.SrcIP[r.IntN(16)] ^= 1 << r.IntN(8)
	case 3:
		k.DstIP[r.IntN(4)] ^= 1 << r.IntN(8)
	case 4:
		k.TCPFlags ^= 1 << r.IntN(8)
	case 5:
		k.CtState = CtState(1) << r.IntN(5)
	case 6:
		k.Tagged = !k.Tagged
	case 7:
		k.InPort ^= 1
	case 8:
		k.ICMPType++
	case 9:
		k.Chain = Chain(r.IntN(int(numChains) + 1))
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
