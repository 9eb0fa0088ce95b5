package dashboard

import (
	"slices"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/router"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/timesync"
	"e1kbox/webui"
)

// Router adapts the router's services and the NAT connection table to
// the dashboard's Router and Devices.
type Router struct {
	// live is what the router runs (nil: nothing yet).
	live func() *router.Live
	// conns walks the router's connection table (nil: none).
	conns func(fn func(*dataplane.Conn) bool) error
	// v6 is the running IPv6 router (nil func or result: none).
	v6 func() *route6.Router
}

// NewRouter returns the dashboard's view of the router services whose
// Live is live and of p's engine's tables.
func NewRouter(live func() *router.Live, p Plane) *Router {
	return &Router{live: live, conns: connsOf(p), v6: ipv6Of(p)}
}

// ipv6Of is the IPv6 router of p's running engine.
func ipv6Of(p Plane) func() *route6.Router {
	return func() *route6.Router {
		e, _ := p.Engine()
		if e == nil {
			return nil
		}
		return e.IPv6()
	}
}

// connsOf walks the NAT table of p's running engine.
func connsOf(p Plane) func(fn func(*dataplane.Conn) bool) error {
	return func(fn func(*dataplane.Conn) bool) error {
		e, _ := p.Engine()
		if e == nil || e.NAT() == nil {
			return nil
		}
		return dataplane.EachConn(e.NAT(), dataplane.ConnFilter{}, fn)
	}
}

// RouterStatus reports the services of NAT mode; false in bridge mode.
func (v *Router) RouterStatus() (webui.RouterStatus, bool) {
	l := v.live()
	if l == nil || l.Config == nil || l.Config.Mode != config.ModeNAT {
		return webui.RouterStatus{}, false
	}
	st := webui.RouterStatus{WAN: wanStatus(l), DHCP: dhcpStatus(l.DHCP), DNS: dnsStatus(l), Time: timeStatus(l.NTP)}
	if l.Config.IPv6.IsEnabled() {
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
func ipv6Status(l *router.Live, r6 *route6.Router, now time.Time) *webui.IPv6Status {
	st := &webui.IPv6Status{DHCPv6: webui.DHCPv6None}
	if c := l.DHCP6; c != nil {
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
	if s := l.RA; s != nil {
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

func wanStatus(l *router.Live) webui.WANStatus {
	w := webui.WANStatus{Mode: webui.WANModeStatic, State: webui.WANNone}
	if l.Probe != nil {
		r := l.Probe.Last()
		w.Internet = webui.Reachability{Reachable: r.Reachable, Probe: r.Probe, Checked: r.Checked, RTT: webui.Duration(r.RTT), Error: r.Error}
	}
	p := l.Config.WANPort()
	if p != nil {
		w.Port, w.Link.Interface = p.Name, p.Interface
	}
	if v := l.Config.NAT.WAN.VLAN; !v.IsZero() {
		w.Link.VLAN = &webui.WANVLAN{ID: v.ID, PCP: v.PCP, ControlPCP: v.ControlPCP}
	}
	if l.Config.NAT.WAN.PPPoE != nil {
		pppoeWAN(&w, l)
		return w
	}
	if !l.Config.NAT.WANDHCP {
		if p != nil {
			for _, a := range p.Addresses {
				if a.Addr().Is4() {
					w.Address, w.Gateway, w.State, w.MTU = a, l.Config.NAT.Gateway, webui.WANBound, p.MTU
					break
				}
			}
		}
		return w
	}
	w.Mode = webui.WANModeDHCP
	if l.WAN == nil {
		return w
	}
	w.State = wanStates[l.WAN.Stats().State]
	if w.State == "" {
		w.State = webui.WANNone
	}
	lease := l.WAN.Current()
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
	d := webui.DHCPStatus{Enabled: true, PoolStart: first, PoolEnd: last, LeasesInUse: st.LeasesInUse, PoolSize: st.PoolSize,
		Discovers: st.Discovers, Offers: st.Offers, Requests: st.Requests, Acks: st.Acks, Naks: st.Naks,
		Declines: st.Declines, Releases: st.Releases, Unproven: st.Unproven, Reclaimed: st.Reclaimed, Refused: st.Refused}
	for _, p := range st.Ports {
		d.Ports = append(d.Ports, webui.DHCPPort{Port: p.Port, Unproven: p.Unproven, Reclaimed: p.Reclaimed,
			Revived: p.Revived, Refused: p.Refused, Flooding: p.Flooding})
	}
	return d
}

func dnsStatus(l *router.Live) webui.DNSStatus {
	s := l.DNS
	if s == nil {
		return webui.DNSStatus{}
	}
	st := s.Stats()
	d := webui.DNSStatus{Enabled: true, Listen: s.Addrs(), UpstreamsFrom: "wan",
		Queries: st.QueriesUDP + st.QueriesTCP, CacheHits: st.CacheHits, CacheEntries: st.CacheEntries,
		UpstreamFailures: st.UpstreamFailures, LatencyP50: webui.Duration(st.Latency.P50), LatencyP99: webui.Duration(st.Latency.P99)}
	if len(l.Config.DNS.Upstreams) > 0 {
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

// Interface checks.
var (
	_ webui.Router  = (*Router)(nil)
	_ webui.Devices = (*Router)(nil)
)
