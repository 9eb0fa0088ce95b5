//go:build !linux

package dhcp6c

import (
	"errors"
	"net"
)

func openPacket(string, net.HardwareAddr) (transport, int, error) {
	return nil, 0, errors.New("the WAN DHCPv6 client needs Linux packet sockets")
}
