package plane

import (
	"fmt"
	"net/netip"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/tuning"
)

// dataplaneConfig derives the dataplane's configuration from a runtime
// config that config.Validate accepted: the one place a user's config is
// validated is package config, so nothing here refuses anything
// (TestEveryValidConfigRuns holds the dataplane to that). cpu is the CPU
// plan the tuning applied (its worker CPUs pin the workers). Disabled
// ports are left out.
//
// In NAT mode the router's addresses are the WAN port's IPv4 prefix and
// the LAN ports' one IPv4 prefix, and the host port, which sits on the LAN
// segment, gets the smallest LAN port MTU.
func dataplaneConfig(c *config.Config, cpu tuning.CPUPlan, lease *wanclient.Lease) (*dataplane.Config, error) {
	d := &dataplane.Config{Mode: dataplane.ModeBridge, CPU: cpu, FastPath: dataplane.FastPathMode(c.FastPath)}
	switch c.Mode {
	case config.ModeBridge:
	case config.ModeNAT:
		d.Mode = dataplane.ModeNAT
	default:
		return nil, fmt.Errorf("mode %q: the config was not validated", c.Mode)
	}
	lanMTU := 0
	for _, p := range c.Ports {
		if !p.IsEnabled() {
			continue
		}
		dp := dataplane.Port{Name: p.Name, Interface: p.Interface, MTU: p.MTU}
		if !p.VLANs.IsZero() {
			dp.VLANs = &dataplane.VLANs{Native: p.VLANs.Native, Allowed: p.VLANs.Allowed}
		}
		switch {
		case c.Mode != config.ModeNAT:
		case p.Role == config.RoleWAN:
			dp.Role = dataplane.RoleWAN
			if c.IsPPPoE() && (p.MTU == 0 || p.MTU == config.DefaultMTU) {
				// The session's frames carry 8 bytes more than its MTU:
				// RFC 4638's 1500 needs a 1508-byte port (any e1000e).
				dp.MTU = max(config.DefaultMTU, c.NAT.WAN.PPPoE.EffectiveMRU()+8)
			}
		case lanMTU == 0 || p.MTU < lanMTU:
			lanMTU = p.MTU
		}
		d.Ports = append(d.Ports, dp)
	}
	if h := c.HostPort; h != nil {
		d.HostPort = &dataplane.HostPort{Name: h.Name, Interface: h.Interface, Addresses: h.Addresses}
		if c.Mode == config.ModeNAT {
			d.HostPort.MTU = lanMTU
		}
	}
	if c.Mode == config.ModeNAT {
		d.NAT = natConfig(c, lease)
	}
	d.Bridge = dataplane.Bridge{AgingTime: c.Bridge.FDBAging.D(), FDBSize: c.Bridge.FDBSize, Refuse: c.Bridge.FDBFull == config.FDBRefuse,
		NoLoopProtect: !c.Bridge.Protects()}
	for _, s := range c.Bridge.Static {
		d.Bridge.Static = append(d.Bridge.Static, dataplane.StaticEntry{MAC: bridge.MAC(s.MAC), VLAN: s.VLAN, Port: s.Port})
	}
	rs := c.Rules
	d.Rules = &rs
	return d, nil
}

// natConfig derives the router's part of a NAT mode config; with
// nat.wanDHCP the WAN address, gateway and MTU are the lease's (none
// without a lease).
func natConfig(c *config.Config, lease *wanclient.Lease) *dataplane.NAT {
	cn := &c.NAT
	n := &dataplane.NAT{Gateway: cn.Gateway, PortMin: cn.MasqueradePorts.First, PortMax: cn.MasqueradePorts.Last,
		MaxConns: cn.Conntrack.Size, IPv6: c.IPv6.IsEnabled(), IPv6Gateway: c.IPv6.Gateway,
		WANVLAN: dataplane.WANVLAN{ID: cn.WAN.VLAN.ID, PCP: cn.WAN.VLAN.PCP, ControlPCP: cn.WAN.VLAN.ControlPCP}}
	if cn.WANDHCP && lease != nil {
		n.WANAddr = lease.Addr
		if lease.MTU >= config.MinNATMTU {
			n.WANMTU = lease.MTU // smaller ones are bogus: RFC 791 hosts take 576
		}
		if lease.Gateway.IsValid() && netip.PrefixFrom(lease.Addr.Addr(), lease.Addr.Bits()).Masked().Contains(lease.Gateway) {
			n.Gateway = lease.Gateway
		}
	}
	for _, p := range c.Ports {
		if !p.IsEnabled() {
			continue
		}
		for _, a := range p.Addresses {
			switch {
			case !a.Addr().Is4():
			case p.Role == config.RoleWAN:
				n.WANAddr = a
			case p.Role == config.RoleLAN:
				n.LANAddr = a
			}
		}
	}
	t := &cn.Conntrack.Timeouts
	secs := func(d config.Duration) int { return int((d.D() + time.Second - 1) / time.Second) }
	n.Timeouts = nat.Timeouts{
		TCPSynSent: secs(t.TCPSynSent), TCPSynRecv: secs(t.TCPSynRecv), TCPEstablished: secs(t.TCPEstablished),
		TCPFinWait: secs(t.TCPFinWait), TCPCloseWait: secs(t.TCPCloseWait), TCPLastAck: secs(t.TCPLastAck),
		TCPTimeWait: secs(t.TCPTimeWait), TCPClose: secs(t.TCPClose),
		UDPUnreplied: secs(t.UDP), UDPAssured: secs(t.UDPStream), ICMP: secs(t.ICMP), Generic: secs(t.Generic),
	}
	if !cn.MSSClampOn() {
		n.MSSClamp = -1
	}
	for _, f := range cn.Forwards {
		proto := uint8(frame.ProtoTCP)
		if f.Proto == "udp" {
			proto = frame.ProtoUDP
		}
		n.Forwards = append(n.Forwards, nat.PortForward{Proto: proto, Port: f.WANPorts.First, PortEnd: f.WANPorts.Last,
			To: netip.AddrPortFrom(f.LANHost, f.LANPort)})
	}
	return n
}
