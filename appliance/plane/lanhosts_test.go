package plane

import (
	"net"
	"net/netip"
	"testing"
)

// TestLANHostsWithoutEngine: without an engine the DHCP server's
// questions have no answer (every device on no port, none seen), and
// asking never waits for the plane's lock.
func TestLANHostsWithoutEngine(t *testing.T) {
	p := &Plane{}
	p.mu.Lock() // an Apply in progress
	defer p.mu.Unlock()
	hw := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	if got := p.LANPort(hw); got != "" {
		t.Errorf("LANPort = %q, want none", got)
	}
	if got := p.LANActivity(netip.MustParseAddr("192.168.1.10"), hw); !got.IsZero() {
		t.Errorf("LANActivity = %v, want none", got)
	}
}
