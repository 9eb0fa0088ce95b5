package main

import (
	"fmt"
	"net/netip"

	"e1kbox/appliance/config"
	"e1kbox/rules"
	"e1kbox/tuning"
)

// applianceListen is the appliance's dashboard address inside the box
// namespace.
const applianceListen = "127.0.0.1:8080"

// The NAT paths' addressing: the generator is a LAN host behind the box's
// LAN port b0, the sink the WAN gateway behind its WAN port b1, and the
// traffic goes to a server beyond the gateway.
var (
	natLANPort, natWANPort = boxPorts[0], boxPorts[1]
	natGenIP               = netip.MustParseAddr("192.168.60.2")
	natLAN                 = netip.MustParsePrefix("192.168.60.1/24") // the router's LAN address
	natWAN                 = netip.MustParsePrefix("10.79.0.1/24")    // the box's static WAN address
	natGatewayIP           = netip.MustParseAddr("10.79.0.2")         // the sink (s0)
	natServerIP            = netip.MustParseAddr("198.51.100.9")      // the destination, routed via the gateway
)

// The IPv6 paths' addressing: the LAN is the first /64 of the static
// prefix, the generator a host in it; the sink is the WAN next hop (its
// link-local address), the server beyond it.
var (
	ipv6Prefix   = netip.MustParsePrefix("2001:db8:60::/48")  // the appliance's ipv6.prefix
	ipv6RouterIP = netip.MustParsePrefix("2001:db8:60::1/64") // the kernel router's LAN address
	ipv6GenIP    = netip.MustParseAddr("2001:db8:60::2")
	ipv6ServerIP = netip.MustParseAddr("2001:db8:99::9")
	ipv6Gateway  = linkLocal(macS0)
)

// natConntrackSize is the appliance's connection table in the NAT paths:
// the kernel's default nf_conntrack_max on a machine with this much
// memory (262144).
const natConntrackSize = 262144

// applianceConfig is the runtime config for an e1kbox path: bridge mode
// over b0 and b1 (NAT mode with b0 the LAN and b1 the WAN port for NAT
// paths), the path's rules and CPU placement. It is validated with the
// appliance's own config package.
func applianceConfig(p Path) ([]byte, error) {
	text := e1kboxRules(p.Rules)
	if p.IPv6 {
		text = e1kboxRules6(p.Rules)
	}
	if p.FW4 {
		text = e1kboxFW4Rules(natLANPort, natWANPort)
	}
	rs, err := rules.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("e1kbox rules: %w", err)
	}
	c := &config.Config{
		Version: config.Version,
		Mode:    config.ModeBridge,
		Rules:   *rs,
		Tuning:  tuning.Plan{Placement: p.Placement},
	}
	if p.FastPath != "" {
		c.FastPath = config.FastPath(p.FastPath)
	} else if !p.NAT {
		c.FastPath = config.FastPathTCX // auto leaves a bridge on the rings
	}
	for _, port := range boxPorts {
		c.Ports = append(c.Ports, config.Port{Name: port, Interface: port})
	}
	if p.NAT {
		c.Mode = config.ModeNAT
		c.Ports[0].Role, c.Ports[0].Addresses = config.RoleLAN, []netip.Prefix{natLAN}
		c.Ports[1].Role, c.Ports[1].Addresses = config.RoleWAN, []netip.Prefix{natWAN}
		c.NAT.Gateway = natGatewayIP
		// The bare router runs no services; the services row has the
		// defaults (DHCP server and DNS forwarder on the host port).
		c.DHCP.Enabled, c.DNS.Enabled = &p.Services, &p.Services
		// As big as the kernel's nf_conntrack_max on the build host, for
		// the connection-rate rows.
		c.NAT.Conntrack.Size = natConntrackSize
		c.NAT.WAN.VLAN = config.LinkVLAN{ID: p.WANVLAN}
		if p.WANPPPoE {
			// The session (the sink's AC) gives the WAN address and
			// the gateway: natWAN's address and natGatewayIP.
			c.NAT.WAN.PPPoE = &config.WANPPPoE{Username: "bench", Password: "bench"}
			c.Ports[1].Addresses, c.NAT.Gateway = nil, netip.Addr{}
			c.IPv6.Enabled = &p.IPv6 // false: the bench's AC (pppoeac) has no IPv6CP
		}
	}
	if p.IPv6 {
		// The static prefix and the sink as the next hop: no DHCPv6, no
		// RAs from the WAN.
		c.IPv6.Enabled = &p.IPv6
		c.IPv6.Prefix, c.IPv6.Gateway = ipv6Prefix, ipv6Gateway
	}
	c.Dashboard.Listen = applianceListen
	c.ApplyDefaults()
	if err := c.Validate(config.Env{Interfaces: boxPorts}); err != nil {
		return nil, fmt.Errorf("e1kbox config: %w", err)
	}
	return config.Marshal(c)
}

// boxPorts are the box's veth ports, in the appliance's port order.
var boxPorts = []string{"b0", "b1"}
