package dataplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame"
)

func TestRoutedOnly(t *testing.T) {
	lan, wan := Port{Role: RoleLAN}, Port{Role: RoleWAN}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []bool // by port
	}{
		{"bridge", Config{Mode: ModeBridge, Ports: []Port{lan, lan}}, []bool{false, false}},
		{"NAT, one LAN port", Config{Mode: ModeNAT, Ports: []Port{lan, wan}}, []bool{true, true}},
		{"NAT, a LAN segment of two", Config{Mode: ModeNAT, Ports: []Port{lan, wan, lan}}, []bool{false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []bool
			for i := range tc.cfg.Ports {
				got = append(got, tc.cfg.routedOnly(i))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("routedOnly by port (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoutedBindings(t *testing.T) {
	wan := []afpacket.Binding{{EtherType: frame.EtherTypeIPv4}, {EtherType: frame.EtherTypeIPv6},
		{EtherType: frame.EtherTypeARP, Frames: smallRing}}
	lan := append(wan, afpacket.Binding{EtherType: frame.EtherTypeLoopback, Frames: smallRing})
	if diff := cmp.Diff(wan, routedBindings(RoleWAN)); diff != "" {
		t.Errorf("WAN (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lan, routedBindings(RoleLAN)); diff != "" {
		t.Errorf("LAN (-want +got):\n%s", diff)
	}
	for _, role := range []Role{RoleLAN, RoleWAN} {
		cfg := afpacket.Config{Bind: routedBindings(role)}
		if _, err := cfg.Geometry(1500); err != nil {
			t.Errorf("role %v: the bindings' ring config: %v", role, err)
		}
	}
}
