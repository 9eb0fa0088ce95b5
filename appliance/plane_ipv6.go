package main

import "net/netip"

// ipv6Prefixes is what a delegation gives the IPv6 router: the LAN's
// prefixes (the current /64 first, then the deprecated ones still in use)
// and the delegated prefixes.
type ipv6Prefixes struct {
	lan, delegated []netip.Prefix
}

// SetIPv6 gives the running IPv6 router the delegation's prefixes (none:
// nothing is routed); a new engine gets them too.
func (p *plane) SetIPv6(lan, delegated []netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v6 = ipv6Prefixes{lan: lan, delegated: delegated}
	p.applyIPv6Locked()
}

func (p *plane) applyIPv6Locked() {
	if p.engine == nil || p.engine.IPv6() == nil {
		return
	}
	if err := p.engine.IPv6().SetPrefixes(p.v6.lan, p.v6.delegated, nil, nil); err != nil {
		p.log.Error("dataplane: IPv6 prefixes not applied", "err", err)
		return
	}
	p.log.Info("dataplane: IPv6 prefixes", "lan", p.v6.lan, "delegated", p.v6.delegated)
}
