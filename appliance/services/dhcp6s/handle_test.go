package dhcp6s

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

var (
	serverDUID = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	otherDUID  = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
	clientDUID = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	boxDNS     = netip.MustParseAddr("2001:db8:1::1")
	xid        = dhcpv6.TransactionID{1, 2, 3}
	iaid       = [4]byte{0, 0, 0, 7}
)

// msg builds a client message of type t with opts.
func msg(t dhcpv6.MessageType, opts ...dhcpv6.Option) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: t, TransactionID: xid}
	for _, o := range opts {
		m.AddOption(o)
	}
	return m
}

// view is a message as the tests compare it: its type, transaction ID and
// options, each printed by the library.
type view struct {
	Type    string
	XID     dhcpv6.TransactionID
	Options []string
}

func viewOf(m *dhcpv6.Message) view {
	v := view{Type: m.MessageType.String(), XID: m.TransactionID}
	for _, o := range m.Options.Options {
		v.Options = append(v.Options, o.String())
	}
	return v
}

func strs(opts ...dhcpv6.Option) []string {
	var s []string
	for _, o := range opts {
		s = append(s, o.String())
	}
	return s
}

func status(c iana.StatusCode) *dhcpv6.OptStatusCode {
	return &dhcpv6.OptStatusCode{StatusCode: c, StatusMessage: noAddrs}
}

// TestAnswer: what each client message gets, as RFC 8415 sections 16 and
// 18.3 say for a server without addresses or prefixes to give.
func TestAnswer(t *testing.T) {
	a := newAnswers(serverDUID, []netip.Addr{boxDNS}, []string{"lan"}, 1800*time.Second)
	sid, cid := dhcpv6.OptServerID(serverDUID), dhcpv6.OptClientID(clientDUID)
	ianaOpt := &dhcpv6.OptIANA{IaId: iaid}
	iapd := &dhcpv6.OptIAPD{IaId: iaid}
	dns := dhcpv6.OptDNS(boxDNS.AsSlice())
	dsl := dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: []string{"lan"}})
	irt := dhcpv6.OptInformationRefreshTime(1800 * time.Second)
	emptyNA := func(c iana.StatusCode) dhcpv6.Option {
		return &dhcpv6.OptIANA{IaId: iaid, Options: dhcpv6.IdentityOptions{Options: dhcpv6.Options{status(c)}}}
	}
	emptyPD := func(c iana.StatusCode) dhcpv6.Option {
		return &dhcpv6.OptIAPD{IaId: iaid, Options: dhcpv6.PDOptions{Options: dhcpv6.Options{status(c)}}}
	}
	for _, tc := range []struct {
		name string
		in   dhcpv6.DHCPv6
		want []string // the answer's options; nil: no answer
		typ  dhcpv6.MessageType
		why  Reason
	}{
		{"information-request", msg(dhcpv6.MessageTypeInformationRequest, cid, dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer)),
			strs(sid, cid, dns, dsl, irt), dhcpv6.MessageTypeReply, ReasonNone},
		{"information-request without a client id", msg(dhcpv6.MessageTypeInformationRequest),
			strs(sid, dns, dsl, irt), dhcpv6.MessageTypeReply, ReasonNone},
		{"information-request naming this server", msg(dhcpv6.MessageTypeInformationRequest, cid, sid),
			strs(sid, cid, dns, dsl, irt), dhcpv6.MessageTypeReply, ReasonNone},
		{"information-request naming another server", msg(dhcpv6.MessageTypeInformationRequest, cid, dhcpv6.OptServerID(otherDUID)),
			nil, 0, ReasonOtherServer},
		{"information-request with an IA_NA", msg(dhcpv6.MessageTypeInformationRequest, cid, ianaOpt), nil, 0, ReasonHasIA},
		{"information-request with an IA_PD", msg(dhcpv6.MessageTypeInformationRequest, cid, iapd), nil, 0, ReasonHasIA},
		{"solicit for an address", msg(dhcpv6.MessageTypeSolicit, cid, ianaOpt),
			strs(sid, cid, status(iana.StatusNoAddrsAvail)), dhcpv6.MessageTypeAdvertise, ReasonNone},
		{"solicit for a prefix", msg(dhcpv6.MessageTypeSolicit, cid, iapd),
			strs(sid, cid, emptyPD(iana.StatusNoPrefixAvail)), dhcpv6.MessageTypeAdvertise, ReasonNone},
		{"solicit for both", msg(dhcpv6.MessageTypeSolicit, cid, ianaOpt, iapd),
			strs(sid, cid, status(iana.StatusNoAddrsAvail), emptyPD(iana.StatusNoPrefixAvail)), dhcpv6.MessageTypeAdvertise, ReasonNone},
		{"solicit with rapid commit", msg(dhcpv6.MessageTypeSolicit, cid, ianaOpt, &dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionRapidCommit}),
			strs(sid, cid, status(iana.StatusNoAddrsAvail)), dhcpv6.MessageTypeAdvertise, ReasonNone},
		{"solicit without a client id", msg(dhcpv6.MessageTypeSolicit, ianaOpt), nil, 0, ReasonNoClientID},
		{"solicit with a server id", msg(dhcpv6.MessageTypeSolicit, cid, sid, ianaOpt), nil, 0, ReasonServerID},
		{"request", msg(dhcpv6.MessageTypeRequest, cid, sid, ianaOpt, iapd),
			strs(sid, cid, emptyNA(iana.StatusNoAddrsAvail), emptyPD(iana.StatusNoPrefixAvail)), dhcpv6.MessageTypeReply, ReasonNone},
		{"request to another server", msg(dhcpv6.MessageTypeRequest, cid, dhcpv6.OptServerID(otherDUID), ianaOpt), nil, 0, ReasonOtherServer},
		{"request without a server id", msg(dhcpv6.MessageTypeRequest, cid, ianaOpt), nil, 0, ReasonServerID},
		{"request without a client id", msg(dhcpv6.MessageTypeRequest, sid, ianaOpt), nil, 0, ReasonNoClientID},
		{"renew", msg(dhcpv6.MessageTypeRenew, cid, sid, ianaOpt, iapd),
			strs(sid, cid, emptyNA(iana.StatusNoBinding), emptyPD(iana.StatusNoBinding)), dhcpv6.MessageTypeReply, ReasonNone},
		{"release", msg(dhcpv6.MessageTypeRelease, cid, sid, ianaOpt),
			strs(sid, cid, &dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess}, emptyNA(iana.StatusNoBinding)), dhcpv6.MessageTypeReply, ReasonNone},
		{"decline", msg(dhcpv6.MessageTypeDecline, cid, sid, ianaOpt),
			strs(sid, cid, &dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess}, emptyNA(iana.StatusNoBinding)), dhcpv6.MessageTypeReply, ReasonNone},
		{"rebind", msg(dhcpv6.MessageTypeRebind, cid, ianaOpt), nil, 0, ReasonNoReply},
		{"confirm", msg(dhcpv6.MessageTypeConfirm, cid, ianaOpt), nil, 0, ReasonNoReply},
		{"confirm with a server id", msg(dhcpv6.MessageTypeConfirm, cid, sid, ianaOpt), nil, 0, ReasonServerID},
		{"advertise", msg(dhcpv6.MessageTypeAdvertise, cid, sid), nil, 0, ReasonNotClient},
		{"reply", msg(dhcpv6.MessageTypeReply, cid, sid), nil, 0, ReasonNotClient},
		{"relay-forward", &dhcpv6.RelayMessage{MessageType: dhcpv6.MessageTypeRelayForward,
			LinkAddr: net.ParseIP("2001:db8::1"), PeerAddr: net.ParseIP("fe80::1"),
			Options: dhcpv6.RelayOptions{Options: dhcpv6.Options{dhcpv6.OptRelayMessage(msg(dhcpv6.MessageTypeInformationRequest))}}},
			nil, 0, ReasonRelayed},
		{"leasequery", msg(dhcpv6.MessageTypeLeaseQuery, cid), nil, 0, ReasonUnknownType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through the wire both ways, as the server sees and sends it.
			in, err := dhcpv6.FromBytes(tc.in.ToBytes())
			if err != nil {
				t.Fatal(err)
			}
			got, why := answer(in, a)
			if why != tc.why {
				t.Errorf("reason %v, want %v", why, tc.why)
			}
			if tc.want == nil {
				if got != nil {
					t.Errorf("answered %v, want no answer", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no answer (%v), want %v", why, tc.want)
			}
			back, err := dhcpv6.MessageFromBytes(got.ToBytes())
			if err != nil {
				t.Fatalf("the answer does not parse: %v", err)
			}
			want := view{Type: tc.typ.String(), XID: xid, Options: tc.want}
			if diff := cmp.Diff(want, viewOf(back)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnswerWithoutDNS: with nothing configured an Information-request
// still gets the identifiers and the refresh time.
func TestAnswerWithoutDNS(t *testing.T) {
	a := newAnswers(serverDUID, nil, nil, 600*time.Second)
	got, why := answer(msg(dhcpv6.MessageTypeInformationRequest, dhcpv6.OptClientID(clientDUID)), a)
	if got == nil {
		t.Fatalf("no answer: %v", why)
	}
	want := view{Type: "REPLY", XID: xid, Options: strs(dhcpv6.OptServerID(serverDUID), dhcpv6.OptClientID(clientDUID),
		dhcpv6.OptInformationRefreshTime(600*time.Second))}
	if diff := cmp.Diff(want, viewOf(got)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Interface: "lan"}, true},
		{"full", Config{Interface: "lan", DNS: []netip.Addr{boxDNS}, Domains: []string{"lan", "example.com."}, InfoRefresh: time.Hour}, true},
		{"no interface", Config{}, false},
		{"refresh below 600 s", Config{Interface: "lan", InfoRefresh: 599 * time.Second}, false},
		{"refresh beyond 32 bits", Config{Interface: "lan", InfoRefresh: (1 << 32) * time.Second}, false},
		{"IPv4 DNS", Config{Interface: "lan", DNS: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}, false},
		{"mapped DNS", Config{Interface: "lan", DNS: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.1")}}, false},
		{"multicast DNS", Config{Interface: "lan", DNS: []netip.Addr{netip.MustParseAddr("ff02::1")}}, false},
		{"empty domain", Config{Interface: "lan", Domains: []string{""}}, false},
		{"empty label", Config{Interface: "lan", Domains: []string{"a..b"}}, false},
		{"label of 64", Config{Interface: "lan", Domains: []string{string(make([]byte, 64))}}, false},
		{"negative rate", Config{Interface: "lan", Rate: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if err := c.check(); (err == nil) != tc.ok {
				t.Errorf("check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSetDNS: the answers follow SetDNS; a bad server is refused and
// changes nothing.
func TestSetDNS(t *testing.T) {
	s, err := New(Config{Interface: "lan", DUID: serverDUID, DNS: []netip.Addr{boxDNS}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	isp := netip.MustParseAddr("2001:db8:64::53")
	if err := s.SetDNS([]netip.Addr{isp}, []string{"isp.example"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDNS([]netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil); err == nil {
		t.Error("an IPv4 DNS server was accepted")
	}
	got, _ := answer(msg(dhcpv6.MessageTypeInformationRequest), s.ans.Load())
	want := view{Type: "REPLY", XID: xid, Options: strs(dhcpv6.OptServerID(serverDUID), dhcpv6.OptDNS(isp.AsSlice()),
		dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: []string{"isp.example"}}), dhcpv6.OptInformationRefreshTime(DefaultInfoRefresh))}
	if diff := cmp.Diff(want, viewOf(got)); diff != "" {
		t.Errorf("answer after SetDNS (-want +got):\n%s", diff)
	}
}
