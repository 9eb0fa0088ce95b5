package dhcp6c

import "net"

// transport carries Ethernet frames on the WAN interface: the packet
// socket, or a fake in tests.
type transport interface {
	// Read blocks for the next frame that passed the socket's filter.
	// csumValid says the kernel vouches for its UDP checksum.
	Read(b []byte) (n int, csumValid bool, err error)
	// Write sends a whole frame; dst is its Ethernet destination.
	Write(frame []byte, dst net.HardwareAddr) error
	// Close wakes a blocked Read with an error.
	Close() error
}

// opener opens the transport.
type opener func() (tr transport, mtu int, err error)
