package config

import (
	"time"
)

// WANPPPoE makes the WAN a PPPoE link (RFC 2516): the box dials the ISP's
// access concentrator over the WAN port (or its VLAN) and takes its WAN
// address, gateway, MTU and DNS servers from the session (IPCP). It
// replaces nat.wanDHCP and a static WAN address.
type WANPPPoE struct {
	// Username and Password authenticate the box (PAP or CHAP-MD5,
	// whichever the AC asks for). Required. The API never shows the
	// password back (RedactedSecret stands for it).
	Username string `json:"username"`
	Password string `json:"password"`
	// Service is the Service-Name asked for; "" takes any.
	Service string `json:"service,omitempty"`
	// ACName accepts only the access concentrator of that name; "" any.
	ACName string `json:"acName,omitempty"`
	// MRU is the MRU the box asks for, 1280..1500. Default 1492; above
	// 1492 the box asks for RFC 4638's PPP-Max-Payload (a WAN port at the
	// default MTU then runs at MRU+8: plane's translate).
	MRU int `json:"mru,omitempty"`
	// LCPEchoInterval is the keepalive period, 1s..5m. Default 10s.
	LCPEchoInterval Duration `json:"lcpEchoInterval,omitzero"`
	// LCPEchoFailures are the unanswered echoes after which the session
	// is dead and the box dials again, 1..100. Default 3.
	LCPEchoFailures int `json:"lcpEchoFailures,omitempty"`
}

// PPPoE defaults and limits.
const (
	DefaultPPPoEMRU          = 1492
	DefaultPPPoEEchoInterval = 10 * time.Second
	DefaultPPPoEEchoFailures = 3
	minPPPoEMRU              = 1280
	maxPPPoEMRU              = 1500
	maxPPPoEEchoFailures     = 100
	maxPPPoEEchoInterval     = 5 * time.Minute
	// maxPPPoEText bounds the username, password, service and AC name
	// (a PAP field's length is one byte; a PPPoE tag's fits easily).
	maxPPPoEText = 255
)

// RedactedSecret stands for a secret (the PPPoE password) in what the
// API shows; a config applied with it keeps the stored secret.
const RedactedSecret = "(unchanged)"

// EffectiveMRU is the MRU the client asks for (the default when unset).
func (p *WANPPPoE) EffectiveMRU() int {
	if p.MRU == 0 {
		return DefaultPPPoEMRU
	}
	return p.MRU
}

// EchoInterval is the LCP echo period (the default when unset).
func (p *WANPPPoE) EchoInterval() time.Duration {
	if p.LCPEchoInterval == 0 {
		return DefaultPPPoEEchoInterval
	}
	return p.LCPEchoInterval.D()
}

// EchoFailures is the LCP echo failure count (the default when unset).
func (p *WANPPPoE) EchoFailures() int {
	if p.LCPEchoFailures == 0 {
		return DefaultPPPoEEchoFailures
	}
	return p.LCPEchoFailures
}

// IsPPPoE reports whether the config's WAN is a PPPoE link.
func (c *Config) IsPPPoE() bool { return c.Mode == ModeNAT && c.NAT.WAN.PPPoE != nil }

// pppoe checks nat.wan.pppoe in any mode: it needs NAT mode, excludes
// the other ways to address the WAN and IPv6 (not over PPPoE yet).
func (v *validator) pppoe() {
	p := v.c.NAT.WAN.PPPoE
	if p == nil {
		return
	}
	const at = "nat.wan.pppoe"
	if v.c.Mode != ModeNAT {
		v.add(at, "PPPoE needs mode \"nat\" (a bridge has no WAN link)")
		return
	}
	if v.c.NAT.WANDHCP {
		v.add("nat.wanDHCP", "nat.wan.pppoe gives the WAN address; turn wanDHCP off")
	}
	if v.c.NAT.Gateway.IsValid() {
		v.add("nat.gateway", "nat.wan.pppoe gives the gateway (the PPP peer); remove it")
	}
	if v.wan >= 0 && len(v.c.Ports[v.wan].Addresses) > 0 {
		v.add(index("ports", v.wan)+".addresses", "nat.wan.pppoe gives the WAN address; remove these addresses")
	}
	if v.c.IPv6.Gateway.IsValid() {
		v.add("ipv6.gateway", "over nat.wan.pppoe the IPv6 gateway is the PPP peer (IPv6CP); remove it")
	}
	for _, f := range []struct {
		name, val string
		required  bool
	}{{"username", p.Username, true}, {"password", p.Password, true}, {"service", p.Service, false}, {"acName", p.ACName, false}} {
		switch {
		case f.val == "" && f.required:
			v.add(at+"."+f.name, "missing: the ISP's PPPoE %s", f.name)
		case len(f.val) > maxPPPoEText:
			v.add(at+"."+f.name, "%d bytes; at most %d", len(f.val), maxPPPoEText)
		}
	}
	if msg := placeholderError(p.Password); msg != "" {
		v.add(at+".password", "%s", msg)
	}
	if m := p.MRU; m != 0 && (m < minPPPoEMRU || m > maxPPPoEMRU) {
		v.add(at+".mru", "%d out of range %d..%d (1500 asks for RFC 4638)", m, minPPPoEMRU, maxPPPoEMRU)
	}
	if d := p.LCPEchoInterval.D(); d != 0 && (d < time.Second || d > maxPPPoEEchoInterval) {
		v.add(at+".lcpEchoInterval", "%s out of range 1s..%s", p.LCPEchoInterval, Duration(maxPPPoEEchoInterval))
	}
	if n := p.LCPEchoFailures; n < 0 || n > maxPPPoEEchoFailures {
		v.add(at+".lcpEchoFailures", "%d out of range 1..%d", n, maxPPPoEEchoFailures)
	}
}
