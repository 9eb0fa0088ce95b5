package ra

import (
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/ndp"
)

// advertisement is the RA to send at now, or nil when there is nothing to
// announce; deprecated prefixes past their valid time are forgotten.
func (s *Server) advertisement(now time.Time, mac net.HardwareAddr) *ndp.RouterAdvertisement {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deprecated = slices.DeleteFunc(s.deprecated, func(p Prefix) bool { return !now.Before(p.Valid) })
	ra := &ndp.RouterAdvertisement{CurrentHopLimit: 64, OtherConfiguration: s.cfg.OtherConfig}
	valid := false
	for _, p := range s.current {
		if !now.Before(p.Valid) {
			continue
		}
		valid = true
		ra.Options = append(ra.Options, pio(p.Prefix, min(left(now, p.Preferred), preferredLimit), min(left(now, p.Valid), validLimit)))
	}
	for _, p := range s.deprecated {
		ra.Options = append(ra.Options, pio(p.Prefix, 0, 0))
	}
	if len(ra.Options) == 0 {
		return nil
	}
	if valid {
		ra.RouterLifetime = s.cfg.RouterLifetime
	}
	if len(mac) == 6 {
		ra.Options = append(ra.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac})
	}
	if s.cfg.MTU > 0 {
		ra.Options = append(ra.Options, ndp.NewMTU(uint32(s.cfg.MTU)))
	}
	life := 3 * s.cfg.MaxInterval // RFC 8106 section 5.1
	if !valid {
		life = 0
	}
	if len(s.cfg.DNS) > 0 {
		ra.Options = append(ra.Options, &ndp.RecursiveDNSServer{Lifetime: life, Servers: s.cfg.DNS})
	}
	if len(s.cfg.Domains) > 0 {
		ra.Options = append(ra.Options, &ndp.DNSSearchList{Lifetime: life, DomainNames: s.cfg.Domains})
	}
	return ra
}

func pio(p netip.Prefix, preferred, valid time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{PrefixLength: uint8(p.Bits()), OnLink: true, AutonomousAddressConfiguration: true,
		PreferredLifetime: preferred, ValidLifetime: valid, Prefix: p.Addr()}
}

// left is the whole seconds from now to t, at least 0.
func left(now, t time.Time) time.Duration {
	return max(t.Sub(now), 0).Truncate(time.Second)
}
