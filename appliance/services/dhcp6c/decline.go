package dhcp6c

import (
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Woken takes the addresses Decline named.
func (m *machine) Woken(now time.Time) { m.decline(m.c.takeDeclines(), now) }

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

// declineDone ends the DECLINE exchange, answered or given up: the
// declined addresses may come back in later Replies.
func (m *machine) declineDone(now time.Time) {
	m.declined = slices.DeleteFunc(m.declined, func(a netip.Addr) bool { return slices.Contains(m.declining, a) })
	m.declining = nil
	m.bound(now)
}
