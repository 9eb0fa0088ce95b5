package main

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/dnsd"
	"e1kbox/appliance/services/ra"
	"e1kbox/appliance/services/timesync"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/webui"
)

// routerLive is what the router runs, as the dashboard reads it without
// the router's lock (an Apply may hold that while a service stops).
type routerLive struct {
	cfg  *config.Config
	wan  *wanclient.Client
	dhcp *dhcpd.Server
	dns  *dnsd.Server
	ntp  *timesync.Client
	// probe is the Internet probe (nil: none).
	probe *internetProbe
	// dhcp6 and ra are the IPv6 services (nil: not running).
	dhcp6 *dhcp6c.Client
	ra    *ra.Server
}

// publish records what runs now for the dashboard; under r.mu.
func (r *router) publish() {
	l := &routerLive{cfg: r.cfg}
	if r.wan.on {
		l.wan = r.wan.s
	}
	if r.dhcp.on {
		l.dhcp = r.dhcp.s
	}
	if r.dns.on {
		l.dns = r.dns.s
	}
	if r.ntp.on {
		l.ntp = r.ntp.s
	}
	if r.probe.on {
		l.probe = r.probe.s
	}
	l.dhcp6, l.ra = r.v6.running()
	r.live.Store(l)
}

// routerView adapts the router's services and the NAT connection table to
// the dashboard's Router and Devices.
type routerView struct {
	rt *router
	// conns walks the router's connection table (nil: none).
	conns func(fn func(*dataplane.Conn) bool) error
	// v6 is the running IPv6 router (nil func or result: none).
	v6 func() *route6.Router
}

// ipv6Of is the IPv6 router of the plane's running engine.
func ipv6Of(dp *plane) func() *route6.Router {
	return func() *route6.Router {
		e, _ := dp.Engine()
		if e == nil {
			return nil
		}
		return e.IPv6()
	}
}

// connsOf walks the NAT table of the plane's running engine.
func connsOf(dp *plane) func(fn func(*dataplane.Conn) bool) error {
	return func(fn func(*dataplane.Conn) bool) error {
		e, _ := dp.Engine()
		if e == nil || e.NAT() == nil {
			return nil
		}
		return dataplane.EachConn(e.NAT(), dataplane.ConnFilter{}, fn)
	}
}

// RouterStatus reports the services of NAT mode; false in bridge mode.
func (v *routerView) RouterStatus() (webui.RouterStatus, bool) {
	l := v.rt.live.Load()
	if l == nil || l.cfg == nil || l.cfg.Mode != config.ModeNAT {
		return webui.RouterStatus{}, false
	}
	st := webui.RouterStatus{WAN: wanStatus(l), DHCP: dhcpStatus(l.dhcp), DNS: dnsStatus(l), Time: timeStatus(l.ntp)}
	if ipv6On(l.cfg) {
		var r6 *route6.Router
		if v.v6 != nil {
			r6 = v.v6()
		}
		st.IPv6 = ipv6Status(l, r6, time.Now())
	}
	return st, true
}

// dhcpv6States maps the DHCPv6 client's RFC 8415 states to the
// dashboard's, for a client without a delegation (with one it is bound).
var dhcpv6States = map[string]string{"soliciting": webui.DHCPv6Requesting, "requesting": webui.DHCPv6Requesting,
	"bound": webui.DHCPv6Requesting, "renewing": webui.DHCPv6Requesting, "rebinding": webui.DHCPv6Requesting}

// ipv6Status is the IPv6 side: the DHCPv6 client's delegation, the RA
// daemon's /64s (those still valid at now), the IPv6 router's addresses
// and next hop (r6 nil: none runs).
func ipv6Status(l *routerLive, r6 *route6.Router, now time.Time) *webui.IPv6Status {
	st := &webui.IPv6Status{DHCPv6: webui.DHCPv6None}
	if c := l.dhcp6; c != nil {
		st.ClientState = c.Stats().State
		if s, ok := dhcpv6States[st.ClientState]; ok {
			st.DHCPv6 = s
		}
		if lease := c.Current(); lease != nil {
			for _, p := range lease.Prefixes {
				st.Delegated = append(st.Delegated, webui.IPv6Prefix{Prefix: p.Prefix, Preferred: p.Preferred, Valid: p.Valid})
			}
			if len(lease.Prefixes) > 0 {
				st.DHCPv6 = webui.DHCPv6Bound
			}
			st.Server, st.T1, st.T2, st.DNS = lease.Server, lease.T1, lease.T2, lease.DNS
		}
	}
	if s := l.ra; s != nil {
		cur, dep := s.Prefixes()
		for i, p := range slices.Concat(cur, dep) {
			if now.Before(p.Valid) {
				st.LAN = append(st.LAN, webui.IPv6Prefix{Prefix: p.Prefix, Preferred: p.Preferred, Valid: p.Valid, Deprecated: i >= len(cur)})
			}
		}
	}
	if r6 != nil {
		st.LANAddresses = r6.Addrs(route6.LAN)
		for _, a := range r6.WANAddrs() {
			st.WANAddresses = append(st.WANAddresses, wanAddress(a))
		}
		if gw, ok := r6.Gateway(now.UnixNano()); ok {
			st.Gateway = gw
		}
	}
	return st
}

// wanAddress is route6's WAN address as the dashboard shows it.
func wanAddress(a route6.WANAddr) webui.WANAddress {
	return webui.WANAddress{Address: a.Addr, Origin: a.Origin.String(), State: a.State.String(), Prefix: a.Prefix,
		Preferred: lifetimeEnd(a.Preferred), Valid: lifetimeEnd(a.Valid)}
}

// lifetimeEnd is a route6 lifetime deadline as a time; zero for none
// (0) and never (route6.Forever).
func lifetimeEnd(s uint32) time.Time {
	if s == 0 || s == route6.Forever {
		return time.Time{}
	}
	return time.Unix(int64(s), 0).UTC()
}

// wanStates maps the WAN client's RFC 2131 states to the dashboard's.
var wanStates = map[string]string{
	"bound": webui.WANBound, "renewing": webui.WANRenewing, "rebinding": webui.WANRebinding,
	"init": webui.WANInit, "init-reboot": webui.WANInit, "selecting": webui.WANInit, "requesting": webui.WANInit,
}

func wanStatus(l *routerLive) webui.WANStatus {
	w := webui.WANStatus{Mode: webui.WANModeStatic, State: webui.WANNone}
	if l.probe != nil {
		w.Internet = l.probe.Last()
	}
	p := l.cfg.WANPort()
	if p != nil {
		w.Port = p.Name
	}
	if !l.cfg.NAT.WANDHCP {
		if p != nil {
			for _, a := range p.Addresses {
				if a.Addr().Is4() {
					w.Address, w.Gateway, w.State, w.MTU = a, l.cfg.NAT.Gateway, webui.WANBound, p.MTU
					break
				}
			}
		}
		return w
	}
	w.Mode = webui.WANModeDHCP
	if l.wan == nil {
		return w
	}
	w.State = wanStates[l.wan.Stats().State]
	if w.State == "" {
		w.State = webui.WANNone
	}
	lease := l.wan.Current()
	if lease == nil {
		if w.State != webui.WANNone {
			w.State = webui.WANInit
		}
		return w
	}
	w.Address, w.Gateway, w.DNS, w.Domain, w.MTU, w.Server = lease.Addr, lease.Gateway, lease.DNS, lease.Domain, lease.MTU, lease.Server
	w.Obtained, w.T1, w.T2, w.Expiry = lease.Obtained, lease.T1, lease.T2, lease.Expiry
	return w
}

func dhcpStatus(s *dhcpd.Server) webui.DHCPStatus {
	if s == nil {
		return webui.DHCPStatus{}
	}
	st := s.Stats()
	first, last := s.Pool()
	return webui.DHCPStatus{Enabled: true, PoolStart: first, PoolEnd: last, LeasesInUse: st.LeasesInUse, PoolSize: st.PoolSize,
		Discovers: st.Discovers, Offers: st.Offers, Requests: st.Requests, Acks: st.Acks, Naks: st.Naks,
		Declines: st.Declines, Releases: st.Releases}
}

func dnsStatus(l *routerLive) webui.DNSStatus {
	s := l.dns
	if s == nil {
		return webui.DNSStatus{}
	}
	st := s.Stats()
	d := webui.DNSStatus{Enabled: true, Listen: s.Addrs(), UpstreamsFrom: "wan",
		Queries: st.QueriesUDP + st.QueriesTCP, CacheHits: st.CacheHits, CacheEntries: st.CacheEntries,
		UpstreamFailures: st.UpstreamFailures, LatencyP50: webui.Duration(st.Latency.P50), LatencyP99: webui.Duration(st.Latency.P99)}
	if len(l.cfg.DNS.Upstreams) > 0 {
		d.UpstreamsFrom = "config"
	}
	for _, u := range st.Upstreams {
		d.Upstreams = append(d.Upstreams, u.Addr)
	}
	return d
}

func timeStatus(c *timesync.Client) webui.TimeStatus {
	if c == nil {
		return webui.TimeStatus{}
	}
	st := c.Status()
	return webui.TimeStatus{Synced: st.Synced, Server: st.Server, Offset: webui.Duration(st.Offset), LastSync: st.LastSync}
}

// Devices lists the DHCP server's leases with the bytes each device
// received and sent through the router's live connections; false while no
// DHCP server runs.
func (v *routerView) Devices() ([]webui.Device, bool) {
	s := v.dhcpServer()
	if s == nil {
		return nil, false
	}
	leases := s.Leases()
	out := make([]webui.Device, 0, len(leases))
	byIP := make(map[netip.Addr]int, len(leases))
	for _, l := range leases {
		byIP[l.IP] = len(out)
		out = append(out, webui.Device{Hostname: l.Hostname, MAC: l.MAC.String(), Address: l.IP, Expiry: l.Expiry,
			LastSeen: l.LastSeen, Static: l.Static, InConfig: l.InConfig, State: string(l.State)})
	}
	if v.conns != nil {
		_ = v.conns(func(c *dataplane.Conn) bool {
			addBytes(out, byIP, c)
			return true
		})
	}
	return out, true
}

// addBytes counts connection c for the device it belongs to: a LAN host
// that opened it (its original source) or that a port forward reaches
// (its reply's source). Bytes are [original, reply].
func addBytes(devs []webui.Device, byIP map[netip.Addr]int, c *dataplane.Conn) {
	if i, ok := byIP[c.Orig.Src.Addr()]; ok {
		devs[i].BytesOut += c.Bytes[0]
		devs[i].BytesIn += c.Bytes[1]
		return
	}
	if i, ok := byIP[c.Reply.Src.Addr()]; ok {
		devs[i].BytesIn += c.Bytes[0]
		devs[i].BytesOut += c.Bytes[1]
	}
}

func (v *routerView) dhcpServer() *dhcpd.Server {
	l := v.rt.live.Load()
	if l == nil || l.cfg == nil || l.cfg.Mode != config.ModeNAT {
		return nil
	}
	return l.dhcp
}

// MakeStatic pins the device's address in the DHCP server's lease file
// (it survives restarts there); a device made static before stays so.
func (v *routerView) MakeStatic(mac net.HardwareAddr) error {
	return v.act(mac, (*dhcpd.Server).MakeStatic)
}

// Forget drops the device's leases and its pinned address.
func (v *routerView) Forget(mac net.HardwareAddr) error {
	return v.act(mac, (*dhcpd.Server).Forget)
}

func (v *routerView) act(mac net.HardwareAddr, fn func(*dhcpd.Server, net.HardwareAddr) error) error {
	s := v.dhcpServer()
	if s == nil {
		return webui.ErrNoDHCPServer
	}
	err := fn(s, slices.Clone(mac))
	switch {
	case errors.Is(err, dhcpd.ErrAlreadyStatic):
		return nil // done before: the device keeps its address
	case errors.Is(err, dhcpd.ErrNoLease):
		return tagged{err, webui.ErrNoLease}
	case errors.Is(err, dhcpd.ErrConfigStatic):
		return tagged{err, webui.ErrStaticInConfig}
	}
	return err
}

// tagged is an error that also matches the dashboard's error tag.
type tagged struct{ err, tag error }

func (t tagged) Error() string   { return t.err.Error() }
func (t tagged) Unwrap() []error { return []error{t.err, t.tag} }

// Interface checks.
var (
	_ webui.Router  = (*routerView)(nil)
	_ webui.Devices = (*routerView)(nil)
)
