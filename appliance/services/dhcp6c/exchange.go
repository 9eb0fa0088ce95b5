package dhcp6c

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"e1kbox/appliance/services/dhcpclient"
)

// requested are the options asked for in the Option Request option: DNS
// servers (23) and the domain search list (24).
var requested = []dhcpv6.OptionCode{dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList}

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
	m.transmit(now)
}

// exchange starts a new exchange of type t in state s: a new transaction
// ID and message, sent now (REQUEST is sent by request, once its server
// and IAs are set).
func (m *machine) exchange(s state, t dhcpv6.MessageType, rt dhcpclient.Retrans, now time.Time) {
	m.setState(s)
	msg, err := dhcpv6.NewMessage()
	if err != nil { // no randomness: try again at the next retransmission
		m.core.Fail(fmt.Errorf("transaction ID: %w", err))
		msg = &dhcpv6.Message{}
	}
	msg.MessageType = t
	msg.AddOption(dhcpv6.OptClientID(m.c.duid))
	if t != dhcpv6.MessageTypeDecline {
		msg.AddOption(dhcpv6.OptRequestedOption(requested...))
		m.addExtras(msg)
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
		return
	}
	m.transmit(now)
}

// addExtras adds the configured user class, vendor class and extra
// options (SOLICIT, REQUEST, RENEW, REBIND).
func (m *machine) addExtras(msg *dhcpv6.Message) {
	cfg := &m.c.cfg
	if len(cfg.UserClass) > 0 {
		msg.AddOption(&dhcpv6.OptUserClass{UserClasses: cfg.UserClass})
	}
	if vc := cfg.VendorClass; vc != nil {
		msg.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: vc.Enterprise, Data: vc.Data})
	}
	for _, o := range cfg.Options {
		msg.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionCode(o.Code), OptionData: o.Value})
	}
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
// retransmission (RFC 8415 section 15).
func (m *machine) transmit(now time.Time) {
	r := m.c.rand() / 10
	if m.tries == 0 && m.msg.MessageType == dhcpv6.MessageTypeSolicit {
		r = max(r, -r) // the first SOLICIT's RAND is positive
	}
	m.cur = m.rt.Next(m.cur, r)
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
	f := dhcpclient.Frame{
		DstMAC: allServersMAC, SrcMAC: m.c.cfg.MAC, SrcIP: m.c.ll, DstIP: allServers,
		SrcPort: clientPort, DstPort: serverPort, Payload: m.msg.ToBytes(),
	}
	if err := m.tr.Write(f.Marshal(), allServersMAC); err != nil {
		m.core.Fail(fmt.Errorf("send %s: %w", m.msg.MessageType, err))
		return
	}
	m.core.CountSent(m.msg.MessageType.String())
}
