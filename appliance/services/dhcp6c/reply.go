package dhcp6c

import (
	"bytes"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

// Reasons a message is dropped, as counted in Stats.Ignored, besides the
// frame's (dhcpclient.Drop…).
const (
	dropBadDHCP        = "bad_dhcp"        // the payload is no DHCPv6 message
	dropWrongXID       = "wrong_xid"       // no exchange of ours has this transaction ID
	dropWrongClient    = "wrong_client"    // the client ID is not ours
	dropUnexpected     = "unexpected_type" // a message type the state does not take
	dropNoServerID     = "no_server_id"    // an Advertise or Reply without a server ID
	dropWrongServer    = "wrong_server"    // a Reply from a server other than the one asked
	dropNothingOffered = "nothing_offered" // an Advertise with neither prefix nor address
)

// Handle takes a message from a server.
func (m *machine) Handle(r dhcpclient.Frame, now time.Time) {
	msg, err := dhcpv6.MessageFromBytes(r.Payload)
	if err != nil {
		m.core.Ignore(dropBadDHCP)
		return
	}
	if m.msg == nil || msg.TransactionID != m.msg.TransactionID {
		m.core.Ignore(dropWrongXID)
		return
	}
	if cid := msg.Options.ClientID(); cid == nil || !bytes.Equal(cid.ToBytes(), m.c.duid.ToBytes()) {
		m.core.Ignore(dropWrongClient)
		return
	}
	m.core.CountReceived(msg.MessageType.String())
	sid := msg.Options.ServerID()
	if sid == nil {
		m.core.Ignore(dropNoServerID)
		return
	}
	switch {
	case m.state == stateSoliciting && msg.MessageType == dhcpv6.MessageTypeAdvertise:
		m.advertised(msg, now)
	case m.state == stateRequesting && msg.MessageType == dhcpv6.MessageTypeReply,
		m.state == stateRenewing && msg.MessageType == dhcpv6.MessageTypeReply:
		if want := m.msg.Options.ServerID(); want != nil && !want.Equal(sid) {
			m.core.Ignore(dropWrongServer)
			return
		}
		m.replied(msg, r, now)
	case m.state == stateRebinding && msg.MessageType == dhcpv6.MessageTypeReply:
		m.replied(msg, r, now)
	case m.state == stateDeclining && msg.MessageType == dhcpv6.MessageTypeReply:
		if want := m.msg.Options.ServerID(); want != nil && !want.Equal(sid) {
			m.core.Ignore(dropWrongServer)
			return
		}
		// Done, whatever its status says (RFC 8415 18.2.10.1).
		m.c.log.Info("wan dhcpv6: declined", "addrs", m.declining, "status", msg.Options.Status())
		m.declineDone(now)
	default:
		m.core.Ignore(dropUnexpected)
	}
}

// advertised keeps the best Advertise: the one with the highest
// preference, the first among equals; preference 255 is taken at once.
func (m *machine) advertised(msg *dhcpv6.Message, now time.Time) {
	ps, as, _, _ := offered(msg, m.iaid, now)
	if !statusOK(msg, ps) {
		m.core.Ignore(dropNothingOffered)
		return
	}
	if len(ps)+len(as) == 0 {
		m.core.Ignore(dropNothingOffered)
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
func (m *machine) replied(msg *dhcpv6.Message, r dhcpclient.Frame, now time.Time) {
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
