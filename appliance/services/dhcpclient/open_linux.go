package dhcpclient

import (
	"net"

	"golang.org/x/net/bpf"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/services/wantap"
)

// OpenIPv4 opens the WAN socket on iface bound to IPv4, passing only the
// IPv4/UDP frames to port that FilterIPv4 lets through, of vlan (see
// wantap.Open), in the calling thread's network namespace; it says the
// interface's MTU. Its frames go out with vlan's tag.
func OpenIPv4(iface string, mac net.HardwareAddr, port uint16, vlan VLAN) (Transport, int, error) {
	return open(iface, mac, frame.EtherTypeIPv4, FilterIPv4(port), vlan)
}

// OpenIPv6 opens the WAN socket on iface bound to IPv6, passing only the
// IPv6/UDP frames to port, as OpenIPv4 does.
func OpenIPv6(iface string, mac net.HardwareAddr, port uint16, vlan VLAN) (Transport, int, error) {
	return open(iface, mac, frame.EtherTypeIPv6, FilterIPv6(port), vlan)
}

func open(iface string, mac net.HardwareAddr, etherType uint16, filter []bpf.Instruction, vlan VLAN) (Transport, int, error) {
	t, mtu, err := wantap.Open(iface, mac, etherType, filter, vlan)
	if err != nil {
		return nil, 0, err // not a typed nil in the interface
	}
	return t, mtu, nil
}
