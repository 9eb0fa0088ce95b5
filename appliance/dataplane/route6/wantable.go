package route6

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// The WAN addresses' table: SLAAC prefixes and the addresses formed in
// them, the DHCPv6 leases and the link-local address, each with its DAD
// state and lifetimes; advance runs their timers and set takes new
// settings. The router's methods (wanaddr.go) lock it.

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
