package wanclient

import (
	"net"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/services/wantap"
)

// openPacket opens the WAN socket (bound to IPv4), its filter passing only IPv4/UDP to port 68.
func openPacket(iface string, mac net.HardwareAddr) (transport, int, error) {
	t, mtu, err := wantap.Open(iface, mac, unix.ETH_P_IP, replyFilter)
	if err != nil {
		return nil, 0, err
	}
	return t, mtu, nil
}
