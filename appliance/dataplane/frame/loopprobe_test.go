package frame

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoopProbe(t *testing.T) {
	want := LoopProbe{Nonce: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Port: 7}
	b := make([]byte, 100)
	n := PutLoopProbe(b, macA, 0, want)
	if n != MinFrameLen {
		t.Fatalf("PutLoopProbe = %d, want %d", n, MinFrameLen)
	}
	probe := b[:n]
	tagged := slices.Concat(probe[:12], []byte{0x81, 0x00, 0x00, 0x05}, probe[12:])
	sentTagged := make([]byte, 100)
	if n := PutLoopProbe(sentTagged, macA, 5, want); n != MinFrameLen {
		t.Fatalf("PutLoopProbe on VLAN 5 = %d, want %d", n, MinFrameLen)
	}
	if diff := cmp.Diff(tagged[:MinFrameLen], sentTagged[:MinFrameLen]); diff != "" {
		t.Errorf("the probe sent on VLAN 5 is not the untagged one with a tag (-want +got):\n%s", diff)
	}
	mutate := func(i int, v byte) []byte {
		c := slices.Clone(probe)
		c[i] ^= v
		return c
	}
	tests := []struct {
		name string
		b    []byte
		tag  *VLANTag
		ok   bool
	}{
		{"untagged", probe, nil, true},
		{"tagged on its way", tagged, nil, true},
		{"sent tagged", sentTagged[:MinFrameLen], nil, true},
		{"tag stripped by the NIC", probe, &VLANTag{TPID: EtherTypeVLAN, TCI: 5}, true},
		{"ECTP forward message", mutate(17, 3), nil, false}, // function 2
		{"skip count", mutate(15, 2), nil, false},
		{"magic", mutate(20, 1), nil, false},
		{"short", probe[:20], nil, false},
		{"not ECTP", mutate(12, 1), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Frame
			var err error
			if tt.tag != nil {
				err = ParseWithTag(tt.b, *tt.tag, &f)
			} else {
				err = Parse(tt.b, &f)
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, ok := ParseLoopProbe(tt.b, &f)
			if ok != tt.ok {
				t.Fatalf("ParseLoopProbe ok = %v, want %v", ok, tt.ok)
			}
			if ok {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("probe (-want +got):\n%s", diff)
				}
				if f.Dst != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} || f.Src != macA {
					t.Errorf("probe from %x to %x, want broadcast from %x", f.Src, f.Dst, macA)
				}
			}
		})
	}
	if n := PutLoopProbe(make([]byte, MinFrameLen-1), macA, 0, want); n != 0 {
		t.Errorf("PutLoopProbe into a short buffer = %d, want 0", n)
	}
}

// FuzzLoopProbe: ParseLoopProbe never panics, and what it reads writes
// back to a probe that reads the same.
func FuzzLoopProbe(f *testing.F) {
	b := make([]byte, MinFrameLen)
	PutLoopProbe(b, macA, 0, LoopProbe{Nonce: [8]byte{9}, Port: 3})
	f.Add(b)
	f.Add(b[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		if Parse(b, &fr) != nil {
			return
		}
		p, ok := ParseLoopProbe(b, &fr)
		if !ok {
			return
		}
		out := make([]byte, MinFrameLen)
		PutLoopProbe(out, fr.Src, 0, p)
		var fr2 Frame
		if err := Parse(out, &fr2); err != nil {
			t.Fatalf("a written probe does not parse: %v", err)
		}
		if q, ok := ParseLoopProbe(out, &fr2); !ok || q != p {
			t.Fatalf("round trip: %+v, %v; want %+v", q, ok, p)
		}
	})
}
