package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/appliance/services/pppoe"
)

// PPPoELink is the WAN's PPPoE endpoint the client runs on (the
// dataplane's *dataplane.PPPoELink): it sends the client's frames, hands
// it the control frames the WAN port receives, and has the WAN's MAC.
type PPPoELink interface {
	pppoe.Link
	Receive(ctx context.Context, input func([]byte)) error
	MAC() net.HardwareAddr
	// DHCPv6 opens the DHCPv6 client's transport over the session.
	DHCPv6() dhcpclient.Transport
}

// pppoeState is a PPPoE client's status on its way to the lease loop.
type pppoeState struct{ pppoe.Status }

// Clone copies s.
func (s *pppoeState) Clone() *pppoeState {
	if s == nil {
		return nil
	}
	c := *s
	c.ACMAC = append(net.HardwareAddr(nil), s.ACMAC...)
	return &c
}

// applyPPPoE starts the PPPoE client of nat.wan.pppoe, or restarts it
// when its config, the WAN's VLAN or the dataplane's endpoint changed.
func (r *Router) applyPPPoE() error {
	if r.opts.PPPoELink == nil {
		return errors.New("router: PPPoE: no link to the dataplane")
	}
	link, err := r.opts.PPPoELink()
	if err != nil {
		r.stopPPPoE(true)
		return fmt.Errorf("router: PPPoE: %w", err)
	}
	p := r.cfg.NAT.WAN.PPPoE
	cfg := pppoe.Config{User: p.Username, Password: p.Password, Service: p.Service, ACName: p.ACName,
		MRU: p.EffectiveMRU(), EchoInterval: p.EchoInterval(), EchoFailures: p.EchoFailures(), MAC: link.MAC(),
		IPv6: ipv6On(r.cfg), Log: r.log.With("service", "pppoe")}
	// A new VLAN or control priority redials at once (the AC of the old
	// one is gone); so does a new WAN MAC. A new engine (the dataplane
	// restarted) keeps the session: the client follows the engine's
	// endpoint (liveLink), and the plane gives the new engine the session.
	// So does IPv6 on or off (IPv6CP is negotiated with the session).
	at := fmt.Sprintf("%s %d/%d %s %q %q %q %d %s %d %v", link.MAC(), r.cfg.NAT.WAN.VLAN.ID, r.cfg.NAT.WAN.VLAN.ControlPCP,
		p.Username, p.Password, p.Service, p.ACName, cfg.MRU, cfg.EchoInterval, cfg.EchoFailures, cfg.IPv6)
	if r.ppp.on && r.ppp.at == at {
		return nil
	}
	restart := r.ppp.on
	r.stopPPPoE(false)
	gen := r.ppp.gen + 1 // the run begin starts
	cfg.OnEvent = func(ev pppoe.Event) { r.ppp.slot.put(gen, &pppoeState{ev.Status}) }
	live := &liveLink{get: r.opts.PPPoELink}
	c, err := pppoe.New(live, cfg)
	if err != nil {
		return fmt.Errorf("router: PPPoE: %w", err)
	}
	if restart {
		r.log.Info("PPPoE: the client restarts for a new config")
	}
	// The WAN is a PPPoE link from now on: the dataplane hands the
	// client its frames, and nothing but the session's packets leaves.
	r.pppoe = &pppoe.Status{}
	r.opts.OnPPPoE(r.pppoe)
	r.ppp.begin(c, at, func(ctx context.Context, _ func(old, new *pppoeState)) error {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go live.Receive(rctx, c.Input) //nolint:errcheck // ends with rctx
		return c.Run(ctx)
	}, r.log, "pppoe")
	return nil
}

// liveLink is the PPPoE endpoint of whichever engine runs: the dataplane
// may restart (a config change, a hang), and with it its endpoint.
type liveLink struct {
	get func() (PPPoELink, error)
	// every is how often Receive looks for a new engine's endpoint (0: a
	// second).
	every time.Duration
}

// Send sends b on the running engine's endpoint.
func (l *liveLink) Send(b []byte) error {
	cur, err := l.get()
	if err != nil {
		return err
	}
	return cur.Send(b)
}

// Receive feeds input from the running engine's endpoint, moving to a
// new engine's when the dataplane restarts, until ctx ends.
func (l *liveLink) Receive(ctx context.Context, input func([]byte)) error {
	linkCheck := l.every
	if linkCheck == 0 {
		linkCheck = time.Second
	}
	for ctx.Err() == nil {
		cur, err := l.get()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(linkCheck):
			}
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() { // ends the receive when the endpoint changes
			t := time.NewTicker(linkCheck)
			defer t.Stop()
			for {
				select {
				case <-lctx.Done():
					return
				case <-t.C:
					if now, err := l.get(); err != nil || now != cur {
						cancel()
						return
					}
				}
			}
		}()
		cur.Receive(lctx, input) //nolint:errcheck // ends with lctx
		cancel()
	}
	return ctx.Err()
}

// stopPPPoE stops the PPPoE client (Run's end sends the AC a PADT); off
// also tells the plane the WAN is no PPPoE link any more.
func (r *Router) stopPPPoE(off bool) {
	if !r.ppp.end() {
		return
	}
	r.pppoe = nil
	if off {
		r.opts.OnPPPoE(nil)
	} else {
		r.opts.OnPPPoE(&pppoe.Status{})
	}
	if r.dns.on && r.cfg != nil && r.cfg.Mode == config.ModeNAT {
		if err := r.applyDNS(); err != nil {
			r.log.Warn("DNS after the PPPoE session", "err", err)
		}
	}
}

// pppoeChanged takes the status of PPPoE client run gen: the plane gets
// the session (its address, peer and MTU), the DNS forwarder IPCP's
// servers. A status of a client stopped since is dropped.
func (r *Router) pppoeChanged(gen uint64, st *pppoeState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.ppp.gen || !r.ppp.on || st == nil {
		return
	}
	was := r.pppoe != nil && r.pppoe.Phase == pppoe.PhaseUp
	s := st.Status
	r.pppoe = &s
	if up := s.Phase == pppoe.PhaseUp; up {
		r.log.Info("PPPoE session up", "session", s.SessionID, "ac", s.ACName, "acMAC", s.ACMAC, "address", s.LocalIPv4,
			"peer", s.PeerIPv4, "dns1", s.DNS1, "dns2", s.DNS2, "mtu", s.MTU, "linkLocal", s.LocalLinkLocal,
			"peerLinkLocal", s.PeerLinkLocal)
	} else if was {
		r.log.Warn("PPPoE session down", "reason", s.LastDownReason)
	}
	if r.dns.on {
		if err := r.applyDNS(); err != nil {
			r.log.Warn("DNS after the PPPoE session", "err", err)
		}
	}
	r.opts.OnPPPoE(r.pppoe)
	// After the dataplane has the session: the DHCPv6 client's frames
	// travel in it.
	r.pppoe6Changed()
}

// pppoeDNS are the DNS servers of the PPPoE session up (IPCP's).
func (r *Router) pppoeDNS() []netip.Addr {
	s := r.pppoe
	if s == nil || s.Phase != pppoe.PhaseUp {
		return nil
	}
	var dns []netip.Addr
	for _, a := range []netip.Addr{s.DNS1, s.DNS2} {
		if a.IsValid() && !a.IsUnspecified() {
			dns = append(dns, a)
		}
	}
	return dns
}

// PPPoEStatus is the PPPoE client's status (nil: no PPPoE WAN runs).
func (l *Live) PPPoEStatus() *pppoe.Status {
	if l == nil || l.PPPoE == nil {
		return nil
	}
	s := l.PPPoE.Status()
	return &s
}
