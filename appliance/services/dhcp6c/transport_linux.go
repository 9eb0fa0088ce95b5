package dhcp6c

import (
	"net"

	"e1kbox/appliance/services/wantap"
)

// openPacket opens the WAN tap, its filter passing only IPv6/UDP to port 546.
func openPacket(iface string, mac net.HardwareAddr) (transport, int, error) {
	t, mtu, err := wantap.Open(iface, mac, replyFilter)
	if err != nil {
		return nil, 0, err
	}
	return t, mtu, nil
}
