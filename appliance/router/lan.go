package router

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"slices"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/dnsd"
	"e1kbox/appliance/services/timesync"
)

// The LAN's services on the box's stack: the DHCP server, the DNS
// forwarder and the NTP client.

// applyDHCP starts or updates the LAN DHCP server.
func (r *Router) applyDHCP() error {
	err := update(&r.dhcp, r.dhcpConfig(), dhcpd.New, (*dhcpd.Server).Serve, r.log, "dhcp")
	if r.dhcp.on {
		r.names.Store(r.dhcp.s)
	}
	return err
}

func (r *Router) dhcpConfig() dhcpd.Config {
	c, lan := r.cfg, r.lanAddr()
	d := dhcpd.Config{Interface: HostInterface(c), ServerIP: lan.Addr(), Subnet: lan.Masked(),
		PoolStart: c.DHCP.Range.First, PoolEnd: c.DHCP.Range.Last, LeaseTime: c.DHCP.LeaseTime.D(),
		Domain: c.DNS.Domain, LeaseFile: filepath.Join(r.opts.State, "dhcp-leases.json"),
		NewLeasesPerSecond: c.DHCP.NewDevicesPerSecond, Probation: c.DHCP.Probation.D(), UnprovenShare: c.DHCP.UnprovenShare,
		PortOf: r.opts.LANPort, Activity: r.opts.LANActivity}
	if c.DNS.IsEnabled() {
		d.DNS = []netip.Addr{lan.Addr()}
	} else {
		d.DNS = r.upstreams()
	}
	for _, p := range c.LANPorts() {
		if p.MTU != 0 && (d.MTU == 0 || p.MTU < d.MTU) {
			d.MTU = p.MTU
		}
	}
	if c.HostPort != nil {
		for _, a := range c.HostPort.Addresses {
			if a.Addr().Is4() && lan.Contains(a.Addr()) {
				d.Exclude = append(d.Exclude, a.Addr())
			}
		}
	}
	for _, s := range c.DHCP.Static {
		d.Static = append(d.Static, dhcpd.Static{MAC: net.HardwareAddr(s.MAC[:]), IP: s.Address, Hostname: s.Hostname})
	}
	return d
}

// upstreams are the DNS servers the box asks: the config's, else the WAN
// lease's or the PPPoE session's.
func (r *Router) upstreams() []netip.Addr {
	if len(r.cfg.DNS.Upstreams) > 0 {
		return slices.Clone(r.cfg.DNS.Upstreams)
	}
	if r.lease != nil {
		return slices.Clone(r.lease.DNS)
	}
	return r.pppoeDNS()
}

// applyDNS starts or updates the DNS forwarder on the router's LAN
// address and the box's LAN IPv6 addresses (r.v6.box; dnsd rebinds live,
// keeping its cache).
func (r *Router) applyDNS() error {
	lan := r.lanAddr()
	listen := []netip.AddrPort{netip.AddrPortFrom(lan.Addr(), 53)}
	for _, b := range r.v6.box {
		listen = append(listen, netip.AddrPortFrom(b.Prefix.Addr(), 53))
	}
	cfg := dnsd.Config{Listen: listen, Source: lan.Addr(),
		Domain: r.cfg.DNS.Domain, Hostname: r.opts.Hostname, Subnets: []netip.Prefix{lan.Masked()}, CacheSize: r.cfg.DNS.CacheSize,
		Local: dnsd.LocalFunc(r.localNames)}
	for _, a := range r.upstreams() {
		cfg.Upstreams = append(cfg.Upstreams, netip.AddrPortFrom(a, 53))
	}
	return update(&r.dns, cfg, dnsd.New, (*dnsd.Server).Serve, r.log, "dns")
}

// localNames are the LAN's names for the DNS forwarder: the DHCP leases'
// and static leases'. It is called by the DNS server's goroutines.
func (r *Router) localNames() []dnsd.Host {
	s := r.names.Load()
	if s == nil {
		return nil
	}
	names := s.Names()
	hosts := make([]dnsd.Host, 0, len(names))
	for _, n := range names {
		hosts = append(hosts, dnsd.Host{Name: n.Hostname, Addr: n.Addr})
	}
	return hosts
}

// applyTime starts or updates the NTP client: the WAN lease's servers
// (when time.fromDHCP) before the config's; in NAT mode it asks from the
// router's LAN address and resolves names through the box's own DNS
// forwarder (or the lease's servers).
func (r *Router) applyTime() error {
	c := r.cfg
	cfg := timesync.Config{}
	if r.lease != nil && (c.Time.FromDHCP == nil || *c.Time.FromDHCP) {
		for _, a := range r.lease.NTP {
			cfg.Servers = append(cfg.Servers, a.String())
		}
	}
	cfg.Servers = append(cfg.Servers, c.Time.Servers...)
	if lan := r.lanAddr(); lan.IsValid() {
		cfg.Source = lan.Addr()
		dns := r.upstreams()
		if c.DNS.IsEnabled() {
			dns = []netip.Addr{lan.Addr()}
		}
		if len(dns) > 0 {
			cfg.Resolver = resolverVia(lan.Addr(), dns)
		}
	}
	return update(&r.ntp, cfg, timesync.New, (*timesync.Client).Run, r.log, "time")
}

// resolverVia resolves names by asking the DNS servers from src.
func resolverVia(src netip.Addr, servers []netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var errs []error
		for _, s := range servers {
			d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			if network == "tcp" || network == "tcp4" || network == "tcp6" {
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
			c, err := d.DialContext(ctx, network, netip.AddrPortFrom(s, 53).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}}
}

// HostInterface is the host port's TAP device: the box's stack on the
// LAN, where the LAN's services listen.
func HostInterface(c *config.Config) string {
	if c.HostPort != nil && c.HostPort.Interface != "" {
		return c.HostPort.Interface
	}
	return config.DefaultHostPortInterface
}
