package ingressdrop

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnmark(t *testing.T) {
	macs := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name   string
		in     []byte
		want   []byte
		marked bool
	}{
		{"untagged, another EtherType", cat(macs, []byte{0x81, 0x00, 0x0f, 0xff, 0x88, 0xb5, 0xaa}), cat(macs, []byte{0x88, 0xb5, 0xaa}), true},
		{"a tagged frame keeps its tag", cat(macs, []byte{0x81, 0x00, 0x0f, 0xff, 0x81, 0x00, 0x20, 0x05, 0x08, 0x00}), cat(macs, []byte{0x81, 0x00, 0x20, 0x05, 0x08, 0x00}), true},
		{"PCP and DEI bits of the marker are ignored", cat(macs, []byte{0x81, 0x00, 0xff, 0xff, 0x90, 0x00}), cat(macs, []byte{0x90, 0x00}), true},
		{"a real tag of another VLAN", cat(macs, []byte{0x81, 0x00, 0x0f, 0xfe, 0x08, 0x00}), nil, false},
		{"an 802.1ad tag of VLAN 4095", cat(macs, []byte{0x88, 0xa8, 0x0f, 0xff, 0x08, 0x00}), nil, false},
		{"untagged IPv4", cat(macs, []byte{0x08, 0x00, 0x45}), nil, false},
		{"too short for the marker and an EtherType", cat(macs, []byte{0x81, 0x00, 0x0f, 0xff}), nil, false},
		{"empty", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.in)
			got, ok := Unmark(in)
			if ok != tc.marked {
				t.Fatalf("Unmark marked = %v, want %v", ok, tc.marked)
			}
			want := tc.want
			if !ok {
				want = tc.in
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("Unmark (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzUnmark(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x0f, 0xff, 0x88, 0xb5})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		got, ok := Unmark(b)
		if !ok {
			if !bytes.Equal(got, orig) {
				t.Fatalf("an unmarked frame changed: %x → %x", orig, got)
			}
			return
		}
		// The marked frame minus the marker's four bytes.
		want := append(bytes.Clone(orig[:12]), orig[16:]...)
		if !bytes.Equal(got, want) {
			t.Fatalf("Unmark(%x) = %x, want %x", orig, got, want)
		}
	})
}
