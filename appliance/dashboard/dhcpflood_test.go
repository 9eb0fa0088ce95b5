package dashboard

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/config"
	"e1kbox/appliance/router"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/webui"
)

// TestDHCPFlood: the router status names a port whose new devices hit
// their limit, with its unproven leases and refusals, and the Devices
// page marks the leases of devices that have not used their address.
func TestDHCPFlood(t *testing.T) {
	s, err := dhcpd.New(dhcpd.Config{Interface: "lan0", ServerIP: netip.MustParseAddr("192.168.1.1"),
		Subnet: netip.MustParsePrefix("192.168.1.0/24"), NewLeasesPerSecond: 1,
		PortOf:   func(net.HardwareAddr) string { return "lan1" },
		Activity: func(netip.Addr, net.HardwareAddr) time.Time { return time.Time{} }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // a burst of 2, then the limit
		hw := net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}
		offer := s.Handle(dhcpMsg(t, hw, dhcpv4.MessageTypeDiscover))
		if offer == nil {
			t.Fatalf("%v: no offer", hw)
		}
		s.Handle(dhcpMsg(t, hw, dhcpv4.MessageTypeRequest, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(192, 168, 1, 1)))))
	}
	st := dhcpStatus(s)
	want := []webui.DHCPPort{{Port: "lan1", Unproven: 2, Refused: 1, Flooding: true}}
	if diff := cmp.Diff(want, st.Ports); diff != "" || st.Unproven != 2 || st.Refused != 1 {
		t.Errorf("DHCP status: %d unproven, %d refused; ports (-want +got):\n%s", st.Unproven, st.Refused, diff)
	}
	v := &Router{live: func() *router.Live { return &router.Live{Config: &config.Config{Mode: config.ModeNAT}, DHCP: s} }}
	devs, _ := v.Devices()
	var unproven []string
	for _, d := range devs {
		if d.Unproven {
			unproven = append(unproven, d.MAC)
		}
	}
	if diff := cmp.Diff([]string{"02:00:00:00:00:01", "02:00:00:00:00:02"}, unproven); diff != "" {
		t.Errorf("unproven devices (-want +got):\n%s", diff)
	}
}

// dhcpMsg is a client message of type mt from hw.
func dhcpMsg(t *testing.T, hw net.HardwareAddr, mt dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(mt)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
