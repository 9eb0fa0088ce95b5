package dataplane

import (
	"encoding/binary"
	"net/netip"

	"e1kbox/appliance/dataplane/route6"
)

// newRoute6 builds the IPv6 router for the NAT ports p, without prefixes
// yet: the box's link-local addresses on both sides, the host port, the
// WAN as n says (route6WAN).
func newRoute6(p natPorts, n *NAT) (*route6.Router, error) {
	c := route6.Config{
		LAN:  route6.Port{ID: p.lanID, MAC: p.lanMAC, MTU: max(min(p.lanMTU, maxNATMTU), 1280), Addrs: []netip.Addr{LinkLocal(p.lanMAC)}},
		WAN:  route6.Port{ID: p.wanID, MAC: p.wanMAC},
		Host: p.hostID,
	}
	route6WAN(&c, p, n)
	return route6.New(c, route6.Limits{})
}

// route6WAN sets the WAN of c as n says: its MTU (the lease's or the
// session's) and next hop (IPv6Gateway; invalid: learnt). A PPPoE WAN is
// a point-to-point link: the box's link-local address is IPv6CP's, the
// default route the session while IPv6CP is up (its peer the next hop,
// the AC the frames' destination).
func route6WAN(c *route6.Config, p natPorts, n *NAT) {
	ll := LinkLocal(p.wanMAC)
	c.WAN.MTU = max(wanMTU(n.linkMTU(p.wanMTU), n.WANMTU), 1280)
	c.Gateway, c.WANPointToPoint, c.WANPeerMAC = n.IPv6Gateway, false, [6]byte{}
	if n.WANPPPoE {
		s := n.PPPoESession
		c.Gateway, c.WANPointToPoint = netip.Addr{}, true
		if s.ID != 0 && s.LocalLinkLocal.IsValid() {
			ll, c.Gateway, c.WANPeerMAC = s.LocalLinkLocal, s.PeerLinkLocal, s.ACMAC
		}
	}
	c.WAN.Addrs = append([]netip.Addr{ll}, c.WAN.Addrs[min(1, len(c.WAN.Addrs)):]...)
}

// setRoute6WAN gives the running IPv6 router n's WAN (route6WAN), keeping
// everything else.
func setRoute6WAN(r *route6.Router, p natPorts, n *NAT) error {
	c := r.Config()
	was := c
	route6WAN(&c, p, n)
	if c.Gateway == was.Gateway && c.WANPointToPoint == was.WANPointToPoint && c.WANPeerMAC == was.WANPeerMAC &&
		c.WAN.MTU == was.WAN.MTU && c.WAN.Addrs[0] == was.WAN.Addrs[0] {
		return nil
	}
	return r.SetConfig(c)
}

// LinkLocal is the link-local address of mac by modified EUI-64 (RFC 4291
// appendix A), as the kernel gives an interface with that MAC.
func LinkLocal(mac [6]byte) netip.Addr {
	var a [16]byte
	binary.BigEndian.PutUint16(a[0:2], 0xfe80)
	a[8] = mac[0] ^ 0x02
	a[9], a[10], a[11], a[12] = mac[1], mac[2], 0xff, 0xfe
	a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(a)
}
