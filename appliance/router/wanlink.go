package router

import (
	"fmt"
	"net"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpclient"
)

// wanVLAN is the VLAN the WAN clients (DHCPv4, DHCPv6) talk over:
// nat.wan.vlan's ID with its control priority (DHCP is control traffic);
// untagged outside NAT mode. The dataplane attaches ingressdrop for the
// same VLAN, which hands the clients its replies.
func wanVLAN(cfg *config.Config) dhcpclient.VLAN {
	if cfg.Mode != config.ModeNAT {
		return dhcpclient.VLAN{}
	}
	v := cfg.NAT.WAN.VLAN
	return dhcpclient.VLAN{ID: v.ID, PCP: v.ControlPCP}
}

// wanAt is what a WAN client is bound to: the WAN port's interface, the
// MAC and the VLAN. When it changes the client restarts.
func wanAt(p *config.Port, mac net.HardwareAddr, v dhcpclient.VLAN) string {
	return fmt.Sprintf("%s %s vlan %d/%d", p.Interface, mac, v.ID, v.PCP)
}
