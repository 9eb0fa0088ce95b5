package frame

import (
	"errors"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestZeroAllocs proves the per-packet functions never allocate, on every
// table frame and every drop case.
func TestZeroAllocs(t *testing.T) {
	var f Frame
	var in Inner
	check := func(name string, fn func()) {
		t.Helper()
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
	for _, tc := range parseCases() {
		b := slices.Clone(tc.b)
		tag := VLANTag{TCI: 10}
		if tc.tag != nil {
			tag = *tc.tag
		}
		check(tc.name+": Parse", func() { _ = Parse(b, &f) })
		check(tc.name+": ParseWithTag", func() { _ = ParseWithTag(b, tag, &f) })
		if err := Parse(b, &f); err != nil {
			continue // QinQ plus a stripped tag
		}
		check(tc.name+": ParseEmbedded", func() { _ = ParseEmbedded(b, &f, &in) })
		check(tc.name+": VerifyChecksums", func() { _ = VerifyChecksums(b, &f) })
		check(tc.name+": L4Checksum", func() { _, _ = L4Checksum(b, &f) })
		check(tc.name+": IPv4HeaderValid", func() { _ = IPv4HeaderValid(b, &f) })
		check(tc.name+": SetChecksums", func() { SetChecksums(b, &f) })
		check(tc.name+": rewrites", func() {
			SetIPv4Src(b, &f, ip4B)
			SetIPv4Dst(b, &f, ip4A)
			SetIPv6Src(b, &f, ip6B)
			SetIPv6Dst(b, &f, ip6A)
			SetSrcPort(b, &f, 1)
			SetDstPort(b, &f, 2)
			SetICMPEchoID(b, &f, 3)
			DecTTL(b, &f)
		})
		dst := make([]byte, len(b)+VLANTagLen)
		check(tc.name+": VLAN helpers", func() {
			n, _ := InsertVLAN(dst, b, VLANTag{TCI: 5})
			_, _, _ = RemoveVLAN(dst, dst[:n])
			_, _ = InsertVLAN(dst, dst[:n-VLANTagLen], VLANTag{TCI: 5})
			_, _, _ = StripVLAN(dst)
		})
	}
	for _, tc := range errCases() {
		check(tc.name+": Parse error", func() {
			err := Parse(tc.b, &f)
			_ = ReasonOf(err)
			_ = errors.Is(err, ErrTruncated)
		})
	}
	buf := frametest.Payload(1500)
	check("Sum", func() { _ = Sum(buf, 0) })
	check("Checksum", func() { _ = Checksum(buf[1:], 7) })
	check("PseudoSums", func() {
		_ = PseudoSumIPv4(ip4A, ip4B, ProtoUDP, 100)
		_ = PseudoSumIPv6(ip6A, ip6B, ProtoTCP, 100)
	})
	check("Updates", func() {
		_ = Update16(1, 2, 3)
		_ = Update32(1, 2, 3)
		_ = UpdateBytes(1, ip6A[:], ip6B[:])
		_ = UpdateUDP16(1, 2, 3)
		_ = UpdateUDP32(1, 2, 3)
	})
}
