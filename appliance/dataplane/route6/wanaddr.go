package route6

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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

// wanEntry is one address (or, for SLAAC, one prefix and the address
// formed in it).
type wanEntry struct {
	used     bool
	origin   Origin
	state    AddrState
	formed   bool // has addr (SLAAC: formed from the prefix while SLAAC is on)
	reported bool // a duplicate's event went out
	listed   bool // DHCPv6: in the client's lease
	sendNS   bool // a DAD probe is due
	counter  uint8
	prefix   [8]byte // SLAAC
	addr     [16]byte
	sentNS   int64  // when the DAD probe went out (ns), 0 before
	pref     uint32 // deadlines, Unix seconds
	valid    uint32
}

// wanTable is the router's WAN addressing state.
type wanTable struct {
	mu     sync.Mutex
	e      [maxWANAddrs]wanEntry
	slaac  bool
	secret []byte
	iface  string
	event  func(WANEvent)
	rsSent uint8 // router solicitations sent
	rsAt   int64 // when the last went out
	sendRS bool
	// due says a worker has probes (or an RS) to send.
	due atomic.Bool
	// raSeen: a router advertisement came; no more solicitations.
	raSeen  atomic.Bool
	dadFail atomic.Uint64
	full    atomic.Uint64 // prefixes and addresses the table had no room for
}

// deadline is now + life seconds, where the infinite lifetime (and what
// would overflow) is Forever.
func deadline(now, life uint32) uint32 {
	if life == Forever || life >= Forever-now {
		return Forever
	}
	return now + life
}

// free returns an unused entry, nil when the table is full.
func (t *wanTable) free() *wanEntry {
	for i := range t.e {
		if !t.e[i].used {
			return &t.e[i]
		}
	}
	t.full.Add(1)
	return nil
}

// probe makes e tentative with a DAD probe due.
func (t *wanTable) probe(e *wanEntry) {
	e.state, e.sendNS, e.sentNS, e.reported = AddrTentative, true, 0, false
	t.due.Store(true)
}

// prefixInfo takes a prefix information option of a WAN router
// advertisement received at now (RFC 4862 5.5.3; the caller checked the A
// flag, the /64, that it is not link-local and preferred ≤ valid): a new
// prefix is recorded for Maintain to form an address in, a known one gets
// the advertised lifetimes, the valid one by the two-hour rule.
func (t *wanTable) prefixInfo(p [8]byte, pref, valid, now uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var e *wanEntry
	for i := range t.e {
		if t.e[i].used && t.e[i].origin == OriginSLAAC && t.e[i].prefix == p {
			e = &t.e[i]
			break
		}
	}
	if e == nil {
		if valid == 0 {
			return
		}
		if e = t.free(); e == nil {
			return
		}
		*e = wanEntry{used: true, origin: OriginSLAAC, prefix: p, pref: deadline(now, pref), valid: deadline(now, valid)}
		return
	}
	var remaining uint32
	if e.valid > now {
		remaining = e.valid - now
	}
	switch {
	case valid > twoHours || valid > remaining:
		e.valid = deadline(now, valid)
	case remaining <= twoHours:
		// Kept: an RA cannot shorten it (RFC 4862 5.5.3 e.2).
	default:
		e.valid = now + twoHours
	}
	e.pref = min(deadline(now, pref), e.valid)
}

// conflict says another node has (or probes for) target: a tentative
// address becomes a duplicate. It reports whether target was tentative.
func (t *wanTable) conflict(target *[16]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.e {
		e := &t.e[i]
		if e.used && e.formed && e.state == AddrTentative && e.addr == *target {
			e.state, e.sendNS = AddrDuplicate, false
			t.dadFail.Add(1)
			return true
		}
	}
	return false
}

// linkLocal makes ll the link-local entry (a new one is probed).
func (t *wanTable) linkLocal(ll [16]byte) {
	for i := range t.e {
		e := &t.e[i]
		if e.used && e.origin == OriginLinkLocal {
			if e.addr == ll {
				return
			}
			*e = wanEntry{}
		}
	}
	if e := t.free(); e != nil {
		*e = wanEntry{used: true, origin: OriginLinkLocal, formed: true, addr: ll}
		t.probe(e)
	}
}

// form gives a SLAAC entry the address of its prefix with DAD counter
// counter (or the next one whose identifier is not reserved) and probes
// it.
func (t *wanTable) form(e *wanEntry, counter uint8) {
	e.addr, e.counter = stableAddr(t.secret, t.iface, e.prefix, counter)
	e.formed = true
	t.probe(e)
}

// stableAddr is RFC 7217's address in prefix: the first 64 bits of
// SHA-256(prefix | len(netIface) | netIface | DAD counter | secret) as the
// interface identifier, with the counter moved on past identifiers RFC
// 5453 reserves (which RFC 7217 5 says to do). It returns the counter it
// used.
func stableAddr(secret []byte, netIface string, prefix [8]byte, counter uint8) ([16]byte, uint8) {
	var a [16]byte
	copy(a[:8], prefix[:])
	for {
		h := sha256.New()
		h.Write(prefix[:])
		h.Write([]byte{byte(len(netIface))})
		h.Write([]byte(netIface))
		h.Write([]byte{counter})
		h.Write(secret)
		sum := h.Sum(nil)
		iid := binary.BigEndian.Uint64(sum[:8])
		if !reservedIID(iid) || counter == 255 {
			binary.BigEndian.PutUint64(a[8:], iid)
			return a, counter
		}
		counter++
	}
}

// reservedIID says whether RFC 5453 reserves the interface identifier:
// the subnet-router anycast one (0), the IANA range 0200:5EFF:FE00:0000 to
// 0200:5EFF:FEFF:FFFF (proxy mobile IPv6 among them), and the subnet
// anycast ones from FDFF:FFFF:FFFF:FF80.
func reservedIID(iid uint64) bool {
	return iid == 0 || iid>>24 == 0x02005efffe || iid >= 0xfdffffffffffff80
}

// lifetimeState is the state of an address in use at now.
func (e *wanEntry) lifetimeState(now uint32) AddrState {
	if e.origin == OriginLinkLocal || now < e.pref {
		return AddrPreferred
	}
	return AddrDeprecated
}

func (e *wanEntry) listing() WANAddr {
	w := WANAddr{Addr: netip.AddrFrom16(e.addr), Origin: e.origin, State: e.state, DADCounter: int(e.counter)}
	if e.origin != OriginLinkLocal {
		w.Preferred, w.Valid = e.pref, e.valid
	}
	if e.origin == OriginSLAAC {
		var p [16]byte
		copy(p[:8], e.prefix[:])
		w.Prefix = netip.PrefixFrom(netip.AddrFrom16(p), 64)
	}
	return w
}

// advance runs the timers at now: DAD that passed, lifetimes, expiry,
// SLAAC addresses to form or drop, duplicates to report (and for SLAAC
// the next identifier), router solicitations. It returns the events.
func (t *wanTable) advance(now int64) []WANEvent {
	sec := uint32(now / 1e9)
	var evs []WANEvent
	ev := func(e *wanEntry, retry bool) { evs = append(evs, WANEvent{WANAddr: e.listing(), Retry: retry}) }
	for i := range t.e {
		e := &t.e[i]
		if !e.used {
			continue
		}
		switch e.origin {
		case OriginSLAAC:
			switch {
			case sec >= e.valid:
				evs = removed(evs, e)
				*e = wanEntry{}
				continue
			case !t.slaac:
				evs = removed(evs, e)
				e.unform()
				continue
			case !e.formed:
				t.form(e, 0)
				ev(e, false)
			}
		case OriginDHCPv6:
			if sec >= e.valid {
				evs = removed(evs, e)
				*e = wanEntry{}
				continue
			}
		}
		switch e.state {
		case AddrTentative:
			if e.sentNS != 0 && now-e.sentNS >= retransTimer {
				e.state = e.lifetimeState(sec)
				ev(e, false)
			}
		case AddrPreferred, AddrDeprecated:
			if st := e.lifetimeState(sec); st != e.state {
				e.state = st
				ev(e, false)
			}
		case AddrDuplicate:
			if e.reported {
				break
			}
			e.reported = true
			retry := e.origin == OriginSLAAC && e.counter < idgenRetries
			ev(e, retry)
			if retry {
				t.form(e, e.counter+1)
				ev(e, false)
			}
		}
	}
	t.solicitRouters(now)
	return evs
}

// solicitRouters asks for the WAN's router advertisements once the
// link-local address passed DAD: up to maxRS solicitations rsInterval
// apart, until an advertisement comes.
func (t *wanTable) solicitRouters(now int64) {
	if t.raSeen.Load() || t.sendRS || t.rsSent >= maxRS || t.rsSent > 0 && now-t.rsAt < rsInterval {
		return
	}
	for i := range t.e {
		if e := &t.e[i]; e.used && e.origin == OriginLinkLocal && e.state != AddrTentative {
			t.sendRS = true
			t.due.Store(true)
			return
		}
	}
}

// lists are the WAN addresses in use beyond the configured ones (preferred
// ones first, DHCPv6 before SLAAC, then deprecated ones) and the tentative
// ones (the link-local address among them while it is probed).
func (t *wanTable) lists() (use, tent [][16]byte) {
	for _, st := range []AddrState{AddrPreferred, AddrDeprecated} {
		for _, o := range []Origin{OriginDHCPv6, OriginSLAAC} {
			for i := range t.e {
				if e := &t.e[i]; e.used && e.formed && e.origin == o && e.state == st {
					use = append(use, e.addr)
				}
			}
		}
	}
	for i := range t.e {
		if e := &t.e[i]; e.used && e.formed && e.state == AddrTentative {
			tent = append(tent, e.addr)
		}
	}
	return use, tent
}

// set takes SetWANAddressing's settings: SLAAC addresses are dropped when
// their identifiers' inputs change (advance forms new ones), leased
// addresses are added (tentative), updated or removed (a duplicate one
// stays, unused, until its valid lifetime ends or DHCPv6 is turned off,
// so that it shows; leased again after its lease dropped it, it is probed
// again).
func (t *wanTable) set(a *WANAddressing) []WANEvent {
	var evs []WANEvent
	if t.iface != a.NetIface || !slices.Equal(t.secret, a.Secret) {
		for i := range t.e {
			if e := &t.e[i]; e.used && e.origin == OriginSLAAC && e.formed {
				evs = removed(evs, e)
				e.unform()
			}
		}
	}
	t.slaac, t.secret, t.iface, t.event = a.SLAAC, slices.Clone(a.Secret), a.NetIface, a.OnEvent
	leased := a.Leased
	if !a.DHCPv6 {
		leased = nil
	}
	for i := range t.e {
		e := &t.e[i]
		if !e.used || e.origin != OriginDHCPv6 || slices.ContainsFunc(leased, func(l Leased) bool { return l.Addr.As16() == e.addr }) {
			continue
		}
		if a.DHCPv6 && e.state == AddrDuplicate {
			e.listed = false // declined: shown until its valid lifetime ends
			continue
		}
		evs = removed(evs, e)
		*e = wanEntry{}
	}
	for _, l := range leased {
		var e *wanEntry
		for i := range t.e {
			if t.e[i].used && t.e[i].origin == OriginDHCPv6 && t.e[i].addr == l.Addr.As16() {
				e = &t.e[i]
			}
		}
		probe := false
		switch {
		case e == nil:
			if e = t.free(); e == nil {
				continue
			}
			*e = wanEntry{used: true, origin: OriginDHCPv6, formed: true, addr: l.Addr.As16()}
			probe = true
		case !e.listed && e.state == AddrDuplicate:
			probe = true
		}
		e.listed, e.pref, e.valid = true, min(l.Preferred, l.Valid), l.Valid
		if probe {
			t.probe(e)
			evs = append(evs, WANEvent{WANAddr: e.listing()})
		}
	}
	return evs
}

// removed appends e's removal to evs; a duplicate's goes unsaid (it was
// never in use).
func removed(evs []WANEvent, e *wanEntry) []WANEvent {
	if !e.formed || e.state == AddrDuplicate {
		return evs
	}
	w := WANEvent{WANAddr: e.listing()}
	w.State = AddrRemoved
	return append(evs, w)
}

// unform takes a SLAAC entry's address away, keeping its prefix and
// lifetimes (advance forms it again from DAD counter 0).
func (e *wanEntry) unform() {
	*e = wanEntry{used: true, origin: OriginSLAAC, prefix: e.prefix, pref: e.pref, valid: e.valid}
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
