package router

import (
	"net"
	"testing"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpclient"
)

// TestWANVLAN: the WAN clients talk over nat.wan.vlan with its control
// priority, in NAT mode only; a change of the VLAN or the control
// priority changes what the clients are bound to (Apply restarts them),
// a change of the data priority does not.
func TestWANVLAN(t *testing.T) {
	vlan := config.LinkVLAN{ID: 7, PCP: 3, ControlPCP: 6}
	mk := func(mode config.Mode, v config.LinkVLAN) *config.Config {
		c := &config.Config{Mode: mode}
		c.NAT.WAN.VLAN = v
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		want dhcpclient.VLAN
	}{
		{"NAT, VLAN 7", mk(config.ModeNAT, vlan), dhcpclient.VLAN{ID: 7, PCP: 6}},
		{"NAT, untagged", mk(config.ModeNAT, config.LinkVLAN{}), dhcpclient.VLAN{}},
		{"bridge", mk(config.ModeBridge, vlan), dhcpclient.VLAN{}},
	} {
		if got := wanVLAN(tc.cfg); got != tc.want {
			t.Errorf("%s: wanVLAN = %+v, want %+v", tc.name, got, tc.want)
		}
	}

	p := &config.Port{Interface: "eth0"}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	at := func(v config.LinkVLAN) string { return wanAt(p, mac, wanVLAN(mk(config.ModeNAT, v))) }
	base := at(vlan)
	for _, tc := range []struct {
		name    string
		v       config.LinkVLAN
		restart bool
	}{
		{"the same", vlan, false},
		{"another data priority", config.LinkVLAN{ID: 7, PCP: 5, ControlPCP: 6}, false},
		{"another VLAN", config.LinkVLAN{ID: 8, PCP: 3, ControlPCP: 6}, true},
		{"another control priority", config.LinkVLAN{ID: 7, PCP: 3, ControlPCP: 0}, true},
		{"untagged", config.LinkVLAN{}, true},
	} {
		if got := at(tc.v) != base; got != tc.restart {
			t.Errorf("%s: %q against %q: restart %v, want %v", tc.name, at(tc.v), base, got, tc.restart)
		}
	}
}
