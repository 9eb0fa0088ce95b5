package dhcp6s

import (
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

// Reason is why a message got no answer.
type Reason uint8

// The reasons (Stats.Dropped's keys are their names).
const (
	ReasonNone        Reason = iota
	ReasonRateClient         // the client's bucket is empty
	ReasonRateAll            // the bucket of all clients is empty
	ReasonMalformed          // not a DHCPv6 message
	ReasonRelayed            // a Relay-forward: the server is on-link only
	ReasonNotClient          // a server's or relay's message type (Advertise, Reply, ...)
	ReasonUnknownType        // a message type this server does not know
	ReasonNoClientID         // a Client Identifier is required and missing
	ReasonServerID           // a Server Identifier where none may be (Solicit, Confirm, Rebind) or none where one must be
	ReasonOtherServer        // it names another server
	ReasonHasIA              // an Information-request with an IA option
	ReasonNoReply            // Confirm, Rebind: no bindings, so no reply (RFC 8415 18.3.3, 18.3.5)
	ReasonSend               // the answer could not be sent
	numReasons
)

var reasonNames = [numReasons]string{"", "rate_client", "rate_all", "malformed", "relayed", "not_client",
	"unknown_type", "no_client_id", "server_id", "other_server", "has_ia", "no_reply", "send"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// noAddrs is the status message of the NoAddrsAvail and NoPrefixAvail
// answers: the LAN's addresses come from SLAAC.
const noAddrs = "no addresses or prefixes by DHCPv6 here: addresses come from SLAAC"

// answer is the server's answer to msg, or nil and why there is none. It
// reads only a; it is safe for concurrent use.
func answer(msg dhcpv6.DHCPv6, a *answers) (*dhcpv6.Message, Reason) {
	if msg.IsRelay() {
		return nil, ReasonRelayed
	}
	m, ok := msg.(*dhcpv6.Message)
	if !ok {
		return nil, ReasonMalformed
	}
	cid, sid := m.Options.ClientID(), m.Options.ServerID()
	switch m.MessageType {
	case dhcpv6.MessageTypeAdvertise, dhcpv6.MessageTypeReply, dhcpv6.MessageTypeReconfigure,
		dhcpv6.MessageTypeRelayReply, dhcpv6.MessageTypeLeaseQueryReply, dhcpv6.MessageTypeLeaseQueryDone,
		dhcpv6.MessageTypeLeaseQueryData, dhcpv6.MessageTypeDHCPv4Response, dhcpv6.MessageTypeAddrRegReply:
		return nil, ReasonNotClient
	case dhcpv6.MessageTypeInformationRequest:
		// RFC 8415 16.12.
		if sid != nil && !sid.Equal(a.duid) {
			return nil, ReasonOtherServer
		}
		if hasIA(m) {
			return nil, ReasonHasIA
		}
		return a.inform(m), ReasonNone
	case dhcpv6.MessageTypeSolicit:
		// RFC 8415 16.2.
		if cid == nil {
			return nil, ReasonNoClientID
		}
		if sid != nil {
			return nil, ReasonServerID
		}
		return a.advertise(m), ReasonNone
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		// RFC 8415 16.4, 16.6, 16.9, 16.10: a Client Identifier and this
		// server's identifier.
		if cid == nil {
			return nil, ReasonNoClientID
		}
		if sid == nil {
			return nil, ReasonServerID
		}
		if !sid.Equal(a.duid) {
			return nil, ReasonOtherServer
		}
		return a.noBinding(m), ReasonNone
	case dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRebind:
		if sid != nil {
			return nil, ReasonServerID // RFC 8415 16.5, 16.7
		}
		return nil, ReasonNoReply
	}
	return nil, ReasonUnknownType
}

func hasIA(m *dhcpv6.Message) bool {
	return len(m.Options.IANA()) > 0 || len(m.Options.IATA()) > 0 || len(m.Options.IAPD()) > 0
}

// reply starts an answer of type t to m: the transaction ID, this
// server's identifier and the client's, when it sent one.
func (a *answers) reply(t dhcpv6.MessageType, m *dhcpv6.Message) *dhcpv6.Message {
	r := &dhcpv6.Message{MessageType: t, TransactionID: m.TransactionID}
	r.AddOption(dhcpv6.OptServerID(a.duid))
	if cid := m.GetOneOption(dhcpv6.OptionClientID); cid != nil {
		r.AddOption(cid)
	}
	return r
}

// inform answers an Information-request (RFC 8415 18.3.6): the DNS
// servers and domains configured, and the refresh time.
func (a *answers) inform(m *dhcpv6.Message) *dhcpv6.Message {
	r := a.reply(dhcpv6.MessageTypeReply, m)
	if len(a.dns) > 0 {
		r.AddOption(dhcpv6.OptDNS(a.dns...))
	}
	if len(a.domains) > 0 {
		r.AddOption(dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: a.domains}))
	}
	r.AddOption(dhcpv6.OptInformationRefreshTime(a.irt))
	return r
}

// advertise answers a Solicit (RFC 8415 18.3.1): no addresses, no
// prefixes.
func (a *answers) advertise(m *dhcpv6.Message) *dhcpv6.Message {
	r := a.reply(dhcpv6.MessageTypeAdvertise, m)
	pds := m.Options.IAPD()
	if len(pds) == 0 || len(m.Options.IANA()) > 0 || len(m.Options.IATA()) > 0 {
		r.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: noAddrs})
	}
	for _, pd := range pds {
		r.AddOption(&dhcpv6.OptIAPD{IaId: pd.IaId, Options: dhcpv6.PDOptions{Options: dhcpv6.Options{
			&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoPrefixAvail, StatusMessage: noAddrs}}}})
	}
	return r
}

// noBinding answers a Request, Renew, Release or Decline that names this
// server: each IA comes back empty with NoAddrsAvail or NoPrefixAvail
// (Request, 18.3.2) or NoBinding (Renew 18.3.4, Release 18.3.7, Decline
// 18.3.8, which also carry a top-level Success).
func (a *answers) noBinding(m *dhcpv6.Message) *dhcpv6.Message {
	r := a.reply(dhcpv6.MessageTypeReply, m)
	addrs, prefixes := iana.StatusNoBinding, iana.StatusNoBinding
	switch m.MessageType {
	case dhcpv6.MessageTypeRequest:
		addrs, prefixes = iana.StatusNoAddrsAvail, iana.StatusNoPrefixAvail
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		r.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
	}
	status := func(c iana.StatusCode) dhcpv6.Options {
		return dhcpv6.Options{&dhcpv6.OptStatusCode{StatusCode: c, StatusMessage: noAddrs}}
	}
	for _, ia := range m.Options.IANA() {
		r.AddOption(&dhcpv6.OptIANA{IaId: ia.IaId, Options: dhcpv6.IdentityOptions{Options: status(addrs)}})
	}
	for _, ia := range m.Options.IATA() {
		r.AddOption(&dhcpv6.OptIATA{IaId: ia.IaId, Options: dhcpv6.IdentityOptions{Options: status(addrs)}})
	}
	for _, pd := range m.Options.IAPD() {
		r.AddOption(&dhcpv6.OptIAPD{IaId: pd.IaId, Options: dhcpv6.PDOptions{Options: status(prefixes)}})
	}
	return r
}
