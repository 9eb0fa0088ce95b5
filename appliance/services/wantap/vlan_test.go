package wantap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVLANTag(t *testing.T) {
	f := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x45, 0xaa}
	for _, tc := range []struct {
		name string
		v    VLAN
		in   []byte
		want []byte
	}{
		{"VLAN 7, priority 6", VLAN{ID: 7, PCP: 6}, f, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0xc0, 0x07, 0x08, 0x00, 0x45, 0xaa}},
		{"VLAN 4094, priority 0", VLAN{ID: 4094}, f, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x0f, 0xfe, 0x08, 0x00, 0x45, 0xaa}},
		{"VLAN 832, priority 7", VLAN{ID: 832, PCP: 7}, f[:14], []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0xe3, 0x40, 0x08, 0x00}},
		{"untagged", VLAN{}, f, f},
		{"too short", VLAN{ID: 7}, f[:13], f[:13]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.in...)
			got := tc.v.Tag(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Tag (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.in, in); diff != "" {
				t.Errorf("Tag changed its input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVLANCheck(t *testing.T) {
	for _, tc := range []struct {
		v  VLAN
		ok bool
	}{
		{VLAN{}, true}, {VLAN{ID: 1}, true}, {VLAN{ID: 4094, PCP: 7}, true},
		{VLAN{ID: 4095}, false}, {VLAN{ID: 7, PCP: 8}, false}, {VLAN{PCP: 1}, false},
	} {
		if err := tc.v.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v.Check() = %v, want ok %v", tc.v, err, tc.ok)
		}
	}
}
