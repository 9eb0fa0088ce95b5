package dhcpclient

import (
	"net"

	"e1kbox/appliance/services/wantap"
)

// VLAN is the WAN's 802.1Q VLAN the clients talk over (wantap.VLAN): the
// tag of every frame they send, the VLAN they receive replies of. The
// zero VLAN is untagged.
type VLAN = wantap.VLAN

// Transport carries Ethernet frames on the WAN interface: the packet
// socket, or a fake in tests.
type Transport interface {
	// Read blocks for the next frame that passed the socket's filter.
	// csumValid says the kernel vouches for its UDP checksum.
	Read(b []byte) (n int, csumValid bool, err error)
	// Write sends a whole frame; dst is its Ethernet destination.
	Write(frame []byte, dst net.HardwareAddr) error
	// Close wakes a blocked Read with an error.
	Close() error
}

// Opener opens the transport and says the interface's MTU.
type Opener func() (tr Transport, mtu int, err error)
