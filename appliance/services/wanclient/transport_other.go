//go:build !linux

package wanclient

import (
	"errors"
	"net"
)

func openPacket(string, net.HardwareAddr) (transport, int, error) {
	return nil, 0, errors.New("the WAN DHCP client needs Linux packet sockets")
}
