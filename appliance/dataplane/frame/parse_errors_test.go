package frame

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

type errCase struct {
	name string
	b    []byte
	tag  *VLANTag
	want error
}

// mutate returns a copy of b with fn applied.
func mutate(b []byte, fn func(b []byte)) []byte {
	b = slices.Clone(b)
	fn(b)
	return b
}

func errCases() []errCase {
	udp4 := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
	goodUDP4 := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), udp4.Build(udp4.UDP(1, 2, frametest.Payload(16))))
	tcp4 := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoTCP, TTL: 64}
	goodTCP4 := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), tcp4.Build(tcp4.TCP(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: TCPSyn}, nil)))
	udp6 := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoUDP, HopLimit: 64}
	goodUDP6 := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), udp6.Build(udp6.UDP(1, 2, frametest.Payload(16))))
	arp := slices.Concat(frametest.Eth(macBcast, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B))
	tag := func(vid uint16) VLANTag { return VLANTag{TPID: EtherTypeVLAN, TCI: vid} }
	ext := func(nh uint8, exts ...[]byte) []byte {
		ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: nh, HopLimit: 64}
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(slices.Concat(exts...)))
	}
	frag4 := func(mf bool, off uint16, proto uint8, payload []byte) []byte {
		ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: proto, TTL: 64, MF: mf, FragOff: off}
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(payload))
	}
	return []errCase{
		{"empty", nil, nil, ErrTruncated},
		{"short ethernet", goodUDP4[:13], nil, ErrTruncated},
		{"truncated vlan tag", slices.Concat(frametest.Eth(macB, macA, EtherTypeVLAN), []byte{0, 1}), nil, ErrTruncated},
		{"truncated ipv4 header", goodUDP4[:33], nil, ErrTruncated},
		{"truncated ipv6 header", goodUDP6[:53], nil, ErrTruncated},
		{"truncated arp", arp[:41], nil, ErrTruncated},
		{"truncated tcp header", mutate(goodTCP4[:50], func(b []byte) { b[17] = 36 }), nil, ErrTruncated},
		{"truncated udp header", mutate(goodUDP4[:40], func(b []byte) { b[17] = 26 }), nil, ErrTruncated},
		{"truncated icmp header", func() []byte {
			ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64}
			return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build([]byte{8, 0, 0, 0}))
		}(), nil, ErrTruncated},
		{"truncated icmpv6 header", ext(ProtoICMPv6, []byte{128, 0, 0, 0, 0, 1}), nil, ErrTruncated},
		{"truncated hop-by-hop", ext(ProtoHopByHop, []byte{ProtoUDP, 1, 0, 0, 0, 0, 0, 0}), nil, ErrTruncated},
		{"truncated ah", ext(ProtoAH, frametest.AH6(ProtoTCP, 1, 1)[:20]), nil, ErrTruncated},
		{"three vlan tags", slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4, frametest.Tag(tag(1)), frametest.Tag(tag(2)), frametest.Tag(tag(3))), udp4.Build(nil)), nil, ErrBadVLAN},
		{"outer vid 4095", frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag{TPID: EtherTypeQinQ, TCI: 0xffff}, frametest.Tag(tag(2))), nil, ErrBadVLAN},
		{"inner vid 4095", frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag(tag(1)), frametest.Tag(tag(0xfff))), nil, ErrBadVLAN},
		{"stripped tag vid 4095", goodUDP4, &VLANTag{TCI: 0x0fff}, ErrBadVLAN},
		{"stripped tag plus two tags", frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag(tag(1)), frametest.Tag(tag(2))), &VLANTag{TCI: 5}, ErrBadVLAN},
		{"arp htype 6", mutate(arp, func(b []byte) { b[15] = 6 }), nil, ErrBadARP},
		{"arp plen 16", mutate(arp, func(b []byte) { b[19] = 16 }), nil, ErrBadARP},
		{"arp ptype ipv6", mutate(arp, func(b []byte) { b[16], b[17] = 0x86, 0xdd }), nil, ErrBadARP},
		{"ipv4 ethertype version 6", mutate(goodUDP4, func(b []byte) { b[14] = 0x65 }), nil, ErrBadVersion},
		{"ipv6 ethertype version 4", mutate(goodUDP6, func(b []byte) { b[14] = 0x40 }), nil, ErrBadVersion},
		{"ihl 4", mutate(goodUDP4, func(b []byte) { b[14] = 0x44 }), nil, ErrBadIHL},
		{"ihl 0", mutate(goodUDP4, func(b []byte) { b[14] = 0x40 }), nil, ErrBadIHL},
		{"total length past capture", mutate(goodUDP4, func(b []byte) { b[17]++ }), nil, ErrBadLength},
		{"total length below header", mutate(goodUDP4, func(b []byte) { b[16], b[17] = 0, 19 }), nil, ErrBadLength},
		{"total length below ihl", mutate(goodUDP4, func(b []byte) { b[14], b[16], b[17] = 0x4f, 0, 40 }), nil, ErrBadLength},
		{"ihl past capture", goodUDP4[:40], nil, ErrBadLength},
		{"ipv6 payload length past capture", mutate(goodUDP6, func(b []byte) { b[19]++ }), nil, ErrBadLength},
		{"ipv4 fragment past 65535", frag4(false, 8191, ProtoUDP, frametest.Payload(16)), nil, ErrBadFragment},
		{"ipv4 fragment with MF not multiple of 8", frag4(true, 0, ProtoUDP, udp4.UDP(1, 2, frametest.Payload(13))), nil, ErrBadFragment},
		{"ipv4 tcp fragment offset 1", frag4(false, 1, ProtoTCP, frametest.Payload(16)), nil, ErrBadFragment},
		{"ipv4 tiny first tcp fragment", frag4(true, 0, ProtoTCP, frametest.Payload(16)), nil, ErrBadFragment},
		{"ipv4 first tcp fragment cutting options", frag4(true, 0, ProtoTCP, frametest.TCP{Flags: TCPSyn, Opts: synOpts}.Raw(nil)[:32]), nil, ErrBadFragment},
		{"ipv6 fragment past 65535", ext(ProtoFragment, frametest.Frag6(ProtoUDP, 8191, false, 1), frametest.Payload(16)), nil, ErrBadFragment},
		{"ipv6 fragment with M not multiple of 8", ext(ProtoFragment, frametest.Frag6(ProtoUDP, 0, true, 1), frametest.Payload(12)), nil, ErrBadFragment},
		{"ipv6 first fragment without full chain", ext(ProtoFragment, frametest.Frag6(ProtoDestOpts, 0, true, 1), []byte{ProtoUDP, 2, 0, 0, 0, 0, 0, 0}), nil, ErrBadFragment},
		{"ipv6 hop-by-hop not first", ext(ProtoDestOpts, frametest.Ext6(ProtoHopByHop, nil), frametest.Ext6(ProtoUDP, nil)), nil, ErrBadExtHeader},
		{"ipv6 two fragment headers", ext(ProtoFragment, frametest.Frag6(ProtoFragment, 0, false, 1), frametest.Frag6(ProtoUDP, 0, false, 1), frametest.UDPRaw(1, 2, nil)), nil, ErrBadExtHeader},
		{"ipv6 nine extension headers", ext(ProtoDestOpts, slices.Repeat(frametest.Ext6(ProtoDestOpts, nil), 8), frametest.Ext6(ProtoUDP, nil), frametest.UDPRaw(1, 2, nil)), nil, ErrBadExtHeader},
		{"tcp data offset 4", mutate(goodTCP4, func(b []byte) { b[46] = 4 << 4 }), nil, ErrBadTCPOffset},
		{"tcp data offset 0", mutate(goodTCP4, func(b []byte) { b[46] = 0 }), nil, ErrBadTCPOffset},
		{"tcp data offset past end", mutate(goodTCP4, func(b []byte) { b[46] = 6 << 4 }), nil, ErrBadTCPOffset},
		{"udp length 7", mutate(goodUDP4, func(b []byte) { b[38], b[39] = 0, 7 }), nil, ErrBadUDPLength},
		{"udp length past end", mutate(goodUDP4, func(b []byte) { b[39]++ }), nil, ErrBadUDPLength},
		{"udp6 length past end", mutate(goodUDP6, func(b []byte) { b[59]++ }), nil, ErrBadUDPLength},
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range errCases() {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			var err error
			if tc.tag != nil {
				err = ParseWithTag(tc.b, *tc.tag, &f)
			} else {
				err = Parse(tc.b, &f)
			}
			if err != tc.want {
				t.Fatalf("Parse error = %v, want %v", err, tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.want)
			}
			if got, want := ReasonOf(err), tc.want.(Reason); got != want {
				t.Errorf("ReasonOf = %v, want %v", got, want)
			}
		})
	}
}

// TestErrCasesCoverReasons makes sure every parse drop reason has a negative case.
func TestErrCasesCoverReasons(t *testing.T) {
	seen := map[Reason]bool{}
	for _, tc := range errCases() {
		seen[ReasonOf(tc.want)] = true
	}
	for r := ReasonTruncated; r < NumReasons; r++ {
		if r == ReasonBadChecksum || r == ReasonOther {
			continue // not produced by Parse; tested in checksum_test.go / below
		}
		if !seen[r] {
			t.Errorf("no negative Parse case for %v", r)
		}
	}
}

func TestReason(t *testing.T) {
	names := map[string]Reason{}
	for r := ReasonNone; r < NumReasons; r++ {
		if prev, dup := names[r.String()]; dup {
			t.Errorf("%d and %d share the name %q", prev, r, r.String())
		}
		names[r.String()] = r
		if r.Error() == "" || r.Error() == Reason(NumReasons).Error() {
			t.Errorf("reason %d has no message", r)
		}
	}
	if got := Reason(200).String(); got != "unknown" {
		t.Errorf("Reason(200).String() = %q", got)
	}
	wrapped := errors.Join(errors.New("context"), ErrBadVLAN)
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{nil, ReasonNone},
		{ErrTruncated, ReasonTruncated},
		{ErrBadChecksum, ReasonBadChecksum},
		{wrapped, ReasonBadVLAN},
		{errors.New("elsewhere"), ReasonOther},
	} {
		if got := ReasonOf(tc.err); got != tc.want {
			t.Errorf("ReasonOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestParseResets checks that Parse overwrites all of a reused Frame.
func TestParseResets(t *testing.T) {
	cs := parseCases()
	var f Frame
	for i := range cs {
		prev := cs[(i+len(cs)-1)%len(cs)]
		if prev.tag != nil {
			_ = ParseWithTag(prev.b, *prev.tag, &f)
		} else {
			_ = Parse(prev.b, &f)
		}
		if cs[i].tag != nil {
			continue
		}
		if err := Parse(cs[i].b, &f); err != nil {
			t.Fatalf("%s: %v", cs[i].name, err)
		}
		if diff := cmp.Diff(cs[i].want, f); diff != "" {
			t.Errorf("%s after %s (-want +got):\n%s", cs[i].name, prev.name, diff)
		}
	}
}

func TestParseEmbeddedErrors(t *testing.T) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64}
	mk := func(quote []byte) []byte {
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPDestUnreach, 1, 0, quote)))
	}
	orig := frametest.IPv4{Src: ip4B, Dst: ip4A, Proto: ProtoTCP, TTL: 64}
	quoted := orig.Build(frametest.TCP{SrcPort: 80, DstPort: 1234, Flags: TCPAck}.Raw(nil))
	ip6 := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoICMPv6, HopLimit: 64}
	mk6 := func(quote []byte) []byte {
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip6.Build(ip6.ICMP(ICMPv6TimeExceeded, 0, 0, quote)))
	}
	orig6 := frametest.IPv6{Src: ip6B, Dst: ip6A, NextHeader: ProtoFragment, HopLimit: 1}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
		l4   bool // quoted transport header expected
	}{
		{"quote shorter than ip header", mk(quoted[:12]), ErrTruncated, false},
		{"quote with ip version 6", mk(mutate(quoted, func(b []byte) { b[0] = 0x65 })), ErrBadVersion, false},
		{"quote with ihl 3", mk(mutate(quoted, func(b []byte) { b[0] = 0x43 })), ErrBadIHL, false},
		{"quote with ihl past quote", mk(mutate(quoted[:28], func(b []byte) { b[0], b[3] = 0x4f, 200 })), ErrTruncated, false},
		{"quote with total length below ihl", mk(mutate(quoted, func(b []byte) { b[3] = 10 })), ErrBadLength, false},
		{"quote of 4 transport bytes", mk(quoted[:24]), nil, false},
		{"quote of 8 transport bytes", mk(quoted[:28]), nil, true},
		{"quote of later fragment", mk(mutate(quoted, func(b []byte) { b[7] = 3 })), nil, false},
		{"icmpv6 quote of later fragment", mk6(orig6.Build(slices.Concat(frametest.Frag6(ProtoUDP, 3, false, 1), frametest.Payload(16)))), nil, false},
		{"icmpv6 quote with truncated ext header", mk6(frametest.IPv6{Src: ip6B, Dst: ip6A, NextHeader: ProtoDestOpts}.Build(frametest.Ext6(ProtoUDP, make([]byte, 30))[:16])), ErrTruncated, false},
		{"icmpv6 quote with ip version 4", mk6(mutate(orig6.Build(nil), func(b []byte) { b[0] = 0x45 })), ErrBadVersion, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			if err := Parse(tc.b, &f); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var in Inner
			err := ParseEmbedded(tc.b, &f, &in)
			if err != tc.want {
				t.Fatalf("ParseEmbedded error = %v, want %v", err, tc.want)
			}
			if got := in.L4Off != 0; got != tc.l4 {
				t.Errorf("quoted transport header present = %v (L4Off %d), want %v", got, in.L4Off, tc.l4)
			}
			if tc.l4 && (in.SrcPort != 80 || in.DstPort != 1234) {
				t.Errorf("quoted ports = %d, %d; want 80, 1234", in.SrcPort, in.DstPort)
			}
		})
	}
}

func TestTCPValidFlags(t *testing.T) {
	for _, tc := range []struct {
		flags uint8
		want  bool
	}{
		{TCPSyn, true},
		{TCPSyn | TCPAck, true},
		{TCPSyn | TCPAck | TCPEce | TCPCwr, true},
		{TCPAck | TCPPsh, true},
		{TCPFin | TCPAck, true},
		{TCPRst, true},
		{TCPRst | TCPAck, true},
		{0, false},
		{TCPSyn | TCPFin, false},
		{TCPSyn | TCPRst, false},
		{TCPFin, false},
		{TCPFin | TCPPsh | TCPUrg, false}, // xmas without ACK
	} {
		tcp := TCP{Flags: tc.flags}
		if got := tcp.ValidFlags(); got != tc.want {
			t.Errorf("ValidFlags(%#02x) = %v, want %v", tc.flags, got, tc.want)
		}
	}
}
