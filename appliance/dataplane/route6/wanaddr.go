package route6

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
)

// The box's WAN addresses: the link-local one, SLAAC addresses in the
// /64s the WAN's router advertisements offer (RFC 4862 5.5.3, RFC 7217
// interface identifiers) and the DHCPv6 client's IA_NA addresses, each
// checked by duplicate address detection (RFC 4862 5.4) before the router
// answers for it. Workers record what NDP tells them (a prefix, a
// conflict) and send the probes; Maintain, SetWANAddressing and SetConfig
// (control goroutines) run the timers and publish the addresses in use.

// Origin says where a WAN address comes from.
type Origin uint8

// The origins.
const (
	OriginLinkLocal Origin = iota // modified EUI-64 of the WAN MAC
	OriginSLAAC                   // a router advertisement's prefix and an RFC 7217 interface identifier
	OriginDHCPv6                  // the DHCPv6 client's IA_NA
)

func (o Origin) String() string {
	switch o {
	case OriginLinkLocal:
		return "link-local"
	case OriginSLAAC:
		return "slaac"
	case OriginDHCPv6:
		return "dhcpv6"
	}
	return "origin(" + strconv.Itoa(int(o)) + ")"
}

// AddrState is a WAN address's state (RFC 4862 5.4, 5.5.4).
type AddrState uint8

// The states.
const (
	// AddrTentative: duplicate address detection runs; the router
	// neither answers for the address nor uses or accepts it.
	AddrTentative AddrState = iota
	// AddrPreferred: in use.
	AddrPreferred
	// AddrDeprecated: past its preferred lifetime; still answered for,
	// the source of the box's errors only when no preferred one is left.
	AddrDeprecated
	// AddrDuplicate: another node has it; never used.
	AddrDuplicate
	// AddrRemoved: gone (its valid lifetime ended, or its origin
	// withdrew it); only in WANEvents.
	AddrRemoved
)

var addrStateNames = [...]string{"tentative", "preferred", "deprecated", "duplicate", "removed"}

func (s AddrState) String() string {
	if int(s) < len(addrStateNames) {
		return addrStateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Forever is a lifetime deadline that never comes (an infinite lifetime).
const Forever = ^uint32(0)

// Timers and limits of WAN addressing.
const (
	retransTimer  = 1e9  // RFC 4861 RETRANS_TIMER, ns: how long DAD waits for a conflict
	idgenRetries  = 3    // RFC 7217 IDGEN_RETRIES: new identifiers after a conflict
	twoHours      = 7200 // RFC 4862 5.5.3 e: the valid lifetime an RA cannot cut below
	maxRS         = 3    // RFC 4861 MAX_RTR_SOLICITATIONS
	rsInterval    = 4e9  // RFC 4861 RTR_SOLICITATION_INTERVAL, ns
	maxWANAddrs   = 16   // the link-local address, SLAAC prefixes and DHCPv6 addresses together
	minSecretSize = 16   // RFC 7217 5: a secret key of at least 128 bits
)

// WANAddressing is how the box gets its global WAN addresses.
type WANAddressing struct {
	// SLAAC forms an address in every /64 the WAN's router
	// advertisements offer for autonomous configuration, with RFC 7217's
	// stable opaque interface identifier of the prefix, NetIface (a
	// stable name of the interface), a DAD counter and Secret (at least
	// 16 bytes, kept across restarts). Prefixes are learnt either way:
	// turned on, SLAAC forms addresses in those still valid at once.
	SLAAC    bool
	Secret   []byte
	NetIface string
	// DHCPv6 says the DHCPv6 client's IA_NA addresses are used: Leased
	// are those it holds. Without it every leased address goes, the
	// declined duplicates too.
	DHCPv6 bool
	Leased []Leased
	// OnEvent (may be nil) is called with each change of a WAN address's
	// state, on the goroutine that calls Maintain or SetWANAddressing,
	// without the router's locks; it must not block.
	OnEvent func(WANEvent)
}

// Leased is an IA_NA address and when its lifetimes end (Unix seconds,
// Forever for never).
type Leased struct {
	Addr             netip.Addr
	Preferred, Valid uint32
}

// WANAddr is one of the box's WAN addresses as WANAddrs lists it.
type WANAddr struct {
	Addr   netip.Addr
	Origin Origin
	State  AddrState
	// Preferred and Valid are when its lifetimes end (Unix seconds,
	// Forever for never; 0 for the link-local address, which has none).
	Preferred, Valid uint32
	// Prefix is the /64 a SLAAC address was formed in; DADCounter is its
	// RFC 7217 DAD counter (0 unless an earlier address was a duplicate).
	Prefix     netip.Prefix
	DADCounter int
}

// WANEvent is a WAN address entering State: AddrTentative (formed or
// leased; DAD begins), AddrPreferred (DAD passed, or preferred again),
// AddrDeprecated, AddrDuplicate (Retry: SLAAC tries the next identifier;
// a duplicate IA_NA address is the DHCPv6 client's to decline), or
// AddrRemoved.
type WANEvent struct {
	WANAddr
	Retry bool
}

// checkWANAddressing checks the settings SetWANAddressing takes.
func checkWANAddressing(a *WANAddressing) error {
	if a.SLAAC && len(a.Secret) < minSecretSize {
		return errors.New("the SLAAC secret has fewer than 16 bytes")
	}
	for _, l := range a.Leased {
		if !l.Addr.Is6() || l.Addr.Is4In6() || l.Addr.Zone() != "" || !l.Addr.IsGlobalUnicast() {
			return errors.New("leased address " + l.Addr.String() + " is not a global unicast IPv6 address")
		}
	}
	return nil
}

// SetWANAddressing sets how the box gets its global WAN addresses; now
// (Unix nanoseconds) is the clock Maintain runs on.
func (r *Router) SetWANAddressing(a WANAddressing, now int64) error {
	if err := checkWANAddressing(&a); err != nil {
		return errors.New("route6: " + err.Error())
	}
	r.mu.Lock()
	r.wan.mu.Lock()
	evs := r.wan.set(&a)
	r.wan.mu.Unlock()
	r.mu.Unlock()
	r.maintain(now, evs)
	return nil
}

// Maintain runs the WAN addresses' timers at now (Unix nanoseconds): call
// it every few hundred milliseconds. Addresses whose DAD passed (one
// second after the probe went out without a conflict) come into use,
// duplicates are reported, lifetimes end.
func (r *Router) Maintain(now int64) { r.maintain(now, nil) }

// Due reports whether DAD probes or a router solicitation wait for a
// worker's Tick to send them.
func (r *Router) Due() bool { return r.wan.due.Load() }

func (r *Router) maintain(now int64, evs []WANEvent) {
	r.mu.Lock()
	t := r.wan
	t.mu.Lock()
	evs = append(evs, t.advance(now)...)
	use, tent := t.lists()
	cur := r.cfg.Load()
	changed := cur == nil || !slices.Equal(cur.wanUse, use) || !slices.Equal(cur.tent, tent)
	if changed {
		if s, err := r.conf.check(); err == nil {
			r.storeLocked(s)
		}
	}
	fn := t.event
	t.mu.Unlock()
	r.mu.Unlock()
	if changed {
		r.changed()
	}
	if fn != nil {
		for _, ev := range evs {
			fn(ev)
		}
	}
}

// storeLocked completes s with the WAN addresses in use and the tentative
// ones and makes it the snapshot; under r.mu and r.wan.mu.
func (r *Router) storeLocked(s *snapshot) {
	s.wanUse, s.tent = r.wan.lists()
	for _, a := range s.wanUse {
		s.side[WAN].Addrs = append(s.side[WAN].Addrs, netip.AddrFrom16(a))
	}
	for i := range s.side {
		s.src[i] = errorSource(s, Side(i))
	}
	r.cfg.Store(s)
}

// WANAddrs lists the box's WAN addresses (the link-local one first),
// tentative and duplicate ones included.
func (r *Router) WANAddrs() []WANAddr {
	t := r.wan
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []WANAddr
	for _, o := range []Origin{OriginLinkLocal, OriginDHCPv6, OriginSLAAC} {
		for i := range t.e {
			if e := &t.e[i]; e.used && e.formed && e.origin == o {
				out = append(out, e.listing())
			}
		}
	}
	return out
}

// Addrs are the box's addresses on side that the router answers for and
// uses (a link-local one first).
func (r *Router) Addrs(side Side) []netip.Addr {
	if s := r.cfg.Load(); s != nil {
		return slices.Clone(s.side[side&1].Addrs)
	}
	return nil
}

// tentative says whether a is a tentative WAN address.
func (s *snapshot) tentative(a *[16]byte) bool {
	for i := range s.tent {
		if s.tent[i] == *a {
			return true
		}
	}
	return false
}

// sendWAN sends the due DAD probes (and a router solicitation) on the
// WAN from the worker's NS buffers; what does not fit waits for the next
// Tick.
func (w *Worker) sendWAN(s *snapshot, now int64) {
	t := w.r.wan
	t.mu.Lock()
	defer t.mu.Unlock()
	more := false
	for i := range t.e {
		e := &t.e[i]
		if !e.sendNS {
			continue
		}
		if w.nsUsed == len(w.nsBufs) {
			more = true
			break
		}
		b := w.nsBufs[w.nsUsed][:dadFrameLen]
		w.nsUsed++
		putDAD(b, s.side[WAN].MAC, e.addr)
		w.out = append(w.out, outFrame{port: s.side[WAN].ID, b: b})
		e.sendNS, e.sentNS = false, now
		w.c.ns.Add(1)
	}
	if t.sendRS {
		if w.nsUsed == len(w.nsBufs) {
			more = true
		} else {
			b := w.nsBufs[w.nsUsed][:rsFrameLen]
			w.nsUsed++
			putRS(b, s.side[WAN].MAC, s.side[WAN].Addrs[0].As16())
			w.out = append(w.out, outFrame{port: s.side[WAN].ID, b: b})
			t.sendRS, t.rsAt = false, now
			t.rsSent++
			w.c.rs.Add(1)
		}
	}
	t.due.Store(more)
}
