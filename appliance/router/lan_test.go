package router

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"e1kbox/appliance/config"
)

// TestDHCPConfig: the DHCP server gets the config's starvation limits
// and the dataplane's answers about LAN devices (Options).
func TestDHCPConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"version": 3, "mode": "nat",
		"ports": [{"name": "wan", "interface": "eth0", "role": "wan"},
			{"name": "lan1", "interface": "eth1", "role": "lan", "addresses": ["192.168.7.1/24"]}],
		"nat": {"wanDHCP": true},
		"dhcp": {"probation": "2m", "unprovenShare": 10, "newDevicesPerSecond": 5}}`))
	if err != nil {
		t.Fatal(err)
	}
	asked := ""
	r := &Router{cfg: cfg, opts: Options{State: t.TempDir(),
		LANPort:     func(hw net.HardwareAddr) string { asked = hw.String(); return "lan1" },
		LANActivity: func(netip.Addr, net.HardwareAddr) time.Time { return time.Unix(1, 0) }}}
	d := r.dhcpConfig()
	if d.Probation != 2*time.Minute || d.UnprovenShare != 10 || d.NewLeasesPerSecond != 5 {
		t.Errorf("limits: probation %v, share %d, new devices %d/s; want 2m, 10, 5", d.Probation, d.UnprovenShare, d.NewLeasesPerSecond)
	}
	if d.PortOf == nil || d.Activity == nil {
		t.Fatal("the dataplane's answers are not wired")
	}
	hw := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	if p := d.PortOf(hw); p != "lan1" || asked != hw.String() {
		t.Errorf("PortOf = %q (asked %q)", p, asked)
	}
	if a := d.Activity(netip.MustParseAddr("192.168.7.9"), hw); !a.Equal(time.Unix(1, 0)) {
		t.Errorf("Activity = %v", a)
	}
}
