package dhcp6c

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// retrans is a message type's retransmission parameters (RFC 8415
// section 7.6): initial and maximum retransmission time, maximum count
// (0: unbounded; RENEW and REBIND end at T2 and expiry instead).
type retrans struct {
	irt, mrt time.Duration
	mrc      int
}

var (
	solicitRT = retrans{irt: time.Second, mrt: 3600 * time.Second}
	requestRT = retrans{irt: time.Second, mrt: 30 * time.Second, mrc: 10}
	renewRT   = retrans{irt: 10 * time.Second, mrt: 600 * time.Second}
	rebindRT  = retrans{irt: 10 * time.Second, mrt: 600 * time.Second}
	// declineRT: DEC_TIMEOUT 1 s, DEC_MAX_RC 4 retransmissions after the
	// first (5 sends), no maximum time of its own.
	declineRT = retrans{irt: time.Second, mrt: time.Hour, mrc: 5}
)

// requested are the options asked for in the Option Request option: DNS
// servers (23) and the domain search list (24).
var requested = []dhcpv6.OptionCode{dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList}

// machine is the state of one Run; only Run's goroutine touches it.
type machine struct {
	c        *Client
	tr       transport
	iaid     [4]byte
	onChange func(old, new *Lease)

	state state
	lease *Lease // the binding (BOUND, RENEWING, REBINDING; REQUESTING after NoBinding)
	hint  *Lease // what SOLICIT asks for again

	// The exchange in progress.
	msg   *dhcpv6.Message // what is (re)transmitted
	rt    retrans
	began time.Time
	next  time.Time // next retransmission
	cur   time.Duration
	tries int

	// SOLICIT: the best Advertise so far and when collecting ends.
	best      *dhcpv6.Message
	collectTo time.Time

	// Declined addresses: taken from no Reply (declined) until their
	// Decline is answered or given up; waiting for the client to be
	// bound (declineQ), or in the DECLINE exchange (declining), to the
	// server declineSID.
	declined, declineQ, declining []netip.Addr
	declineSID                    []byte
}

func newMachine(c *Client, tr transport, onChange func(old, new *Lease)) *machine {
	return &machine{c: c, tr: tr, iaid: c.cfg.iaid(), onChange: onChange}
}

// run is the event loop: one timer for the next deadline, and the frames.
func (m *machine) run(ctx context.Context, frames <-chan received) error {
	m.start(m.c.clock.Now())
	for {
		fire, stop := m.c.clock.Timer(m.wakeAt())
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-fire:
			m.tick(m.c.clock.Now())
		case r := <-frames:
			m.handle(r, m.c.clock.Now())
		case <-m.c.wake:
			m.decline(m.c.takeDeclines(), m.c.clock.Now())
		}
		stop()
	}
}

// start picks the first exchange: REBIND for an unexpired lease from the
// state directory, else SOLICIT (with an expired one as the hint).
func (m *machine) start(now time.Time) {
	if dir := m.c.cfg.StateDir; dir != "" {
		l, err := loadLease(dir, m.c.duid, m.iaid)
		switch {
		case err != nil:
			m.c.setError(fmt.Errorf("lease file: %w", err))
		case l != nil && now.Before(l.Expiry()) && m.asked(l):
			m.hint = l
			m.lease = l
			m.c.setLease(l)
			m.c.log.Info("wan dhcpv6: confirming the kept lease", "prefixes", prefixList(l))
			m.onChange(nil, l.Clone())
			m.exchange(stateRebinding, dhcpv6.MessageTypeRebind, rebindRT, now)
			return
		case l != nil:
			m.hint = l
		}
	}
	m.solicit(now)
}

// asked drops from a kept lease what the client no longer asks for (the
// config changed); it says whether anything is left.
func (m *machine) asked(l *Lease) bool {
	if !m.c.cfg.Address {
		l.Addrs = nil
	}
	if m.c.cfg.NoPrefix {
		l.Prefixes = nil
	}
	return len(l.Prefixes)+len(l.Addrs) > 0
}

// wakeAt is the next deadline of the state, and of the binding's lifetimes.
func (m *machine) wakeAt() time.Time {
	var at time.Time
	switch m.state {
	case stateSoliciting:
		at = m.next
		if m.best != nil {
			at = earliest(at, m.collectTo)
		}
	case stateBound:
		at = m.lease.T1
	case stateRenewing:
		at = earliest(m.next, m.lease.T2)
	default: // requesting, rebinding
		at = m.next
	}
	if m.lease != nil {
		at = earliest(at, m.nextExpiry())
	}
	return at
}

// nextExpiry is when the first valid lifetime of the lease ends.
func (m *machine) nextExpiry() time.Time {
	var e time.Time
	for _, p := range m.lease.Prefixes {
		e = earliest(e, p.Valid)
	}
	for _, a := range m.lease.Addrs {
		e = earliest(e, a.Valid)
	}
	return e
}

// earliest is the earlier of two times, where zero means none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// tick acts on the deadlines that have passed.
func (m *machine) tick(now time.Time) {
	if m.lease != nil && !now.Before(m.nextExpiry()) {
		if m.prune(now) {
			return
		}
	}
	switch {
	case m.state == stateSoliciting && m.best != nil && !now.Before(m.collectTo):
		m.request(m.best, now)
	case m.state == stateBound && !now.Before(m.lease.T1):
		m.exchange(stateRenewing, dhcpv6.MessageTypeRenew, renewRT, now)
	case m.state == stateRenewing && !now.Before(m.lease.T2):
		m.exchange(stateRebinding, dhcpv6.MessageTypeRebind, rebindRT, now)
	case m.state != stateBound && !now.Before(m.next):
		if m.rt.mrc > 0 && m.tries >= m.rt.mrc {
			m.c.log.Info("wan dhcpv6: no reply", "to", m.msg.MessageType, "tries", m.tries)
			if m.state == stateDeclining {
				m.declined = slices.DeleteFunc(m.declined, func(a netip.Addr) bool { return slices.Contains(m.declining, a) })
				m.declining = nil
				m.bound(now)
				return
			}
			m.solicit(now)
			return
		}
		m.transmit(now)
	}
}

// decline stops using the lease's addresses in addrs and declines them
// (Client.Decline): at once when bound, else once bound.
func (m *machine) decline(addrs []netip.Addr, now time.Time) {
	if m.lease == nil {
		return
	}
	old := m.lease
	l := old.Clone()
	l.Addrs = slices.DeleteFunc(l.Addrs, func(a Address) bool { return slices.Contains(addrs, a.Addr) })
	if len(l.Addrs) == len(old.Addrs) {
		return
	}
	for _, a := range old.Addrs {
		if !slices.Contains(l.Addrs, a) {
			m.c.log.Warn("wan dhcpv6: declining an address another node has", "addr", a.Addr)
			m.declined = append(m.declined, a.Addr)
			m.declineQ = append(m.declineQ, a.Addr)
		}
	}
	m.declineSID = old.ServerID
	if len(l.Prefixes)+len(l.Addrs) == 0 {
		l = nil
	}
	m.setLease(l)
	m.hint = l
	m.onChange(old.Clone(), l.Clone())
	if m.state == stateBound || l == nil && m.state != stateDeclining {
		m.startDecline(now) // else once bound (bound)
	}
}

// startDecline sends a DECLINE for the queued addresses, if any.
func (m *machine) startDecline(now time.Time) {
	if len(m.declineQ) == 0 {
		return
	}
	m.declining, m.declineQ = m.declineQ, nil
	m.exchange(stateDeclining, dhcpv6.MessageTypeDecline, declineRT, now)
}

// bound is the state after an exchange that leaves the binding as it is:
// bound, or (with no binding left) SOLICIT; queued declines go first.
func (m *machine) bound(now time.Time) {
	m.msg = nil
	if m.lease == nil {
		if len(m.declineQ) > 0 {
			m.startDecline(now)
			return
		}
		m.solicit(now)
		return
	}
	m.setState(stateBound)
	m.startDecline(now)
}

// prune drops the prefixes and addresses whose valid lifetime has ended;
// when none is left the binding ends and SOLICIT begins (true).
func (m *machine) prune(now time.Time) bool {
	old := m.lease
	l := old.Clone()
	l.Prefixes = slices.DeleteFunc(l.Prefixes, func(p Prefix) bool { return !now.Before(p.Valid) })
	l.Addrs = slices.DeleteFunc(l.Addrs, func(a Address) bool { return !now.Before(a.Valid) })
	if len(l.Prefixes)+len(l.Addrs) == 0 {
		m.c.log.Info("wan dhcpv6: binding expired", "prefixes", prefixList(old))
		m.setLease(nil)
		m.hint = old
		m.onChange(old.Clone(), nil)
		m.solicit(now)
		return true
	}
	m.setLease(l)
	m.onChange(old.Clone(), l.Clone())
	return false
}

func (m *machine) setLease(l *Lease) {
	m.lease = l
	m.c.setLease(l)
	if dir := m.c.cfg.StateDir; dir != "" {
		if err := saveLease(dir, m.c.duid, m.iaid, l); err != nil {
			m.c.setError(err)
		}
	}
}

func (m *machine) setState(s state) {
	m.state = s
	m.c.setState(s)
}

// solicit starts a SOLICIT exchange.
func (m *machine) solicit(now time.Time) {
	m.best = nil
	m.exchange(stateSoliciting, dhcpv6.MessageTypeSolicit, solicitRT, now)
}

// request starts a REQUEST exchange for what adv offered.
func (m *machine) request(adv *dhcpv6.Message, now time.Time) {
	m.best = nil
	m.exchange(stateRequesting, dhcpv6.MessageTypeRequest, requestRT, now)
	m.msg.AddOption(dhcpv6.OptServerID(adv.Options.ServerID()))
	ps, as, _, _ := offered(adv, m.iaid, now)
	m.setIAs(ps, as)
	m.send()
}

// exchange starts a new exchange of type t in state s: a new transaction
// ID and message, sent now (REQUEST sends itself once its IAs are set).
func (m *machine) exchange(s state, t dhcpv6.MessageType, rt retrans, now time.Time) {
	m.setState(s)
	msg, err := dhcpv6.NewMessage()
	if err != nil { // no randomness: try again at the next retransmission
		m.c.setError(fmt.Errorf("transaction ID: %w", err))
		msg = &dhcpv6.Message{}
	}
	msg.MessageType = t
	msg.AddOption(dhcpv6.OptClientID(m.c.duid))
	if t != dhcpv6.MessageTypeDecline {
		msg.AddOption(dhcpv6.OptRequestedOption(requested...))
	}
	m.msg, m.rt, m.began, m.tries, m.cur = msg, rt, now, 0, 0
	switch t {
	case dhcpv6.MessageTypeDecline:
		// The declined addresses in our IA_NA, lifetimes 0, to the
		// server that leased them (RFC 8415 18.2.8).
		msg.AddOption(dhcpv6.OptServerID(mustDUID(m.declineSID)))
		na := &dhcpv6.OptIANA{IaId: m.iaid}
		for _, a := range m.declining {
			b := a.As16()
			na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: b[:]})
		}
		msg.AddOption(na)
	case dhcpv6.MessageTypeSolicit:
		m.setIAs(m.hints())
	case dhcpv6.MessageTypeRenew:
		msg.AddOption(dhcpv6.OptServerID(mustDUID(m.lease.ServerID)))
		m.setIAs(m.lease.Prefixes, m.lease.Addrs)
	case dhcpv6.MessageTypeRebind:
		m.setIAs(m.lease.Prefixes, m.lease.Addrs)
	case dhcpv6.MessageTypeRequest:
		m.next = now
		return
	}
	m.transmit(now)
}

// hints are the prefixes and addresses SOLICIT asks for: the last
// binding's, or a prefix of the configured length.
func (m *machine) hints() ([]Prefix, []Address) {
	if m.hint != nil {
		return m.hint.Prefixes, m.hint.Addrs
	}
	if n := m.c.cfg.PrefixLength; n != 0 {
		return []Prefix{{Prefix: netip.PrefixFrom(netip.IPv6Unspecified(), n)}}, nil
	}
	return nil, nil
}

// setIAs puts the IA_PD and IA_NA options (as configured) into the message,
// holding ps and as with lifetimes 0 (RFC 8415 18.2: the server decides).
func (m *machine) setIAs(ps []Prefix, as []Address) {
	if !m.c.cfg.NoPrefix {
		pd := &dhcpv6.OptIAPD{IaId: m.iaid}
		for _, p := range ps {
			a := p.Prefix.Addr().As16()
			pd.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: a[:], Mask: net.CIDRMask(p.Prefix.Bits(), 128)}})
		}
		m.msg.UpdateOption(pd)
	}
	if m.c.cfg.Address {
		na := &dhcpv6.OptIANA{IaId: m.iaid}
		for _, a := range as {
			b := a.Addr.As16()
			na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: b[:]})
		}
		m.msg.UpdateOption(na)
	}
}

func mustDUID(b []byte) dhcpv6.DUID {
	d, err := dhcpv6.DUIDFromBytes(b)
	if err != nil {
		return &dhcpv6.DUIDOpaque{Data: b}
	}
	return d
}

// transmit sends the exchange's message (again) and schedules the next
// retransmission: RT = 2×RTprev + RAND×RTprev up to MRT (RFC 8415 15).
func (m *machine) transmit(now time.Time) {
	r := m.c.rand() / 10
	switch {
	case m.tries == 0:
		if m.msg.MessageType == dhcpv6.MessageTypeSolicit {
			r = max(r, -r) // the first SOLICIT's RAND is positive
		}
		m.cur = m.rt.irt + time.Duration(r*float64(m.rt.irt))
	default:
		m.cur = 2*m.cur + time.Duration(r*float64(m.cur))
		if m.cur > m.rt.mrt {
			m.cur = m.rt.mrt + time.Duration(r*float64(m.rt.mrt))
		}
	}
	if m.tries == 0 && m.state == stateSoliciting {
		m.collectTo = now.Add(m.cur)
	}
	m.tries++
	m.next = now.Add(m.cur)
	m.msg.UpdateOption(dhcpv6.OptElapsedTime(min(now.Sub(m.began), 0xffff*10*time.Millisecond)))
	m.send()
}

// send writes the message to ff02::1:2.
func (m *machine) send() {
	f := udp6Frame{
		DstMAC: allServersMAC, SrcMAC: m.c.cfg.MAC, SrcIP: m.c.ll, DstIP: allServers,
		SrcPort: clientPort, DstPort: serverPort, Payload: m.msg.ToBytes(),
	}
	if err := m.tr.Write(f.marshal(), allServersMAC); err != nil {
		m.c.setError(fmt.Errorf("send %s: %w", m.msg.MessageType, err))
		return
	}
	m.c.count(m.c.stats.sent, m.msg.MessageType)
}

// handle takes a message from a server.
func (m *machine) handle(r received, now time.Time) {
	msg, err := dhcpv6.MessageFromBytes(r.Payload)
	if err != nil {
		m.c.ignore(dropBadDHCP)
		return
	}
	if m.msg == nil || msg.TransactionID != m.msg.TransactionID {
		m.c.ignore(dropWrongXID)
		return
	}
	if cid := msg.Options.ClientID(); cid == nil || !bytes.Equal(cid.ToBytes(), m.c.duid.ToBytes()) {
		m.c.ignore(dropWrongClient)
		return
	}
	m.c.count(m.c.stats.received, msg.MessageType)
	sid := msg.Options.ServerID()
	if sid == nil {
		m.c.ignore(dropNoServerID)
		return
	}
	switch {
	case m.state == stateSoliciting && msg.MessageType == dhcpv6.MessageTypeAdvertise:
		m.advertised(msg, now)
	case m.state == stateRequesting && msg.MessageType == dhcpv6.MessageTypeReply,
		m.state == stateRenewing && msg.MessageType == dhcpv6.MessageTypeReply:
		if want := m.msg.Options.ServerID(); want != nil && !want.Equal(sid) {
			m.c.ignore(dropWrongServer)
			return
		}
		m.replied(msg, r, now)
	case m.state == stateRebinding && msg.MessageType == dhcpv6.MessageTypeReply:
		m.replied(msg, r, now)
	case m.state == stateDeclining && msg.MessageType == dhcpv6.MessageTypeReply:
		if want := m.msg.Options.ServerID(); want != nil && !want.Equal(sid) {
			m.c.ignore(dropWrongServer)
			return
		}
		// Done, whatever its status says (RFC 8415 18.2.10.1).
		m.c.log.Info("wan dhcpv6: declined", "addrs", m.declining, "status", msg.Options.Status())
		m.declined = slices.DeleteFunc(m.declined, func(a netip.Addr) bool { return slices.Contains(m.declining, a) })
		m.declining = nil
		m.bound(now)
	default:
		m.c.ignore(dropUnexpected)
	}
}

// advertised keeps the best Advertise: the one with the highest
// preference, the first among equals; preference 255 is taken at once.
func (m *machine) advertised(msg *dhcpv6.Message, now time.Time) {
	ps, as, _, _ := offered(msg, m.iaid, now)
	if !statusOK(msg, ps) {
		m.c.ignore(dropNothingOffered)
		return
	}
	if len(ps)+len(as) == 0 {
		m.c.ignore(dropNothingOffered)
		return
	}
	if m.best == nil || msg.Options.Preference() > m.best.Options.Preference() {
		m.best = msg
	}
	if msg.Options.Preference() == 255 {
		m.request(msg, now)
	}
}

// statusOK says whether msg's top-level status lets the client take what
// it offers: success, or NoAddrsAvail with prefixes (a server that has no
// address for the IA_NA does not cost the delegation; some put that
// status at the top rather than in the IA_NA).
func statusOK(msg *dhcpv6.Message, ps []Prefix) bool {
	st := msg.Options.Status()
	return st == nil || st.StatusCode == iana.StatusSuccess || st.StatusCode == iana.StatusNoAddrsAvail && len(ps) > 0
}

// replied takes a Reply to REQUEST, RENEW or REBIND.
func (m *machine) replied(msg *dhcpv6.Message, r received, now time.Time) {
	ps, as, _, nb := offered(msg, m.iaid, m.began)
	if st := msg.Options.Status(); !statusOK(msg, ps) {
		// UnspecFail, UseMulticast, NotOnLink…: keep retransmitting, or
		// start over after a failed REQUEST.
		m.c.log.Info("wan dhcpv6: reply with status", "status", st.StatusCode, "msg", st.StatusMessage)
		if m.state == stateRequesting {
			m.solicit(now)
		}
		return
	}
	if m.state != stateRequesting && m.lease != nil && (nb.pd && len(m.lease.Prefixes) > 0 || nb.na && len(m.lease.Addrs) > 0) {
		// The server lost the binding: ask for it again (18.2.10.1). An
		// IA_NA asked for without an address may well have none (RFC 8415
		// 18.3.4 lets the server say NoBinding then): not a lost binding.
		m.c.log.Info("wan dhcpv6: server has no binding", "state", m.state)
		m.hint = m.lease
		m.solicit(now)
		return
	}
	l := merge(m.lease, msg, m.iaid, m.began, now)
	l.Addrs = slices.DeleteFunc(l.Addrs, func(a Address) bool { return slices.Contains(m.declined, a.Addr) })
	if len(l.Prefixes)+len(l.Addrs) == 0 {
		m.c.log.Info("wan dhcpv6: reply binds nothing", "prefixes", len(ps), "addrs", len(as))
		m.hint = m.lease
		m.solicit(now)
		return
	}
	l.Server = r.SrcIP
	l.ServerMAC = r.SrcMAC
	old := m.lease
	m.setLease(l)
	m.hint = l
	m.setState(stateBound)
	m.msg = nil
	if !sameBinding(old, l) {
		m.c.log.Info("wan dhcpv6: bound", "prefixes", prefixList(l), "addrs", len(l.Addrs), "t1", l.T1.Sub(now).Round(time.Second))
		m.onChange(old.Clone(), l.Clone())
	}
	m.startDecline(now) // what was declined during the exchange
}

func prefixList(l *Lease) []string {
	var s []string
	for _, p := range l.Prefixes {
		s = append(s, p.Prefix.String())
	}
	return s
}
