package config

import (
	"slices"

	"e1kbox/rules"
)

// ApplyDefaults fills every unset optional field (zero, nil, or an empty
// string) with its default; see the field documentation of Config. Parse
// calls it; it is idempotent.
func (c *Config) ApplyDefaults() {
	if c.Version == 0 {
		c.Version = Version
	}
	if c.Mode == "" {
		c.Mode = ModeBridge
	}
	if c.FastPath == "" {
		c.FastPath = FastPathAuto
	}
	if c.Ports == nil {
		c.Ports = []Port{}
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.MTU == 0 {
			p.MTU = DefaultMTU
		}
		if p.Enabled == nil {
			p.Enabled = ptr(true)
		}
	}
	if h := c.HostPort; h != nil {
		if h.Name == "" {
			h.Name = DefaultHostPortName
		}
		if h.Interface == "" {
			h.Interface = DefaultHostPortInterface
		}
	}
	if c.Bridge.FDBAging == 0 {
		c.Bridge.FDBAging = Duration(DefaultFDBAging)
	}
	if c.Bridge.FDBSize == 0 {
		c.Bridge.FDBSize = DefaultFDBSize
	}
	n := &c.NAT
	if n.MasqueradePorts == (PortRange{}) {
		n.MasqueradePorts = DefaultMasqueradePorts
	}
	if n.Conntrack.Size == 0 {
		n.Conntrack.Size = DefaultConntrackSize
	}
	defaults := DefaultTimeouts.fields()
	for i, f := range n.Conntrack.Timeouts.fields() {
		if *f.d == 0 {
			*f.d = *defaults[i].d
		}
	}
	if n.MSSClamp == nil {
		n.MSSClamp = ptr(true)
	}
	for i := range n.Forwards {
		if f := &n.Forwards[i]; f.LANPort == 0 {
			f.LANPort = f.WANPorts.First
		}
	}
	if c.Rules.Rules == nil {
		c.Rules.Rules = []rules.Rule{}
	}
	if c.Dashboard.Listen == "" {
		c.Dashboard.Listen = DefaultListen
	}
	if c.Dashboard.ConfirmTimeout == 0 {
		c.Dashboard.ConfirmTimeout = Duration(DefaultConfirmTimeout)
	}
	c.applyServiceDefaults()
}

// applyServiceDefaults fills the router services' defaults: on in NAT
// mode, off in bridge mode.
func (c *Config) applyServiceDefaults() {
	on := c.Mode == ModeNAT
	if on && c.HostPort == nil && (c.DHCP.Enabled == nil || *c.DHCP.Enabled || c.DNS.Enabled == nil || *c.DNS.Enabled ||
		c.IPv6.Enabled == nil || *c.IPv6.Enabled) {
		// The services run on the host port (the router's LAN address is
		// the kernel's there).
		c.HostPort = &HostPort{Name: DefaultHostPortName, Interface: DefaultHostPortInterface}
	}
	if c.DHCP.Enabled == nil {
		c.DHCP.Enabled = ptr(on)
	}
	if c.DHCP.LeaseTime == 0 {
		c.DHCP.LeaseTime = Duration(DefaultLeaseTime)
	}
	if c.DNS.Enabled == nil {
		c.DNS.Enabled = ptr(on)
	}
	if c.IPv6.Enabled == nil {
		c.IPv6.Enabled = ptr(on)
	}
	if c.IPv6.DHCPServer == nil {
		c.IPv6.DHCPServer = ptr(*c.IPv6.Enabled)
	}
	if c.IPv6.PrefixLength == 0 {
		c.IPv6.PrefixLength = DefaultIPv6PrefixLength
	}
	if c.IPv6.WANAddress == "" {
		c.IPv6.WANAddress = WANAddressAuto
	}
	if c.DNS.Domain == "" {
		c.DNS.Domain = DefaultDomain
	}
	if c.DNS.CacheSize == 0 {
		c.DNS.CacheSize = DefaultDNSCacheSize
	}
	if c.Time.Servers == nil {
		c.Time.Servers = slices.Clone(DefaultNTPServers)
	}
	if c.Time.FromDHCP == nil {
		c.Time.FromDHCP = ptr(true)
	}
}

func ptr[T any](v T) *T { return &v }

// DefaultIPv6PrefixLength is the delegation asked for: a /56, what RFC
// 6177 suggests ISPs give a home.
const DefaultIPv6PrefixLength = 56

type timeoutField struct {
	name string
	d    *Duration
}

// fields lists the timeouts with their JSON names, in declaration order.
func (t *Timeouts) fields() []timeoutField {
	return []timeoutField{
		{"tcpSynSent", &t.TCPSynSent},
		{"tcpSynRecv", &t.TCPSynRecv},
		{"tcpEstablished", &t.TCPEstablished},
		{"tcpFinWait", &t.TCPFinWait},
		{"tcpCloseWait", &t.TCPCloseWait},
		{"tcpLastAck", &t.TCPLastAck},
		{"tcpTimeWait", &t.TCPTimeWait},
		{"tcpClose", &t.TCPClose},
		{"udp", &t.UDP},
		{"udpStream", &t.UDPStream},
		{"icmp", &t.ICMP},
		{"generic", &t.Generic},
	}
}
