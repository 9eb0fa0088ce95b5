package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
)

// tagOf describes a frame's outer tag: "-" untagged, else "vid N".
func tagOf(b []byte) string {
	if b == nil {
		return "none"
	}
	if binary.BigEndian.Uint16(b[12:]) != frame.EtherTypeVLAN {
		return "-"
	}
	return "vid " + itoaVID(int(binary.BigEndian.Uint16(b[14:])&0xfff))
}

func itoaVID(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestVLANAwarePorts(t *testing.T) {
	// p1: native 10, tagged 20; p2: native 20, tagged 10; p3 VLAN-unaware;
	// 4 the host port (unaware).
	aware := func(c *Config) {
		c.Ports[0].VLANs = &VLANs{Native: 10, Allowed: []uint16{20}}
		c.Ports[1].VLANs = &VLANs{Native: 20, Allowed: []uint16{10}}
	}
	tag := func(vid uint16) frame.VLANTag { return frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 0x2000 | vid} }
	tests := []struct {
		name     string
		mutate   func(*Config)
		in       uint16
		frame    []byte
		stripped *frame.VLANTag
		want     map[int]string // out port → tagOf its copy ("none": no copy)
		wantDrop Drop
	}{
		{name: "untagged on p1 is VLAN 10: tagged on p2, as is on unaware ports", in: 1,
			frame: arpFrame(bcast, macA), want: map[int]string{1: "none", 2: "vid 10", 3: "-", 4: "-"}},
		{name: "VLAN 20 tag in the frame on p1: untagged on p2 (its native)", in: 1,
			frame: tagged(arpFrame(bcast, macA), tag(20)), want: map[int]string{1: "none", 2: "-", 3: "vid 20", 4: "vid 20"}},
		{name: "VLAN 20 tag stripped by the kernel: the same", in: 1, stripped: &[]frame.VLANTag{tag(20)}[0],
			frame: arpFrame(bcast, macA), want: map[int]string{1: "none", 2: "-", 3: "vid 20", 4: "vid 20"}},
		{name: "a VLAN p1 does not carry is dropped", in: 1,
			frame: tagged(arpFrame(bcast, macA), tag(30)), want: map[int]string{1: "none", 2: "none", 3: "none", 4: "none"}, wantDrop: DropVLAN},
		{name: "priority-tagged is the native VLAN; the tag gets its VID", in: 1,
			frame: tagged(arpFrame(bcast, macA), tag(0)), want: map[int]string{1: "none", 2: "vid 10", 3: "vid 0", 4: "vid 0"}},
		{name: "untagged from an unaware port is VLAN 0: no aware port carries it", in: 3,
			frame: arpFrame(bcast, macA), want: map[int]string{1: "none", 2: "none", 3: "none", 4: "-"}},
		{name: "VLAN 10 from an unaware port: untagged on p1, tagged on p2", in: 3,
			frame: tagged(arpFrame(bcast, macA), tag(10)), want: map[int]string{1: "-", 2: "vid 10", 3: "none", 4: "vid 10"}},
		{name: "no native VLAN: untagged frames are dropped", in: 2,
			mutate: func(c *Config) { aware(c); c.Ports[1].VLANs.Native = 0 },
			frame:  arpFrame(bcast, macA), want: map[int]string{1: "none", 2: "none", 3: "none", 4: "none"}, wantDrop: DropVLAN},
		{name: "an 802.1ad outer tag on an aware port is dropped", in: 1,
			frame: tagged(arpFrame(bcast, macA), frame.VLANTag{TPID: frame.EtherTypeQinQ, TCI: 10}), want: map[int]string{1: "none", 2: "none", 3: "none", 4: "none"}, wantDrop: DropVLAN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.mutate
			if m == nil {
				m = aware
			}
			b := newTestBridge(t, 3, true, "", false, m)
			var st frame.VLANTag
			if tt.stripped != nil {
				st = *tt.stripped
			}
			out := b.rx(tt.in, tt.frame, tt.stripped != nil, st)
			got := map[int]string{}
			for id := 1; id < len(out); id++ {
				got[id] = tagOf(out[id])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("copies by port (-want +got):\n%s", diff)
			}
			for id := 1; id < len(out); id++ {
				if out[id] == nil {
					continue
				}
				var f frame.Frame
				if err := frame.Parse(out[id], &f); err != nil || f.EtherType != frame.EtherTypeARP {
					t.Errorf("port %d's copy does not parse as ARP: %v", id, err)
				}
			}
			if d := b.drops(); tt.wantDrop != 0 && d[tt.wantDrop] != 1 {
				t.Errorf("drops %v, want one %v", d, tt.wantDrop)
			}
		})
	}
}

// TestVLANLearning: a MAC learned in VLAN 10 through an aware port's
// untagged traffic is unicast back only within VLAN 10.
func TestVLANLearning(t *testing.T) {
	b := newTestBridge(t, 3, false, "", false, func(c *Config) {
		c.Ports[0].VLANs = &VLANs{Native: 10}
		c.Ports[1].VLANs = &VLANs{Allowed: []uint16{10}}
	})
	b.rx(1, arpFrame(bcast, macA), false, frame.VLANTag{}) // macA in VLAN 10 on p1
	tag10 := frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 10}
	out := b.rx(2, tagged(arpFrame(macA, macB), tag10), false, frame.VLANTag{})
	if got := []string{tagOf(out[1]), tagOf(out[3])}; !cmp.Equal(got, []string{"-", "none"}) {
		t.Errorf("unicast to macA in VLAN 10: p1 %s, p3 %s; want untagged on p1 only", got[0], got[1])
	}
}

// tagged inserts tag into an untagged frame.
func tagged(b []byte, tag frame.VLANTag) []byte {
	out := append([]byte(nil), b[:12]...)
	out = binary.BigEndian.AppendUint16(out, tag.TPID)
	out = binary.BigEndian.AppendUint16(out, tag.TCI)
	return append(out, b[12:]...)
}
