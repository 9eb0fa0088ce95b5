//go:build !linux

package dhcpclient

import (
	"errors"
	"net"
)

var errNoPacketSockets = errors.New("the WAN DHCP clients need Linux packet sockets")

// OpenIPv4 fails: packet sockets are Linux's.
func OpenIPv4(string, net.HardwareAddr, uint16, VLAN) (Transport, int, error) {
	return nil, 0, errNoPacketSockets
}

// OpenIPv6 fails: packet sockets are Linux's.
func OpenIPv6(string, net.HardwareAddr, uint16, VLAN) (Transport, int, error) {
	return nil, 0, errNoPacketSockets
}
