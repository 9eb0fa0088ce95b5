package dhcp6c

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"e1kbox/appliance/services/dhcpclient"
)

// state is the client's state in RFC 8415's exchanges.
type state int

const (
	stateStopped state = iota
	stateSoliciting
	stateRequesting
	stateBound
	stateRenewing
	stateRebinding
	stateDeclining
)

var stateNames = [...]string{dhcpclient.StateStopped, "soliciting", "requesting", "bound", "renewing", "rebinding", "declining"}

func (s state) String() string { return stateNames[s] }

// The retransmission parameters of the message types (RFC 8415 section
// 7.6); RENEW and REBIND have no count, they end at T2 and expiry.
var (
	solicitRT = dhcpclient.Retrans{IRT: time.Second, MRT: 3600 * time.Second}
	requestRT = dhcpclient.Retrans{IRT: time.Second, MRT: 30 * time.Second, MRC: 10}
	renewRT   = dhcpclient.Retrans{IRT: 10 * time.Second, MRT: 600 * time.Second}
	rebindRT  = dhcpclient.Retrans{IRT: 10 * time.Second, MRT: 600 * time.Second}
	// declineRT: DEC_TIMEOUT 1 s, DEC_MAX_RC 4 retransmissions after the
	// first (5 sends), no maximum time of its own.
	declineRT = dhcpclient.Retrans{IRT: time.Second, MRT: time.Hour, MRC: 5}
)

// machine is the state of one Run; only Run's goroutine touches it.
type machine struct {
	c        *Client
	core     *dhcpclient.Core[*Lease, dhcpclient.Frame]
	tr       dhcpclient.Transport
	iaid     [4]byte
	onChange func(old, new *Lease)

	state state
	lease *Lease // the binding (BOUND, RENEWING, REBINDING; REQUESTING after NoBinding)
	hint  *Lease // what SOLICIT asks for again

	// The exchange in progress.
	msg   *dhcpv6.Message // what is (re)transmitted
	rt    dhcpclient.Retrans
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

func newMachine(c *Client, tr dhcpclient.Transport, onChange func(old, new *Lease)) *machine {
	return &machine{c: c, core: c.core, tr: tr, iaid: c.cfg.iaid(), onChange: onChange}
}

// Start picks the first exchange: REBIND for an unexpired lease from the
// state directory, else SOLICIT (with an expired one as the hint).
func (m *machine) Start(now time.Time) {
	if dir := m.c.cfg.StateDir; dir != "" {
		l, err := loadLease(dir, m.c.duid, m.iaid)
		switch {
		case err != nil:
			m.core.Fail(fmt.Errorf("lease file: %w", err))
		case l != nil && !m.c.cfg.SolicitKept && now.Before(l.Expiry()) && m.asked(l):
			m.hint = l
			m.lease = l
			m.core.SetLease(l)
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

// WakeAt is the next deadline of the state, and of the binding's lifetimes.
func (m *machine) WakeAt() time.Time {
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

// Tick acts on the deadlines that have passed.
func (m *machine) Tick(now time.Time) {
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
		if m.rt.Exhausted(m.tries) {
			m.c.log.Info("wan dhcpv6: no reply", "to", m.msg.MessageType, "tries", m.tries)
			if m.state == stateDeclining {
				m.declineDone(now)
				return
			}
			m.solicit(now)
			return
		}
		m.transmit(now)
	}
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
	m.core.SetLease(l)
	if dir := m.c.cfg.StateDir; dir != "" {
		if err := saveLease(dir, m.c.duid, m.iaid, l); err != nil {
			m.core.Fail(err)
		}
	}
}

func (m *machine) setState(s state) {
	m.state = s
	m.core.SetState(s.String())
}
