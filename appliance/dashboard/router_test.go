package dashboard

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/router"
	"e1kbox/webui"
)

var addrs = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// TestDeviceBytes: a connection counts for the LAN device that opened it
// (original source) or that a port forward reaches (reply source); others
// count for nobody.
func TestDeviceBytes(t *testing.T) {
	ap := netip.MustParseAddrPort
	conn := func(os, od, rs, rd string, b0, b1 uint64) *dataplane.Conn {
		return &dataplane.Conn{Orig: dataplane.ConnTuple{Src: ap(os), Dst: ap(od)},
			Reply: dataplane.ConnTuple{Src: ap(rs), Dst: ap(rd)}, Bytes: [2]uint64{b0, b1}}
	}
	devs := []webui.Device{{Address: netip.MustParseAddr("192.168.1.10")}, {Address: netip.MustParseAddr("192.168.1.11")}}
	byIP := map[netip.Addr]int{devs[0].Address: 0, devs[1].Address: 1}
	for _, c := range []*dataplane.Conn{
		conn("192.168.1.10:5000", "1.1.1.1:443", "1.1.1.1:443", "203.0.113.2:1024", 100, 1000),           // .10 out
		conn("192.168.1.10:5001", "1.1.1.1:53", "1.1.1.1:53", "203.0.113.2:1025", 60, 120),               // .10 out
		conn("198.51.100.7:4000", "203.0.113.2:8080", "192.168.1.11:80", "198.51.100.7:4000", 300, 5000), // forward to .11
		conn("192.168.1.1:6000", "9.9.9.9:53", "9.9.9.9:53", "203.0.113.2:1026", 7, 7),                   // the box itself
	} {
		addBytes(devs, byIP, c)
	}
	want := []webui.Device{
		{Address: devs[0].Address, BytesOut: 160, BytesIn: 1120},
		{Address: devs[1].Address, BytesOut: 5000, BytesIn: 300},
	}
	if diff := cmp.Diff(want, devs, addrs); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
}

// TestRouterViewModes: no router in bridge mode; a static WAN address in
// NAT mode without the WAN DHCP client; no DHCP server, no devices.
func TestRouterViewModes(t *testing.T) {
	var live atomic.Pointer[router.Live]
	v := &Router{live: live.Load}
	if _, ok := v.RouterStatus(); ok {
		t.Error("RouterStatus before Apply: ok")
	}
	live.Store(&router.Live{Config: &config.Config{Mode: config.ModeBridge}})
	if _, ok := v.RouterStatus(); ok {
		t.Error("RouterStatus in bridge mode: ok")
	}
	cfg := &config.Config{Mode: config.ModeNAT, NAT: config.NAT{Gateway: netip.MustParseAddr("203.0.113.1")},
		Ports: []config.Port{{Name: "wan", Interface: "eth1", Role: config.RoleWAN, MTU: 1492,
			Addresses: []netip.Prefix{netip.MustParsePrefix("2001:db8::2/64"), netip.MustParsePrefix("203.0.113.2/24")}}}}
	live.Store(&router.Live{Config: cfg})
	st, ok := v.RouterStatus()
	want := webui.WANStatus{Port: "wan", Mode: webui.WANModeStatic, State: webui.WANBound,
		Address: netip.MustParsePrefix("203.0.113.2/24"), Gateway: netip.MustParseAddr("203.0.113.1"), MTU: 1492,
		Link: webui.WANLink{Interface: "eth1"}}
	if diff := cmp.Diff(want, st.WAN, addrs); !ok || diff != "" || st.DHCP.Enabled || st.DNS.Enabled || st.Time.Synced {
		t.Errorf("static WAN, no services: ok %v, status %+v, WAN (-want +got):\n%s", ok, st, diff)
	}
	cfg.NAT.WAN.VLAN = config.LinkVLAN{ID: 7, PCP: 1, ControlPCP: 6}
	st, _ = v.RouterStatus()
	if diff := cmp.Diff(webui.WANLink{Interface: "eth1", VLAN: &webui.WANVLAN{ID: 7, PCP: 1, ControlPCP: 6}}, st.WAN.Link); diff != "" {
		t.Errorf("tagged WAN's link (-want +got):\n%s", diff)
	}
	cfg.NAT.WAN.VLAN = config.LinkVLAN{}
	cfg.NAT.WANDHCP = true // the client not started (yet)
	if st, _ := v.RouterStatus(); st.WAN.Mode != webui.WANModeDHCP || st.WAN.State != webui.WANNone || st.WAN.Address.IsValid() {
		t.Errorf("WAN by DHCP without a client: %+v", st.WAN)
	}
	if _, ok := v.Devices(); ok {
		t.Error("Devices without a DHCP server: ok")
	}
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	if err := v.MakeStatic(mac); !errors.Is(err, webui.ErrNoDHCPServer) {
		t.Errorf("MakeStatic without a DHCP server: %v", err)
	}
}
