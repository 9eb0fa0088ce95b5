package plane

import (
	"net"
	"net/netip"
	"time"
)

// The LAN DHCP server's questions about LAN devices, answered from the
// running engine (main wires them into router.Options). They never wait
// for the plane's lock: the server asks with its own held, and an Apply
// may take seconds.

// LANPort names the LAN port where the engine's FDB last saw the device
// with MAC hw; "" when unknown or no engine runs.
func (p *Plane) LANPort(hw net.HardwareAddr) string {
	e := p.live.Load()
	if e == nil || len(hw) != 6 {
		return ""
	}
	return e.LANPort([6]byte(hw))
}

// LANActivity returns when the router last carried traffic of the LAN
// device at ip with MAC hw (dataplane.Engine.LANActivity); zero when
// never or no engine runs.
func (p *Plane) LANActivity(ip netip.Addr, hw net.HardwareAddr) time.Time {
	e := p.live.Load()
	if e == nil || len(hw) != 6 {
		return time.Time{}
	}
	return e.LANActivity(ip, [6]byte(hw))
}
