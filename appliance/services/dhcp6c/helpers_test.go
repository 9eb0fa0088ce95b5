package dhcp6c

import (
	"net"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
)

var (
	boxMAC = net.HardwareAddr{0x02, 0x86, 0x00, 0x00, 0x00, 0x01}
	ispMAC = net.HardwareAddr{0x02, 0x86, 0x00, 0x00, 0x00, 0xfe}
)

// change is one onChange call.
type change struct{ old, new *Lease }

// next waits for the next change.
func next(t *testing.T, ch <-chan change, within time.Duration) change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(within):
		t.Fatalf("no lease change within %v", within)
		return change{}
	}
}

// The header lengths of the frames the tests build and take apart.
const (
	ethHdrLen  = frame.EthernetHeaderLen
	ipv6HdrLen = frame.IPv6HeaderLen
	udpHdrLen  = frame.UDPHeaderLen
)
