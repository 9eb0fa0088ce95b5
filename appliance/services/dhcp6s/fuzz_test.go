package dhcp6s

import (
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// FuzzAnswer: whatever arrives, the handler does not panic, and what it
// sends is a Reply or Advertise that parses, with the message's
// transaction ID and this server's identifier, answering a client
// message type.
func FuzzAnswer(f *testing.F) {
	cid, sid := dhcpv6.OptClientID(clientDUID), dhcpv6.OptServerID(serverDUID)
	for _, m := range []*dhcpv6.Message{
		msg(dhcpv6.MessageTypeInformationRequest, cid, dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList)),
		msg(dhcpv6.MessageTypeSolicit, cid, &dhcpv6.OptIANA{IaId: iaid}, &dhcpv6.OptIAPD{IaId: iaid}),
		msg(dhcpv6.MessageTypeRequest, cid, sid, &dhcpv6.OptIANA{IaId: iaid}),
		msg(dhcpv6.MessageTypeRelease, cid, sid, &dhcpv6.OptIATA{IaId: iaid}),
		msg(dhcpv6.MessageTypeRebind, cid),
	} {
		f.Add(m.ToBytes())
	}
	f.Add([]byte{12, 0})
	a := newAnswers(serverDUID, []netip.Addr{boxDNS}, []string{"lan"}, time.Hour)
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := dhcpv6.FromBytes(b)
		if err != nil {
			return
		}
		got, why := answer(in, a)
		if got == nil {
			if why == ReasonNone {
				t.Fatalf("no answer and no reason for %v", in)
			}
			return
		}
		if why != ReasonNone {
			t.Fatalf("answered with reason %v", why)
		}
		back, err := dhcpv6.MessageFromBytes(got.ToBytes())
		if err != nil {
			t.Fatalf("the answer %v does not parse: %v", got, err)
		}
		m := in.(*dhcpv6.Message)
		switch {
		case back.MessageType != dhcpv6.MessageTypeReply && back.MessageType != dhcpv6.MessageTypeAdvertise:
			t.Fatalf("answered %v with %v", m.MessageType, back.MessageType)
		case back.MessageType == dhcpv6.MessageTypeAdvertise != (m.MessageType == dhcpv6.MessageTypeSolicit):
			t.Fatalf("answered %v with %v", m.MessageType, back.MessageType)
		case back.TransactionID != m.TransactionID:
			t.Fatalf("transaction ID %v, want %v", back.TransactionID, m.TransactionID)
		case back.Options.ServerID() == nil || !back.Options.ServerID().Equal(serverDUID):
			t.Fatalf("server ID %v, want %v", back.Options.ServerID(), serverDUID)
		}
	})
}
