package dataplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/ingressdrop"
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

func TestPortBindings(t *testing.T) {
	base := []afpacket.Binding{{EtherType: frame.EtherTypeIPv4}, {EtherType: frame.EtherTypeIPv6},
		{EtherType: frame.EtherTypeARP, Frames: smallRing}}
	routed := append(base[:3:3], afpacket.Binding{EtherType: ingressdrop.MarkerTPID, Frames: smallRing})
	bridged := append(base[:3:3], afpacket.Binding{EtherType: ingressdrop.MarkerTPID})
	if diff := cmp.Diff(routed, portBindings(true)); diff != "" {
		t.Errorf("routed-only (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(bridged, portBindings(false)); diff != "" {
		t.Errorf("bridging (-want +got):\n%s", diff)
	}
	for _, r := range []bool{true, false} {
		cfg := afpacket.Config{Bind: portBindings(r)}
		if _, err := cfg.Geometry(1500); err != nil {
			t.Errorf("routed %v: the bindings' ring config: %v", r, err)
		}
	}
}
