package frame

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// refSumInit folds initial into refSum(b).
func refSumInit(b []byte, initial uint16) uint16 {
	s := uint32(frametest.Sum(b)) + uint32(initial)
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2200)
	check := func(b []byte, initial uint16) {
		t.Helper()
		if got, want := Sum(b, initial), refSumInit(b, initial); got != want {
			t.Fatalf("Sum(len %d, %#04x) = %#04x, want %#04x", len(b), initial, got, want)
		}
		if got, want := Checksum(b, initial), ^refSumInit(b, initial); got != want {
			t.Fatalf("Checksum(len %d, %#04x) = %#04x, want %#04x", len(b), initial, got, want)
		}
	}
	for n := 0; n <= 100; n++ { // every short length, every tail path
		for range 20 {
			for i := range buf[:n] {
				buf[i] = byte(rng.Uint32())
			}
			check(buf[:n], uint16(rng.Uint32()))
		}
	}
	for range 2000 {
		start := rng.IntN(8) // unaligned starts too
		n := rng.IntN(len(buf) - start)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		check(buf[start:start+n], uint16(rng.Uint32()))
	}
	// Carry-heavy inputs: all ones, all zeros, alternating.
	for _, fill := range []byte{0xff, 0x00, 0x80, 0x7f} {
		for _, n := range []int{0, 1, 2, 7, 8, 31, 32, 33, 1500, 1501, 2199} {
			b := slices.Repeat([]byte{fill}, n)
			for _, initial := range []uint16{0, 1, 0xfffe, 0xffff} {
				check(b, initial)
			}
		}
	}
}

// TestSumKnownVectors uses published examples.
func TestSumKnownVectors(t *testing.T) {
	// RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
	if got := Sum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0); got != 0xddf2 {
		t.Errorf("RFC 1071 example: Sum = %#04x, want 0xddf2", got)
	}
	// The IPv4 header example of the "Internet checksum" literature
	// (Wikipedia "IPv4 header checksum"): checksum b861.
	hdr, err := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	if err != nil {
		t.Fatal(err)
	}
	if got := IPv4HeaderChecksum(hdr); got != 0xb861 {
		t.Errorf("IPv4HeaderChecksum = %#04x, want 0xb861", got)
	}
	if VerifyIPv4Header(hdr) {
		t.Error("VerifyIPv4Header accepted a zero checksum")
	}
	binary.BigEndian.PutUint16(hdr[10:], 0xb861)
	if !VerifyIPv4Header(hdr) {
		t.Error("VerifyIPv4Header rejected the correct checksum")
	}
	if got := IPv4HeaderChecksum(hdr); got != 0xb861 {
		t.Errorf("IPv4HeaderChecksum with the field set = %#04x, want 0xb861 (field must count as zero)", got)
	}
	hdr[15] ^= 1
	if VerifyIPv4Header(hdr) {
		t.Error("VerifyIPv4Header accepted a corrupted header")
	}
	if IPv4HeaderChecksum(hdr[:19]) != 0 || VerifyIPv4Header(hdr[:19]) {
		t.Error("short header not rejected")
	}
}

func TestPseudoSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var s4, d4 [4]byte
		var s6, d6 [16]byte
		for i := range s6 {
			s6[i], d6[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		copy(s4[:], s6[:])
		copy(d4[:], d6[:])
		proto := uint8(rng.Uint32())
		n := rng.Uint32()
		if got, want := PseudoSumIPv4(s4, d4, proto, uint16(n)), frametest.Sum(frametest.Pseudo4(s4, d4, proto, int(uint16(n)))); got != want {
			t.Fatalf("PseudoSumIPv4 = %#04x, want %#04x", got, want)
		}
		if got, want := PseudoSumIPv6(s6, d6, proto, n), frametest.Sum(frametest.Pseudo6(s6, d6, proto, int(n))); got != want {
			t.Fatalf("PseudoSumIPv6 = %#04x, want %#04x", got, want)
		}
	}
}

// l4CsumField returns the offset of the transport checksum in a parse case
// frame, or -1.
func l4CsumField(f *Frame) int {
	off, _, ok := l4Checksum(f)
	if !ok {
		return -1
	}
	return off
}

// TestChecksumsOfBuiltFrames checks L4Checksum, VerifyChecksums and
// SetChecksums against frames whose checksums the reference builder made.
func TestChecksumsOfBuiltFrames(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(tc.b)
			f := tc.want
			if f.IsIPv4() && !IPv4HeaderValid(b, &f) {
				t.Error("IPv4HeaderValid = false for a correct header")
			}
			at := l4CsumField(&f)
			c, ok := L4Checksum(b, &f)
			if wantOK := at >= 0 && !f.Fragment; ok != wantOK {
				t.Fatalf("L4Checksum ok = %v, want %v", ok, wantOK)
			}
			if ok && c != u16(b, at) {
				t.Errorf("L4Checksum = %#04x, frame carries %#04x", c, u16(b, at))
			}
			// Zero every checksum and let SetChecksums restore the bytes.
			z := slices.Clone(b)
			if f.IsIPv4() {
				z[f.L3Off+10], z[f.L3Off+11] = 0, 0
			}
			if ok {
				z[at], z[at+1] = 0xaa, 0x55 // garbage, not "no checksum"
			}
			zf := f
			SetChecksums(z, &zf)
			if !slices.Equal(z, b) {
				t.Errorf("SetChecksums did not restore the frame:\n got %x\nwant %x", z, b)
			}
			if zf != f {
				t.Errorf("SetChecksums left f out of step: %+v", zf)
			}
			// Corrupting a covered byte must be detected.
			if f.IsIPv4() || ok {
				bad := slices.Clone(b)
				if ok {
					bad[f.L3End-1] ^= 0x10
				} else {
					bad[f.L3Off+8] ^= 0x10 // TTL
				}
				if err := VerifyChecksums(bad, &f); err != ErrBadChecksum {
					t.Errorf("VerifyChecksums on a corrupted frame = %v, want %v", err, ErrBadChecksum)
				}
			}
		})
	}
}

func TestUDPZeroChecksum(t *testing.T) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
	b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.UDPRaw(1000, 53, frametest.Payload(20))))
	var f Frame
	if err := Parse(b, &f); err != nil {
		t.Fatal(err)
	}
	if err := VerifyChecksums(b, &f); err != nil {
		t.Errorf("VerifyChecksums with UDP checksum 0 over IPv4: %v", err)
	}
	SetChecksums(b, &f)
	if u16(b, 40) != 0 {
		t.Errorf("SetChecksums filled a UDP checksum of 0 (none): %#04x", u16(b, 40))
	}
	if !SetIPv4Src(b, &f, [4]byte{10, 0, 0, 1}) || !SetSrcPort(b, &f, 40000) || !SetIPv4Dst(b, &f, [4]byte{10, 0, 0, 2}) {
		t.Fatal("rewrite refused")
	}
	if u16(b, 40) != 0 || f.UDP.Checksum != 0 {
		t.Errorf("UDP checksum 0 changed by NAT to %#04x", u16(b, 40))
	}
	if err := VerifyChecksums(b, &f); err != nil {
		t.Errorf("after rewrite: %v", err)
	}
	if got := UpdateUDP16(0, 1000, 40000); got != 0 {
		t.Errorf("UpdateUDP16(0, ...) = %#04x, want 0", got)
	}
	if got := UpdateUDP32(0, 1, 2); got != 0 {
		t.Errorf("UpdateUDP32(0, ...) = %#04x, want 0", got)
	}
}

// TestUDPChecksumBecomesZero drives a port rewrite whose checksum comes out
// as 0, which UDP must send as 0xffff.
func TestUDPChecksumBecomesZero(t *testing.T) {
	for _, v6pkt := range []bool{false, true} {
		var b []byte
		if v6pkt {
			ip := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoUDP, HopLimit: 64}
			b = slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip.Build(ip.UDP(1000, 53, frametest.Payload(21))))
		} else {
			ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoUDP, TTL: 64}
			b = slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(ip.UDP(1000, 53, frametest.Payload(21))))
		}
		var f Frame
		if err := Parse(b, &f); err != nil {
			t.Fatal(err)
		}
		// Sum of everything but the source port, with the checksum field zeroed.
		z := slices.Clone(b)
		binary.BigEndian.PutUint16(z[f.L4Off+6:], 0)
		binary.BigEndian.PutUint16(z[f.L4Off:], 0)
		var ps []byte
		if v6pkt {
			ps = frametest.Pseudo6(f.IPv6.Src, f.IPv6.Dst, ProtoUDP, f.L3End-f.L4Off)
		} else {
			ps = frametest.Pseudo4(f.IPv4.Src, f.IPv4.Dst, ProtoUDP, f.L3End-f.L4Off)
		}
		rest := frametest.Sum(ps, z[f.L4Off:f.L3End])
		port := ^rest // makes the total sum 0xffff, the checksum 0
		if !SetSrcPort(b, &f, port) {
			t.Fatal("SetSrcPort refused")
		}
		if got := u16(b, f.L4Off+6); got != 0xffff {
			t.Errorf("v6=%v: UDP checksum after rewrite = %#04x, want 0xffff", v6pkt, got)
		}
		if err := VerifyChecksums(b, &f); err != nil {
			t.Errorf("v6=%v: %v", v6pkt, err)
		}
	}
}

// capturedFrames reads testdata/kernel-frames.hex: frames the Linux kernel
// built (see testdata/README), one per line as "name hex".
func capturedFrames(t testing.TB) map[string][]byte {
	t.Helper()
	data, err := readTestdata("kernel-frames.hex")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, h, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		b, err := hex.DecodeString(strings.TrimSpace(h))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m[name] = b
	}
	return m
}

// TestCapturedKernelFrames checks frames the kernel built: they parse, and
// the checksums the kernel computed agree with ours.
func TestCapturedKernelFrames(t *testing.T) {
	frames := capturedFrames(t)
	if len(frames) == 0 {
		t.Fatal("no captured frames")
	}
	for name, b := range frames {
		t.Run(name, func(t *testing.T) {
			var f Frame
			if err := Parse(b, &f); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.IsIPv4() {
				hdr := b[f.L3Off : f.L3Off+int(f.IPv4.IHL)*4]
				if got := IPv4HeaderChecksum(hdr); got != f.IPv4.Checksum {
					t.Errorf("IPv4HeaderChecksum = %#04x, kernel wrote %#04x", got, f.IPv4.Checksum)
				}
			}
			if at := l4CsumField(&f); at >= 0 && !f.Fragment {
				c, ok := L4Checksum(b, &f)
				if !ok || c != u16(b, at) {
					t.Errorf("L4Checksum = %#04x, %v; kernel wrote %#04x", c, ok, u16(b, at))
				}
			}
			if err := VerifyChecksums(b, &f); err != nil {
				t.Errorf("VerifyChecksums: %v", err)
			}
		})
	}
}
