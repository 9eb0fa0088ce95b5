package dataplane

import (
	"encoding/binary"
	"net/netip"

	"e1kbox/appliance/dataplane/route6"
)

// newRoute6 builds the IPv6 router for the NAT ports p, without prefixes
// yet: the box's link-local addresses on both sides, the host port, the
// WAN next hop gw (invalid: learnt).
func newRoute6(p natPorts, wanLease int, gw netip.Addr) (*route6.Router, error) {
	return route6.New(route6.Config{
		LAN:     route6.Port{ID: p.lanID, MAC: p.lanMAC, MTU: max(min(p.lanMTU, maxNATMTU), 1280), Addrs: []netip.Addr{LinkLocal(p.lanMAC)}},
		WAN:     route6.Port{ID: p.wanID, MAC: p.wanMAC, MTU: max(wanMTU(p.wanMTU, wanLease), 1280), Addrs: []netip.Addr{LinkLocal(p.wanMAC)}},
		Host:    p.hostID,
		Gateway: gw,
	}, route6.Limits{})
}

// setRoute6Gateway gives the running IPv6 router another WAN next hop
// (invalid: learnt), keeping everything else.
func setRoute6Gateway(r *route6.Router, gw netip.Addr) error {
	c := r.Config()
	if c.Gateway == gw {
		return nil
	}
	c.Gateway = gw
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
