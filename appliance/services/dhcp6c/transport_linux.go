package dhcp6c

import (
	"net"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/services/wantap"
)

// openPacket opens the WAN socket (bound to IPv6), its filter passing only IPv6/UDP to port 546.
func openPacket(iface string, mac net.HardwareAddr) (transport, int, error) {
	t, mtu, err := wantap.Open(iface, mac, unix.ETH_P_IPV6, replyFilter)
	if err != nil {
		return nil, 0, err
	}
	return t, mtu, nil
}
