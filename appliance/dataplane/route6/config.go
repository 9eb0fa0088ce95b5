package route6

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
)

// Side is where a frame came from or goes to.
type Side uint8

// The sides.
const (
	LAN Side = iota
	WAN
)

func (s Side) String() string { return [...]string{"lan", "wan"}[s&1] }

// Port is one side's port: its id in the engine, MAC and MTU, and the
// box's IPv6 addresses on it (a link-local one first).
type Port struct {
	ID    int
	MAC   [6]byte
	MTU   int
	Addrs []netip.Addr
}

// Config is the router's IPv6 configuration. SetConfig replaces it live.
type Config struct {
	LAN, WAN Port
	// Host is the port id of the box's own stack on the LAN (the host
	// port), 0 for none: its frames go to the LAN (multicast as they are,
	// unicast to the LAN's hosts through the neighbour cache).
	Host int
	// LANPrefixes are the on-link prefixes of the LAN: the current /64
	// and those being deprecated, still routed until they expire.
	LANPrefixes []netip.Prefix
	// Delegated are the prefixes the ISP routes to the box: a packet to
	// one of them that is not on the LAN is unreachable (no loop back to
	// the WAN, RFC 7084 WPD-5).
	Delegated []netip.Prefix
	// Gateway is the WAN next hop (the ISP router's link-local address):
	// set, or learnt from the WAN's router advertisements when invalid.
	Gateway netip.Addr
	// WANPointToPoint makes the WAN a point-to-point link (PPPoE, RFC
	// 5072): no neighbour discovery there. The default route is the link
	// itself while Gateway (the peer's link-local address, set while the
	// link is up) is: no RA is needed, and one that comes still gives its
	// prefixes for SLAAC but no default router. Frames to the WAN take
	// WANPeerMAC as their destination without a lookup (the link's
	// framing, e.g. the PPPoE session's, puts the peer's anyway), and the
	// WAN's first address is the link-local one the link negotiated.
	WANPointToPoint bool
	WANPeerMAC      [6]byte
	// ICMPRate is the number of ICMPv6 errors the box sends per second
	// (RFC 4443 2.4 f); 0 means 100.
	ICMPRate int
	// Scan limits the new connections from the WAN to LAN addresses
	// without a neighbour entry (scan.go).
	Scan ScanLimits
}

// Limits size the tables; New allocates them once.
type Limits struct {
	// MaxConns is the connection table's capacity (rounded up to a power
	// of two of 4-entry buckets); 0 means 65536.
	MaxConns int
	// Neighbours is the neighbour cache's capacity; 0 means 1024.
	Neighbours int
	// Pending is the per-worker queue of frames waiting for a neighbour;
	// 0 means 64.
	Pending int
	// MaxFrame is the largest frame; 0 means 9216 + 18.
	MaxFrame int
}

// snapshot is the checked configuration the workers read.
type snapshot struct {
	side     [2]Port
	host     int
	lanNets  []netip.Prefix
	deleg    []netip.Prefix
	gateway  [16]byte // zero: learnt (on a point-to-point WAN: no route)
	ptp      bool     // the WAN is a point-to-point link
	peerMAC  [6]byte  // its frames' destination
	icmpRate int
	scan     scanRates
	src      [2][16]byte // the source of the box's ICMPv6 errors per side
	// wanUse are the WAN addresses in use beyond the configured ones
	// (also in side[WAN].Addrs), tent the tentative ones (storeLocked).
	wanUse, tent [][16]byte
}

func (cfg *Config) check() (*snapshot, error) {
	s := &snapshot{side: [2]Port{cfg.LAN, cfg.WAN}, host: cfg.Host, icmpRate: cfg.ICMPRate, scan: cfg.Scan.rates(),
		ptp: cfg.WANPointToPoint, peerMAC: cfg.WANPeerMAC}
	if !s.ptp && s.peerMAC != ([6]byte{}) {
		return nil, errors.New("a WAN peer MAC without a point-to-point WAN")
	}
	if s.peerMAC[0]&1 != 0 {
		return nil, fmt.Errorf("WAN peer MAC %x is not unicast", s.peerMAC)
	}
	if s.icmpRate == 0 {
		s.icmpRate = 100
	}
	for i, p := range s.side {
		if p.MTU < 1280 {
			return nil, fmt.Errorf("%s MTU %d is below IPv6's 1280", Side(i), p.MTU)
		}
		if p.MAC[0]&1 != 0 || p.MAC == [6]byte{} {
			return nil, fmt.Errorf("%s MAC is not unicast", Side(i))
		}
		if len(p.Addrs) == 0 || !p.Addrs[0].IsLinkLocalUnicast() {
			return nil, fmt.Errorf("%s addresses %v do not start with a link-local one", Side(i), p.Addrs)
		}
		for _, a := range p.Addrs {
			if !a.Is6() || a.Is4In6() || a.Zone() != "" || !(a.IsLinkLocalUnicast() || a.IsGlobalUnicast()) {
				return nil, fmt.Errorf("%s address %v is not a unicast IPv6 address", Side(i), a)
			}
		}
		s.side[i].Addrs = append([]netip.Addr(nil), p.Addrs...)
	}
	if s.side[LAN].ID == s.side[WAN].ID || s.host != 0 && (s.host == s.side[LAN].ID || s.host == s.side[WAN].ID) {
		return nil, errors.New("the LAN, WAN and host ports need different ids")
	}
	for _, p := range cfg.LANPrefixes {
		if !p.Addr().Is6() || p.Bits() != 64 || !p.Addr().IsGlobalUnicast() {
			return nil, fmt.Errorf("LAN prefix %v is not a global /64", p)
		}
		s.lanNets = append(s.lanNets, p.Masked())
	}
	for _, p := range cfg.Delegated {
		if !p.Addr().Is6() || p.Bits() > 64 || !p.Addr().IsGlobalUnicast() {
			return nil, fmt.Errorf("delegated prefix %v is not a global prefix of /64 or shorter", p)
		}
		s.deleg = append(s.deleg, p.Masked())
	}
	if cfg.Gateway.IsValid() {
		if !cfg.Gateway.Is6() || !(cfg.Gateway.IsLinkLocalUnicast() || cfg.Gateway.IsGlobalUnicast()) {
			return nil, fmt.Errorf("gateway %v is not a unicast IPv6 address", cfg.Gateway)
		}
		s.gateway = cfg.Gateway.WithZone("").As16()
	}
	return s, nil
}

// errorSource is the address the box's ICMPv6 errors to side come from:
// a global address of that side (a preferred one first: they come first),
// else one of the LAN's, else the side's link-local address.
func errorSource(s *snapshot, side Side) [16]byte {
	for _, sd := range []Side{side, LAN} {
		for _, a := range s.side[sd].Addrs {
			if a.IsGlobalUnicast() {
				return a.As16()
			}
		}
	}
	return s.side[side].Addrs[0].As16()
}

func inAny(nets []netip.Prefix, a *[16]byte) bool {
	addr := netip.AddrFrom16(*a)
	for _, p := range nets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// boxAddr says whether a is one of the box's addresses on side.
func (s *snapshot) boxAddr(side Side, a *[16]byte) bool {
	for _, b := range s.side[side].Addrs {
		if b.As16() == *a {
			return true
		}
	}
	return false
}

type cfgPtr = atomic.Pointer[snapshot]
