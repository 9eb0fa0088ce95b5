package frame

import (
	"encoding/hex"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// mustParse parses a test frame.
func mustParse(t testing.TB, b []byte) *Frame {
	t.Helper()
	var f Frame
	if err := Parse(b, &f); err != nil {
		t.Fatalf("test frame does not parse: %v", err)
	}
	return &f
}

// impersonate is the answer the destination of f gives (as the kernel of
// testdata/capture.sh's namespace B did).
func impersonate(f *Frame) Answer {
	return Answer{MAC: f.Dst, Src4: f.IPv4.Dst, Src6: f.IPv6.Dst, TTL: 64}
}

// TestAnswersMatchKernel builds answers to frames the Linux kernel
// received and wants the kernel's own answers, byte for byte (the kernel's
// frames are not padded; ours are, to 60 bytes).
func TestAnswersMatchKernel(t *testing.T) {
	k := capturedFrames(t)
	for _, tc := range []struct {
		name, in, want string
		put            func(dst, b []byte, f *Frame, a *Answer) int
		answer         func(a *Answer)
	}{
		{"tcp reset to a syn on a closed port", "tcp4-syn", "tcp4-rst-ack",
			func(dst, _ []byte, f *Frame, a *Answer) int { return PutRST(dst, f, a) },
			func(a *Answer) { a.DF = true }},
		{"tcp reset over ipv6", "tcp6-syn", "tcp6-rst-ack",
			func(dst, _ []byte, f *Frame, a *Answer) int { return PutRST(dst, f, a) },
			func(a *Answer) { a.Flow = 0x01b22 }},
		{"udp port unreachable", "udp4", "icmp-port-unreachable",
			func(dst, b []byte, f *Frame, a *Answer) int { return PutICMPError(dst, b, f, a, ICMPDestUnreach, 3, 0) },
			func(a *Answer) { a.TOS, a.ID = 0xc0, 55070 }},
		{"udp port unreachable over ipv6", "udp6", "icmpv6-port-unreachable",
			func(dst, b []byte, f *Frame, a *Answer) int {
				return PutICMPError(dst, b, f, a, ICMPv6DestUnreach, 4, 0)
			},
			func(a *Answer) { a.Flow = 0x0beba }},
		{"echo reply", "icmp-echo-request", "icmp-echo-reply",
			PutEchoReply, func(a *Answer) { a.ID = 55032 }},
		{"echo reply over ipv6", "icmpv6-echo-request", "icmpv6-echo-reply",
			PutEchoReply, func(a *Answer) { a.Flow = 0x6329c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, want := k[tc.in], k[tc.want]
			f := mustParse(t, in)
			a := impersonate(f)
			tc.answer(&a)
			dst := make([]byte, 2048)
			n := tc.put(dst, in, f, &a)
			want = frametest.Pad(slices.Clone(want))
			if diff := cmp.Diff(hex.EncodeToString(want), hex.EncodeToString(dst[:n])); diff != "" {
				t.Errorf("answer (-kernel +ours):\n%s", diff)
			}
		})
	}
	t.Run("arp reply", func(t *testing.T) {
		req := mustParse(t, k["arp-request"])
		r := ARP{Op: 2, SenderMAC: [6]byte(k["arp-reply"][6:12]), SenderIP: req.ARP.TargetIP, TargetMAC: req.ARP.SenderMAC, TargetIP: req.ARP.SenderIP}
		dst := make([]byte, 100)
		n := PutARP(dst, req.Src, r.SenderMAC, &r)
		if diff := cmp.Diff(hex.EncodeToString(frametest.Pad(slices.Clone(k["arp-reply"]))), hex.EncodeToString(dst[:n])); diff != "" {
			t.Errorf("ARP reply (-kernel +ours):\n%s", diff)
		}
	})
}

func TestIsICMPError(t *testing.T) {
	v4 := frametest.IPv4{Src: ip4A, Dst: ip4B}
	v6 := frametest.IPv6{Src: ip6A, Dst: ip6B}
	icmp4 := func(typ uint8) []byte {
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), v4.ICMPPacket(typ, 0, 0, frametest.Payload(28)))
	}
	icmp6 := func(typ uint8) []byte {
		return slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), v6.ICMPPacket(typ, 0, 0, frametest.Payload(48)))
	}
	type errCase struct {
		name string
		b    []byte
		want bool
	}
	tests := []errCase{
		{"udp", slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), v4.UDPPacket(1, 2, nil)), false},
		{"icmp over ipv6 is not icmpv6", slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoICMP}.Build(frametest.ICMPv4(3, 3, 0, nil))), false},
		{"later fragment of an icmp error", slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4),
			frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, FragOff: 10}.Build(frametest.Payload(16))), false},
		{"first fragment of an icmp error", slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4),
			frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, MF: true}.Build(frametest.ICMPv4(ICMPTimeExceeded, 0, 0, frametest.Payload(32)))), true},
	}
	// Linux's icmp_pointers[].error: all but echo, timestamp, information
	// and address mask requests and replies; types it has no entry for too.
	queries := map[uint8]bool{0: true, 8: true, 13: true, 14: true, 15: true, 16: true, 17: true, 18: true}
	for typ := range 256 {
		tests = append(tests,
			errCase{fmt.Sprintf("icmp type %d", typ), icmp4(uint8(typ)), !queries[uint8(typ)]},
			errCase{fmt.Sprintf("icmpv6 type %d", typ), icmp6(uint8(typ)), typ < 128})
	}
	for _, tc := range tests {
		if got := IsICMPError(mustParse(t, tc.b)); got != tc.want {
			t.Errorf("%s: IsICMPError = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsUnicast(t *testing.T) {
	for _, tc := range []struct {
		a    [4]byte
		want bool
	}{
		{[4]byte{0, 0, 0, 0}, false},
		{[4]byte{0, 1, 2, 3}, false},
		{[4]byte{1, 0, 0, 0}, true},
		{[4]byte{10, 0, 0, 1}, true},
		{[4]byte{126, 255, 255, 255}, true},
		{[4]byte{127, 0, 0, 1}, false},
		{[4]byte{128, 0, 0, 0}, true},
		{[4]byte{169, 254, 1, 1}, true},
		{[4]byte{223, 255, 255, 255}, true},
		{[4]byte{224, 0, 0, 1}, false},
		{[4]byte{239, 255, 255, 250}, false},
		{[4]byte{240, 0, 0, 1}, false},
		{[4]byte{255, 255, 255, 255}, false},
	} {
		if got := IsUnicastIPv4(tc.a); got != tc.want {
			t.Errorf("IsUnicastIPv4(%v) = %v, want %v", tc.a, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a    [16]byte
		want bool
	}{
		{[16]byte{}, false},
		{[16]byte{15: 1}, false},
		{[16]byte{15: 2}, true},
		{ip6A, true},
		{ip6LLA, true},
		{ip6SolB, false},
		{[16]byte{0xff, 0x02, 15: 1}, false},
		{[16]byte{0xfe, 0xff, 15: 1}, true},
	} {
		if got := IsUnicastIPv6(&tc.a); got != tc.want {
			t.Errorf("IsUnicastIPv6(%x) = %v, want %v", tc.a, got, tc.want)
		}
	}
}

// TestPutHeaders: what the header writers write parses back to what they
// were given.
func TestPutHeaders(t *testing.T) {
	tags := []VLANTag{{TPID: EtherTypeQinQ, TCI: 7}, {TPID: EtherTypeVLAN, TCI: 0x2009}}
	t.Run("ipv4", func(t *testing.T) {
		h := IPv4{IHL: 5, TOS: 0xb8, TotalLen: 28, ID: 0x1234, MF: true, FragOff: 0, TTL: 9, Protocol: ProtoUDP, Src: ip4A, Dst: ip4B}
		b := make([]byte, 64)
		n := PutEthernet(b, macB, macA, tags, EtherTypeIPv4)
		n += PutIPv4Header(b[n:], &h)
		copy(b[n:], frametest.UDPRaw(1, 2, nil))
		f := mustParse(t, b[:n+UDPHeaderLen])
		h.Checksum = f.IPv4.Checksum
		if diff := cmp.Diff(h, f.IPv4); diff != "" {
			t.Errorf("IPv4 header (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(tags, f.Tags[:f.NTags]); diff != "" {
			t.Errorf("tags (-want +got):\n%s", diff)
		}
		if s := frametest.Sum(b[f.L3Off : f.L3Off+IPv4HeaderLen]); s != 0xffff {
			t.Errorf("header sums to %#04x", s)
		}
	})
	t.Run("ipv6", func(t *testing.T) {
		h := IPv6{TrafficClass: 0xb8, FlowLabel: 0xfffff, PayloadLen: 0, NextHeader: ProtoNoNext, HopLimit: 1, Src: ip6A, Dst: ip6B}
		b := make([]byte, 64)
		n := PutEthernet(b, macB, macA, nil, EtherTypeIPv6)
		n += PutIPv6Header(b[n:], &h)
		f := mustParse(t, b[:n])
		if diff := cmp.Diff(h, f.IPv6); diff != "" {
			t.Errorf("IPv6 header (-want +got):\n%s", diff)
		}
	})
	t.Run("too short", func(t *testing.T) {
		short := make([]byte, 13)
		if PutEthernet(short, macB, macA, nil, EtherTypeARP) != 0 || PutIPv4Header(short, &IPv4{}) != 0 ||
			PutIPv6Header(short, &IPv6{}) != 0 || PutARP(short, macB, macA, &ARP{}) != 0 || Pad(short, 13) != 0 {
			t.Error("a writer wrote into a buffer too short for it")
		}
	})
}

func TestPad(t *testing.T) {
	for _, tc := range []struct{ size, n, want int }{
		{60, 0, 60}, {60, 42, 60}, {60, 60, 60}, {100, 61, 61}, {59, 10, 0}, {60, 61, 0},
	} {
		b := slices.Repeat([]byte{0xee}, tc.size)
		got := Pad(b, tc.n)
		if got != tc.want {
			t.Errorf("Pad(%d bytes, %d) = %d, want %d", tc.size, tc.n, got, tc.want)
			continue
		}
		for i := tc.n; i < got; i++ {
			if b[i] != 0 {
				t.Errorf("Pad(%d bytes, %d): byte %d is %#x, want 0", tc.size, tc.n, i, b[i])
			}
		}
	}
}

// bufLen is the size of a test's answer buffer: n, or 2048 for 0.
func bufLen(n int) int {
	if n == 0 {
		return 2048
	}
	return n
}

// checkAnswer parses the answer b to f and checks what every answer must
// be: padded, addressed to f's source from a, with checksums that verify
// by the reference sum.
func checkAnswer(t testing.TB, b []byte, f *Frame) *Frame {
	t.Helper()
	g := mustParse(t, b)
	if len(b) < MinFrameLen {
		t.Errorf("answer of %d bytes, want at least %d", len(b), MinFrameLen)
	}
	if g.Dst != f.Src || g.Src != f.Dst || g.EtherType != f.EtherType {
		t.Errorf("answer %x > %x type %#x, want %x > %x type %#x", g.Src, g.Dst, g.EtherType, f.Dst, f.Src, f.EtherType)
	}
	var pseudo []byte
	switch {
	case g.IsIPv4():
		if g.IPv4.Dst != f.IPv4.Src || g.IPv4.Src != f.IPv4.Dst {
			t.Errorf("answer %v > %v, want %v > %v", g.IPv4.Src, g.IPv4.Dst, f.IPv4.Dst, f.IPv4.Src)
		}
		if s := frametest.Sum(b[g.L3Off : g.L3Off+IPv4HeaderLen]); s != 0xffff {
			t.Errorf("IPv4 header sums to %#04x", s)
		}
		if g.Proto != ProtoICMP {
			pseudo = frametest.Pseudo4(g.IPv4.Src, g.IPv4.Dst, g.Proto, g.L3End-g.L4Off)
		}
	case g.IsIPv6():
		if g.IPv6.Dst != f.IPv6.Src || g.IPv6.Src != f.IPv6.Dst {
			t.Errorf("answer %x > %x, want %x > %x", g.IPv6.Src, g.IPv6.Dst, f.IPv6.Dst, f.IPv6.Src)
		}
		pseudo = frametest.Pseudo6(g.IPv6.Src, g.IPv6.Dst, g.Proto, g.L3End-g.L4Off)
	default:
		t.Fatalf("answer is not IP: %#x", g.EtherType)
	}
	if s := frametest.Sum(pseudo, b[g.L4Off:g.L3End]); s != 0xffff {
		t.Errorf("transport checksum: segment sums to %#04x", s)
	}
	return g
}

// TestPutZeroAllocs: the writers never allocate.
func TestPutZeroAllocs(t *testing.T) {
	dst := make([]byte, 2048)
	var a Answer
	for _, tc := range parseCases() {
		var f Frame
		if Parse(tc.b, &f) != nil {
			continue
		}
		a = impersonate(&f)
		a.Tags = f.Tags[:f.NTags]
		a.MTU = 1500
		if n := testing.AllocsPerRun(100, func() {
			PutRST(dst, &f, &a)
			PutICMPError(dst, tc.b, &f, &a, ICMPDestUnreach, 3, 0)
			PutEchoReply(dst, tc.b, &f, &a)
			PutARP(dst, f.Src, f.Dst, &f.ARP)
			_ = IsICMPError(&f) || IsUnicastIPv4(f.IPv4.Src) || IsUnicastIPv6(&f.IPv6.Src)
		}); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tc.name, n)
		}
	}
}

// FuzzAnswers: for any frame Parse accepts, the writers never panic, and
// what they write parses, goes back to the frame's sender, has checksums
// that verify by the reference sum, stays within its size limits, and is
// not answered in turn (no reset to a reset, no error about an error).
func FuzzAnswers(f *testing.F) {
	addSeeds(f, func(b []byte) {
		f.Add(b, uint8(ICMPDestUnreach), uint8(3), uint32(0), uint16(1500), uint16(2048))
	})
	f.Fuzz(func(t *testing.T, b []byte, typ, code uint8, rest uint32, mtu, size uint16) {
		var in Frame
		if Parse(b, &in) != nil {
			return
		}
		a := impersonate(&in)
		a.Tags, a.MTU, a.ID, a.Flow = in.Tags[:in.NTags], int(mtu), uint16(rest), rest
		dst := make([]byte, int(size)%4096)
		answer := func(what string, n int) *Frame {
			if n == 0 {
				return nil
			}
			if n < MinFrameLen || n > len(dst) {
				t.Fatalf("%s: length %d, buffer %d", what, n, len(dst))
			}
			return checkAnswer(t, dst[:n], &in)
		}
		if g := answer("reset", PutRST(dst, &in, &a)); g != nil {
			if g.TCP.Flags&TCPRst == 0 || PutRST(make([]byte, 2048), g, &a) != 0 {
				t.Errorf("reset %+v would be answered with a reset", g.TCP)
			}
		}
		if g := answer("icmp error", PutICMPError(dst, b, &in, &a, typ, code, rest)); g != nil {
			limit := ICMPv4ErrorMax
			if g.IsIPv6() {
				limit = ICMPv6ErrorMax
			}
			if a.MTU > 0 {
				limit = min(limit, a.MTU)
			}
			if g.L3End-g.L3Off > limit {
				t.Errorf("icmp error of %d bytes, limit %d", g.L3End-g.L3Off, limit)
			}
			if IsICMPError(g) && PutICMPError(make([]byte, 2048), dst[:g.L3End], g, &a, typ, code, rest) != 0 {
				t.Error("an icmp error would be answered with an error")
			}
		}
		if g := answer("echo reply", PutEchoReply(dst, b, &in, &a)); g != nil && PutEchoReply(make([]byte, 2048), dst, g, &a) != 0 {
			t.Error("an echo reply would be answered")
		}
	})
}
