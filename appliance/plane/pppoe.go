package plane

import (
	"net/netip"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/services/pppoe"
)

// SetPPPoE takes the WAN's PPPoE client's state (nil: the WAN is not a
// PPPoE link) and applies it to the running router live, as SetLease
// does a lease: with a session up (PhaseUp with an IPCP address) the WAN
// address is IPCP's (a /32), the gateway the peer, the WAN MTU the
// session's, and the dataplane frames the router's packets in the session
// to the AC; with none, the WAN has no address (the connections of the
// old one are flushed) and nothing leaves on it. The DNS servers IPCP
// gave are the caller's (the resolver's) business: logged here.
func (p *Plane) SetPPPoE(st *pppoe.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st != nil {
		c := *st
		st = &c
	}
	p.pppoe = st
	if p.engine == nil || p.applied == nil || p.applied.Mode != config.ModeNAT {
		return
	}
	dc, err := p.configLocked()
	if err == nil {
		err = p.engine.Apply(dc)
	}
	if err != nil {
		p.log.Error("dataplane: the PPPoE session not applied", "err", err)
		return
	}
	if n := dc.NAT; st != nil && n.PPPoESession != (dataplane.PPPoESession{}) {
		p.log.Info("dataplane: WAN address from PPPoE", "address", n.WANAddr, "peer", n.Gateway, "mtu", n.WANMTU,
			"session", n.PPPoESession.ID, "ac", n.PPPoESession.ACMAC, "dns1", st.DNS1, "dns2", st.DNS2)
	} else if st != nil {
		p.log.Warn("dataplane: the WAN's PPPoE session is down")
	}
}

// configLocked is the running config's dataplane config with the lease
// and the PPPoE session.
func (p *Plane) configLocked() (*dataplane.Config, error) {
	dc, err := dataplaneConfig(p.applied, p.cpu, p.lease)
	if err != nil {
		return nil, err
	}
	dc.Ring.Kind = p.ring
	if dc.NAT != nil {
		pppoeNAT(dc.NAT, p.pppoe)
	}
	return dc, nil
}

// pppoeNAT makes n's WAN the PPPoE link of st (nil: leaves n as it is):
// with a session up, IPCP's address as a /32, the peer as gateway and
// the session's MTU, and IPv6CP's link-local addresses (the IPv6
// router's WAN, a point-to-point link); without one, no WAN address.
func pppoeNAT(n *dataplane.NAT, st *pppoe.Status) {
	if st == nil {
		return
	}
	n.WANPPPoE = true
	n.PPPoESession = dataplane.PPPoESession{}
	n.WANAddr, n.Gateway, n.WANMTU = netip.Prefix{}, netip.Addr{}, 0
	if st.Phase != pppoe.PhaseUp || !st.LocalIPv4.Is4() || !st.PeerIPv4.Is4() || len(st.ACMAC) != 6 || st.SessionID == 0 {
		return
	}
	n.PPPoESession = dataplane.PPPoESession{ID: st.SessionID, ACMAC: [6]byte(st.ACMAC)}
	if st.LocalLinkLocal.IsValid() && st.PeerLinkLocal.IsValid() { // IPv6CP is up: IPv6 over the session
		n.PPPoESession.LocalLinkLocal, n.PPPoESession.PeerLinkLocal = st.LocalLinkLocal, st.PeerLinkLocal
	}
	n.WANAddr = netip.PrefixFrom(st.LocalIPv4, 32)
	n.Gateway = st.PeerIPv4
	if st.MTU >= config.MinNATMTU {
		n.WANMTU = st.MTU
	}
}
