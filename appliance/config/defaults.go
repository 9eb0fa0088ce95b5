package config

import "e1kbox/rules"

// ApplyDefaults fills every unset optional field (zero, nil, or an empty
// string) with its default; see the field documentation of Config. Parse
// calls it; it is idempotent. The sections' defaults are in their files.
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
		c.Ports[i].applyDefaults()
	}
	if c.HostPort != nil {
		c.HostPort.applyDefaults()
	}
	c.Bridge.applyDefaults()
	c.NAT.applyDefaults()
	if c.Rules.Rules == nil {
		c.Rules.Rules = []rules.Rule{}
	}
	c.Dashboard.applyDefaults()
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
	c.DHCP.applyDefaults(on)
	c.DNS.applyDefaults(on)
	c.IPv6.applyDefaults(on)
	c.Time.applyDefaults()
}

func ptr[T any](v T) *T { return &v }
