package frame

import (
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// shifted returns want as Parse reports it for the same frame with a tag
// inserted in the bytes instead of stripped: offsets move by 4.
func shifted(f Frame) Frame {
	f.Stripped = false
	for _, p := range []*int{&f.L3Off, &f.L3End, &f.L4Off, &f.PayloadOff, &f.ICMP.EmbeddedOff} {
		if *p != 0 {
			*p += VLANTagLen
		}
	}
	return f
}

// TestInsertVLANMatchesStripped re-inserts a tag the way the dataplane does
// for tp_vlan_tci and checks that parsing the result agrees with
// ParseWithTag on the untagged frame.
func TestInsertVLANMatchesStripped(t *testing.T) {
	for _, tc := range parseCases() {
		if tc.want.NTags == MaxVLANTags || tc.tag != nil {
			continue // no room for another tag, or already stripped
		}
		t.Run(tc.name, func(t *testing.T) {
			src := tc.b
			tag := VLANTag{TPID: EtherTypeQinQ, TCI: 6<<13 | 999}
			var stripped Frame
			if err := ParseWithTag(src, tag, &stripped); err != nil {
				t.Fatalf("ParseWithTag: %v", err)
			}
			dst := make([]byte, len(src)+VLANTagLen)
			n, err := InsertVLAN(dst, src, tag)
			if err != nil || n != len(dst) {
				t.Fatalf("InsertVLAN = %d, %v; want %d, nil", n, err, len(dst))
			}
			var got Frame
			if err := Parse(dst[:n], &got); err != nil {
				t.Fatalf("Parse after InsertVLAN: %v", err)
			}
			if diff := cmp.Diff(shifted(stripped), got); diff != "" {
				t.Errorf("(-ParseWithTag shifted +Parse of tagged frame):\n%s", diff)
			}
			// Checksums do not cover the Ethernet header.
			if err := VerifyChecksums(dst[:n], &got); err != nil {
				t.Errorf("VerifyChecksums: %v", err)
			}
			// RemoveVLAN gives the original back.
			back := make([]byte, len(src))
			m, rtag, err := RemoveVLAN(back, dst[:n])
			if err != nil || m != len(src) || rtag != tag || !slices.Equal(back, src) {
				t.Errorf("RemoveVLAN = %d, %+v, %v; frame equal %v", m, rtag, err, slices.Equal(back, src))
			}
			// In place, both ways.
			buf := make([]byte, len(src), len(src)+VLANTagLen)
			copy(buf, src)
			n, err = InsertVLAN(buf[:cap(buf)], buf, tag)
			if err != nil || !slices.Equal(buf[:n], dst[:n]) {
				t.Fatalf("in-place InsertVLAN = %d, %v; equal %v", n, err, slices.Equal(buf[:n], dst[:n]))
			}
			m, rtag, err = RemoveVLAN(buf, buf[:n])
			if err != nil || rtag != tag || !slices.Equal(buf[:m], src) {
				t.Errorf("in-place RemoveVLAN = %d, %+v, %v", m, rtag, err)
			}
			// StripVLAN in place.
			copy(buf[:cap(buf)], dst)
			out, stag, err := StripVLAN(buf[:cap(buf)])
			if err != nil || stag != tag || !slices.Equal(out, src) {
				t.Errorf("StripVLAN = %x, %+v, %v", out, stag, err)
			}
		})
	}
}

func TestVLANHelperErrors(t *testing.T) {
	untagged := slices.Concat(frametest.Eth(macB, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B))
	tagged := slices.Concat(frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag{TPID: EtherTypeVLAN, TCI: 5}), frametest.ARP(1, macA, ip4A, mac{}, ip4B))
	big := make([]byte, 200)
	if _, err := InsertVLAN(big, untagged[:13], VLANTag{}); err != ErrTruncated {
		t.Errorf("InsertVLAN short src: %v, want %v", err, ErrTruncated)
	}
	if _, err := InsertVLAN(big[:len(untagged)+3], untagged, VLANTag{}); err != io.ErrShortBuffer {
		t.Errorf("InsertVLAN short dst: %v, want %v", err, io.ErrShortBuffer)
	}
	n, err := InsertVLAN(big, untagged, VLANTag{TCI: 42})
	if err != nil || u16(big, 12) != EtherTypeVLAN || u16(big, 14) != 42 || n != len(untagged)+4 {
		t.Errorf("InsertVLAN with TPID 0 wrote %x (%d, %v), want 802.1Q tag 42", big[12:16], n, err)
	}
	if _, _, err := RemoveVLAN(big, untagged); err != ErrNotTagged {
		t.Errorf("RemoveVLAN untagged: %v, want %v", err, ErrNotTagged)
	}
	if _, _, err := RemoveVLAN(big, tagged[:16]); err != ErrTruncated {
		t.Errorf("RemoveVLAN cut tag: %v, want %v", err, ErrTruncated)
	}
	if _, _, err := RemoveVLAN(big, untagged[:10]); err != ErrTruncated {
		t.Errorf("RemoveVLAN short: %v, want %v", err, ErrTruncated)
	}
	if _, _, err := RemoveVLAN(big[:10], tagged); err != io.ErrShortBuffer {
		t.Errorf("RemoveVLAN short dst: %v, want %v", err, io.ErrShortBuffer)
	}
	if _, _, err := StripVLAN(slices.Clone(untagged)); err != ErrNotTagged {
		t.Errorf("StripVLAN untagged: %v, want %v", err, ErrNotTagged)
	}
	// QinQ: removing the outer tag leaves the inner one.
	qinq := slices.Concat(frametest.Eth(macB, macA, EtherTypeARP, frametest.Tag{TPID: EtherTypeQinQ, TCI: 1}, frametest.Tag{TPID: EtherTypeVLAN, TCI: 2}),
		frametest.ARP(1, macA, ip4A, mac{}, ip4B))
	out, tag, err := StripVLAN(qinq)
	if err != nil || tag != (VLANTag{TPID: EtherTypeQinQ, TCI: 1}) {
		t.Fatalf("StripVLAN QinQ = %+v, %v", tag, err)
	}
	var f Frame
	if err := Parse(out, &f); err != nil || f.NTags != 1 || f.Tags[0] != (VLANTag{TPID: EtherTypeVLAN, TCI: 2}) || f.Src != macA || f.Dst != macB {
		t.Errorf("after StripVLAN: %+v, %v", f, err)
	}
}
