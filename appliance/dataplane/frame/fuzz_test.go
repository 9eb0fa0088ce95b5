package frame

import (
	"encoding/binary"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame/frametest"
)

func addSeeds(f *testing.F, add func(b []byte)) {
	for _, tc := range parseCases() {
		add(tc.b)
	}
	for _, tc := range errCases() {
		add(tc.b)
	}
	for _, b := range capturedFrames(f) {
		add(b)
	}
}

// checkOffsets fails unless every offset f reports lies within b and the
// offsets are ordered as documented.
func checkOffsets(t *testing.T, b []byte, f *Frame) {
	t.Helper()
	n := len(b)
	switch {
	case f.NTags < 0 || f.NTags > MaxVLANTags:
		t.Fatalf("NTags %d", f.NTags)
	case f.L3Off < 0 || f.L3End < f.L3Off || f.L3End > n:
		t.Fatalf("L3 [%d, %d) outside [0, %d]", f.L3Off, f.L3End, n)
	case f.L4Off != 0 && (f.L4Off <= f.L3Off || f.L4Off > f.L3End):
		t.Fatalf("L4Off %d outside L3 (%d, %d]", f.L4Off, f.L3Off, f.L3End)
	case f.PayloadOff != 0 && (f.PayloadOff <= f.L4Off || f.PayloadOff <= f.L3Off || f.PayloadOff > f.L3End):
		t.Fatalf("PayloadOff %d outside (max(%d, %d), %d]", f.PayloadOff, f.L3Off, f.L4Off, f.L3End)
	case f.ICMP.EmbeddedOff != 0 && (f.ICMP.EmbeddedOff < f.PayloadOff || f.ICMP.EmbeddedOff >= f.L3End):
		t.Fatalf("EmbeddedOff %d outside [%d, %d)", f.ICMP.EmbeddedOff, f.PayloadOff, f.L3End)
	case f.LaterFragment && (!f.Fragment || f.L4Off != 0):
		t.Fatalf("later fragment with Fragment %v, L4Off %d", f.Fragment, f.L4Off)
	}
}

// FuzzParse: Parse, ParseWithTag and ParseEmbedded never panic, every offset
// lies within the input, and the helpers that use a parsed frame neither
// panic nor break checksums that were valid.
func FuzzParse(f *testing.F) {
	addSeeds(f, func(b []byte) {
		f.Add(b, false, uint16(0), uint16(0), uint32(0))
	})
	f.Add(slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), frametest.IPv4{Src: ip4A, Proto: ProtoUDP}.Build(frametest.UDPRaw(1, 2, nil))), true, uint16(EtherTypeQinQ), uint16(77), uint32(0x01020304))
	f.Fuzz(func(t *testing.T, b []byte, stripped bool, tpid, tci uint16, val uint32) {
		var fr Frame
		var err error
		if stripped {
			err = ParseWithTag(b, VLANTag{TPID: tpid, TCI: tci}, &fr)
		} else {
			err = Parse(b, &fr)
		}
		checkOffsets(t, b, &fr)
		if ReasonOf(err) >= NumReasons || err != nil && ReasonOf(err) == ReasonOther {
			t.Fatalf("error outside the reasons: %v", err)
		}
		if err != nil {
			return
		}
		if fr.IsIPv4() && (fr.IPv4.IHL < 5 || fr.L3End != fr.L3Off+int(fr.IPv4.TotalLen)) {
			t.Fatalf("IPv4 IHL %d total %d but L3 [%d, %d)", fr.IPv4.IHL, fr.IPv4.TotalLen, fr.L3Off, fr.L3End)
		}
		if fr.IsIPv6() && fr.L3End != fr.L3Off+IPv6HeaderLen+int(fr.IPv6.PayloadLen) {
			t.Fatalf("IPv6 payload %d but L3 [%d, %d)", fr.IPv6.PayloadLen, fr.L3Off, fr.L3End)
		}
		if fr.HasL4() && fr.Proto == ProtoTCP && fr.L4Off+int(fr.TCP.DataOff)*4 > fr.L3End {
			t.Fatalf("TCP header past the packet")
		}

		var in Inner
		if ParseEmbedded(b, &fr, &in) == nil {
			if in.L3Off != fr.ICMP.EmbeddedOff || in.L4Off != 0 && (in.L4Off <= in.L3Off || in.L4Off+quotedL4Len > fr.L3End) {
				t.Fatalf("inner offsets L3 %d L4 %d outside the quote [%d, %d)", in.L3Off, in.L4Off, fr.ICMP.EmbeddedOff, fr.L3End)
			}
		}

		valid := VerifyChecksums(b, &fr) == nil
		_, _ = L4Checksum(b, &fr)
		_ = IPv4HeaderValid(b, &fr)

		// Rewrites keep valid checksums valid and f in step with the bytes.
		w := slices.Clone(b)
		wf := fr
		var a4 [4]byte
		var a16 [16]byte
		binary.BigEndian.PutUint32(a4[:], val)
		binary.BigEndian.PutUint32(a16[12:], val)
		SetIPv4Src(w, &wf, a4)
		SetIPv4Dst(w, &wf, a4)
		SetIPv6Src(w, &wf, a16)
		SetIPv6Dst(w, &wf, a16)
		SetSrcPort(w, &wf, uint16(val))
		SetDstPort(w, &wf, uint16(val>>16))
		SetICMPEchoID(w, &wf, uint16(val))
		DecTTL(w, &wf)
		var again Frame
		if stripped {
			err = ParseWithTag(w, VLANTag{TPID: tpid, TCI: tci}, &again)
		} else {
			err = Parse(w, &again)
		}
		if err != nil {
			t.Fatalf("reparse after rewrite: %v", err)
		}
		if again != wf {
			t.Fatalf("frame out of step after rewrite:\nkept     %+v\nreparsed %+v", wf, again)
		}
		zeroUDP := fr.HasL4() && fr.Proto == ProtoUDP && fr.UDP.Checksum == 0
		if valid && !zeroUDP {
			if err := VerifyChecksums(w, &wf); err != nil {
				t.Fatalf("rewrite broke valid checksums: %v", err)
			}
		}
		SetChecksums(w, &wf)
		if err := VerifyChecksums(w, &wf); err != nil && !zeroUDP {
			t.Fatalf("VerifyChecksums after SetChecksums: %v", err)
		}

		// VLAN insert/remove round trip.
		if len(b) >= EthernetHeaderLen {
			dst := make([]byte, len(b)+VLANTagLen)
			tag := VLANTag{TPID: EtherTypeVLAN, TCI: tci}
			if tpid == EtherTypeQinQ {
				tag.TPID = tpid
			}
			n, err := InsertVLAN(dst, b, tag)
			if err != nil {
				t.Fatalf("InsertVLAN: %v", err)
			}
			back := make([]byte, len(b))
			m, rtag, err := RemoveVLAN(back, dst[:n])
			if err != nil || rtag != tag || !slices.Equal(back[:m], b) {
				t.Fatalf("RemoveVLAN round trip: %+v, %v", rtag, err)
			}
		}
	})
}

// FuzzChecksum: Sum agrees with the reference, and an incremental update
// agrees with a full recompute.
func FuzzChecksum(f *testing.F) {
	addSeeds(f, func(b []byte) { f.Add(b, uint16(0), uint16(0), uint32(0)) })
	f.Add(slices.Repeat([]byte{0xff}, 64), uint16(0xffff), uint16(2), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, initial, at uint16, to uint32) {
		if got, want := Sum(b, initial), refSumInit(b, initial); got != want {
			t.Fatalf("Sum = %#04x, reference %#04x", got, want)
		}
		b = b[:len(b)&^1]
		if len(b) < 4 {
			return
		}
		b = slices.Clone(b) // inputs must not be modified
		i := int(at) % (len(b) - 2) &^ 1
		old := slices.Clone(b)
		csum := frametest.Checksum(b)
		from := binary.BigEndian.Uint32(slices.Concat(b[i:i+2], []byte{0, 0}))
		if i+4 <= len(b) {
			from = binary.BigEndian.Uint32(b[i:])
			binary.BigEndian.PutUint32(b[i:], to)
			if got, want := Update32(csum, from, to), frametest.Checksum(b); !sameChecksum(got, want, old, b) {
				t.Fatalf("Update32 = %#04x, full %#04x", got, want)
			}
			return
		}
		binary.BigEndian.PutUint16(b[i:], uint16(to))
		if got, want := Update16(csum, uint16(from>>16), uint16(to)), frametest.Checksum(b); !sameChecksum(got, want, old, b) {
			t.Fatalf("Update16 = %#04x, full %#04x", got, want)
		}
	})
}

// sameChecksum compares an incrementally updated checksum with a full
// recompute. They are equal bit for bit unless the data before or after the
// change sums to zero (all zero bytes): then RFC 1624's update may give the
// other representation of zero (0x0000 for 0xffff, which verifies the same).
// Real packets never sum to zero: the pseudo header or the ICMP type is non-zero.
func sameChecksum(got, want uint16, before, after []byte) bool {
	if got == want {
		return true
	}
	return (frametest.Sum(before) == 0 || frametest.Sum(after) == 0) && got^want == 0xffff
}
