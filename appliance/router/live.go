package router

import (
	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/dnsd"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/appliance/services/ra"
	"e1kbox/appliance/services/timesync"
	"e1kbox/appliance/services/wanclient"
)

// Live is what the router runs, as the dashboard reads it without the
// router's lock (an Apply may hold that while a service stops). A nil
// service does not run.
type Live struct {
	Config *config.Config
	WAN    *wanclient.Client
	DHCP   *dhcpd.Server
	DNS    *dnsd.Server
	NTP    *timesync.Client
	Probe  *Probe
	// PPPoE is the WAN's PPPoE client.
	PPPoE *pppoe.Client
	// DHCP6 and RA are the IPv6 services.
	DHCP6 *dhcp6c.Client
	RA    *ra.Server
}

// Live returns what runs now (nil before the first Apply).
func (r *Router) Live() *Live { return r.live.Load() }

// publish records what runs now for the dashboard; under r.mu.
func (r *Router) publish() {
	l := &Live{Config: r.cfg}
	if r.wan.on {
		l.WAN = r.wan.s
	}
	if r.ppp.on {
		l.PPPoE = r.ppp.s
	}
	if r.dhcp.on {
		l.DHCP = r.dhcp.s
	}
	if r.dns.on {
		l.DNS = r.dns.s
	}
	if r.ntp.on {
		l.NTP = r.ntp.s
	}
	if r.probe.on {
		l.Probe = r.probe.s
	}
	if r.v6.client.on {
		l.DHCP6 = r.v6.client.s
	}
	if r.v6.ra.on {
		l.RA = r.v6.ra.s
	}
	r.live.Store(l)
}
