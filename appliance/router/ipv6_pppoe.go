package router

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/appliance/services/pppoe"
)

// IPv6 over PPPoE (RFC 5072, RFC 8415 over the session): the dataplane
// routes IPv6 over the session as a point-to-point link once IPv6CP is up
// (the plane gives it the link-locals); the DHCPv6 client asks for the
// delegation over the session's transport (PPPoELink.DHCPv6), from
// IPv6CP's link-local address. It starts when IPv6CP is up and restarts
// for every new session (session ID, link-local), keeping the lease
// meanwhile (the LAN keeps its /64): the new client asks for it again in
// a Solicit (the new session's server may not know the binding; one
// that does hands the same prefix back), and a new delegation takes the
// path of any other (applyDelegation: the new /64 announced, the old one
// deprecated). The LAN's RAs advertise the session's MTU.

// pppoeDHCP6 binds the DHCPv6 client's cfg to the PPPoE session up: the
// endpoint's MAC, IPv6CP's link-local source and the session's transport.
// It returns what of the session the client is bound to (a new session
// restarts it), and false while no session with IPv6CP is up.
func (r *Router) pppoeDHCP6(cfg *dhcp6c.Config) (string, bool) {
	s := r.pppoe
	if s == nil || s.Phase != pppoe.PhaseUp || !s.LocalLinkLocal.IsValid() || !s.PeerLinkLocal.IsValid() ||
		r.opts.PPPoELink == nil {
		return "", false
	}
	link, err := r.opts.PPPoELink()
	if err != nil {
		return "", false
	}
	get, mtu := r.opts.PPPoELink, s.MTU
	cfg.MAC, cfg.VLAN, cfg.LinkLocal, cfg.SolicitKept = link.MAC(), dhcpclient.VLAN{}, s.LocalLinkLocal, true
	cfg.Open = func() (dhcpclient.Transport, int, error) {
		if _, err := get(); err != nil {
			return nil, 0, fmt.Errorf("the PPPoE session: %w", err)
		}
		return newLiveDHCP6(get, 0), mtu, nil
	}
	return fmt.Sprintf("pppoe %s session %d %s", cfg.MAC, s.SessionID, s.LocalLinkLocal), true
}

// pauseClient6 stops the DHCPv6 client while the PPPoE session is down,
// keeping its lease for the client of the next session, bound to base.
func (r *Router) pauseClient6(base string) {
	if r.v6.client.end() {
		r.v6.paused = base
	}
}

// pppoe6Changed follows a new PPPoE status: the session's MTU for the
// LAN's RAs (the last session's while none is up), the DHCPv6 client
// over the new session. Under r.mu.
func (r *Router) pppoe6Changed() {
	if r.cfg == nil || !ipv6On(r.cfg) {
		return
	}
	if s := r.pppoe; s != nil && s.Phase == pppoe.PhaseUp && s.MTU >= 1280 {
		r.v6.pppMTU = s.MTU
	}
	if err := r.applyIPv6(); err != nil {
		r.log.Warn("IPv6 after the PPPoE session", "err", err)
	}
	r.publish()
}

// liveDHCP6 is the DHCPv6 client's transport over the session of
// whichever engine runs (a dhcpclient.Transport): when the dataplane
// restarts, the session stays (the plane gives the new engine it) and
// the transport moves to the new engine's endpoint, as liveLink does for
// the PPPoE client.
type liveDHCP6 struct {
	get   func() (PPPoELink, error)
	every time.Duration // how often the endpoint is checked (0: a second)

	mu     sync.Mutex
	cur    PPPoELink
	tr     dhcpclient.Transport
	closed bool
	done   chan struct{}
}

func newLiveDHCP6(get func() (PPPoELink, error), every time.Duration) *liveDHCP6 {
	if every == 0 {
		every = time.Second
	}
	l := &liveDHCP6{get: get, every: every, done: make(chan struct{})}
	go l.watch()
	return l
}

// watch follows the endpoint until Close: a new one closes the old
// transport, which wakes a Read blocked on it.
func (l *liveDHCP6) watch() {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.transport() //nolint:errcheck // no endpoint: the next tick
		}
	}
}

// transport is the running engine's transport, opened anew when the
// endpoint changed.
func (l *liveDHCP6) transport() (dhcpclient.Transport, error) {
	link, err := l.get()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, net.ErrClosed
	}
	if err != nil {
		return nil, err
	}
	if link != l.cur {
		if l.tr != nil {
			l.tr.Close()
		}
		l.cur, l.tr = link, link.DHCPv6()
	}
	return l.tr, nil
}

// Read reads the next frame from the session, on the engine that runs.
func (l *liveDHCP6) Read(b []byte) (int, bool, error) {
	for {
		tr, err := l.transport()
		if errors.Is(err, net.ErrClosed) {
			return 0, false, err
		}
		if err != nil {
			select {
			case <-l.done:
				return 0, false, net.ErrClosed
			case <-time.After(l.every):
			}
			continue
		}
		n, csum, err := tr.Read(b)
		if err == nil {
			return n, csum, nil
		}
		// Closed: by Close (the next transport says so), or for a new
		// endpoint.
	}
}

// Write sends frame in the session, on the engine that runs.
func (l *liveDHCP6) Write(frame []byte, dst net.HardwareAddr) error {
	tr, err := l.transport()
	if err != nil {
		return err
	}
	return tr.Write(frame, dst)
}

// Close ends the watch and wakes a blocked Read.
func (l *liveDHCP6) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	if l.tr != nil {
		return l.tr.Close()
	}
	return nil
}
