package dhcpd

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestReplyOptions checks every field and option of an OFFER, an ACK, a
// NAK and an INFORM's ACK, after a round trip through the wire format.
func TestReplyOptions(t *testing.T) {
	cfg := testConfig()
	cfg.DNS = []netip.Addr{netip.MustParseAddr("10.70.0.53"), netip.MustParseAddr("9.9.9.9")}
	cfg.NTP = []netip.Addr{netip.MustParseAddr("10.70.0.1")}
	cfg.MTU = 1400
	cfg.Domain = "home.arpa"
	cfg.LeaseTime = time.Hour
	s, _ := newTestServer(t, cfg)

	type fields struct {
		Type                  string
		YourIP, ClientIP      string
		Gateway               string
		Broadcast             bool
		Mask, Router, DNS     string
		BroadcastAddr, Domain string
		NTP                   string
		MTU                   []byte
		Lease, T1, T2         time.Duration
		ServerID              string
		ClientID              []byte
		Message               string
	}
	view := func(r *dhcpv4.DHCPv4) fields {
		t.Helper()
		r, err := dhcpv4.FromBytes(r.ToBytes())
		if err != nil {
			t.Fatal(err)
		}
		if r.OpCode != dhcpv4.OpcodeBootReply {
			t.Errorf("op %v", r.OpCode)
		}
		f := fields{
			Type: r.MessageType().String(), YourIP: r.YourIPAddr.String(), ClientIP: r.ClientIPAddr.String(),
			Gateway: r.GatewayIPAddr.String(), Broadcast: r.IsBroadcast(), Domain: r.DomainName(),
			MTU: r.Options.Get(dhcpv4.OptionInterfaceMTU), ServerID: r.ServerIdentifier().String(),
			ClientID: r.Options.Get(dhcpv4.OptionClientIdentifier), Message: r.Message(),
			Lease: r.IPAddressLeaseTime(0), T1: r.IPAddressRenewalTime(0), T2: r.IPAddressRebindingTime(0),
		}
		if m := r.SubnetMask(); m != nil {
			f.Mask = netipMask(m)
		}
		f.Router = joinIPs(r.Router())
		f.DNS = joinIPs(r.DNS())
		f.NTP = joinIPs(r.NTPServers())
		if b := r.BroadcastAddress(); b != nil {
			f.BroadcastAddr = b.String()
		}
		return f
	}
	network := fields{
		Mask: "255.255.255.0", Router: "10.70.0.1", DNS: "10.70.0.53 9.9.9.9", BroadcastAddr: "10.70.0.255",
		Domain: "home.arpa", NTP: "10.70.0.1", MTU: []byte{0x05, 0x78}, ServerID: "10.70.0.1",
	}
	with := func(f fields, edit func(*fields)) fields { edit(&f); return f }

	offer := s.Handle(discover(t, macA, clientID(1, 0xaa), dhcpv4.WithBroadcast(true)))
	ack := s.Handle(selecting(t, macA, "10.70.0.2", clientID(1, 0xaa)))
	renewed := s.Handle(renew(t, macA, "10.70.0.2", clientID(1, 0xaa), giaddr("10.70.0.254")))
	nak := s.Handle(initReboot(t, macB, "10.70.0.2", clientID(1, 0xbb)))
	informed := s.Handle(inform(t, macC, "10.70.0.30"))
	for _, tc := range []struct {
		name string
		got  *dhcpv4.DHCPv4
		want fields
	}{
		{"offer", offer, with(network, func(f *fields) {
			f.Type, f.YourIP, f.ClientIP, f.Gateway, f.Broadcast = "OFFER", "10.70.0.2", "0.0.0.0", "0.0.0.0", true
			f.Lease, f.T1, f.T2, f.ClientID = time.Hour, 30*time.Minute, 52*time.Minute+30*time.Second, []byte{1, 0xaa}
		})},
		{"ack", ack, with(network, func(f *fields) {
			f.Type, f.YourIP, f.ClientIP, f.Gateway = "ACK", "10.70.0.2", "0.0.0.0", "0.0.0.0"
			f.Lease, f.T1, f.T2, f.ClientID = time.Hour, 30*time.Minute, 52*time.Minute+30*time.Second, []byte{1, 0xaa}
		})},
		{"renewal ack", renewed, with(network, func(f *fields) {
			f.Type, f.YourIP, f.ClientIP, f.Gateway = "ACK", "10.70.0.2", "10.70.0.2", "10.70.0.254"
			f.Lease, f.T1, f.T2, f.ClientID = time.Hour, 30*time.Minute, 52*time.Minute+30*time.Second, []byte{1, 0xaa}
		})},
		{"nak", nak, fields{Type: "NAK", YourIP: "0.0.0.0", ClientIP: "0.0.0.0", Gateway: "0.0.0.0",
			ServerID: "10.70.0.1", ClientID: []byte{1, 0xbb}, Message: "address not available"}},
		{"inform ack", informed, with(network, func(f *fields) {
			f.Type, f.YourIP, f.ClientIP, f.Gateway = "ACK", "0.0.0.0", "10.70.0.30", "0.0.0.0"
		})},
	} {
		if tc.got == nil {
			t.Errorf("%s: no reply", tc.name)
			continue
		}
		if diff := cmp.Diff(tc.want, view(tc.got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestDefaultOptions checks the defaults: DNS and router are ServerIP,
// domain "lan", no NTP or MTU, lease 12h.
func TestDefaultOptions(t *testing.T) {
	s, _ := newTestServer(t, testConfig())
	r := s.Handle(discover(t, macA))
	got := []string{joinIPs(r.DNS()), joinIPs(r.Router()), r.DomainName(), r.IPAddressLeaseTime(0).String(),
		joinIPs(r.NTPServers()), string(r.Options.Get(dhcpv4.OptionInterfaceMTU))}
	want := []string{"10.70.0.1", "10.70.0.1", "lan", "12h0m0s", "", ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReplyAddr checks RFC 2131 §4.1's destinations.
func TestReplyAddr(t *testing.T) {
	s, _ := newTestServer(t, testConfig())
	bcast := "255.255.255.255:68"
	for _, tc := range []struct {
		name          string
		req           *dhcpv4.DHCPv4
		want          string
		wantBroadcast bool
	}{
		{"offer, no broadcast bit: broadcast (no ARP entry for yiaddr)", discover(t, macA), bcast, false},
		{"offer, broadcast bit", discover(t, macB, dhcpv4.WithBroadcast(true)), bcast, true},
		{"ack of a renewal: unicast to ciaddr", renew(t, macC, "10.70.0.9"), "10.70.0.9:68", false},
		{"nak to a configured client: broadcast", renew(t, macC, "10.70.0.2"), bcast, false},
		{"relayed offer: to the relay's server port", discover(t, macD, giaddr("10.70.0.254")), "10.70.0.254:67", false},
		{"relayed nak: to the relay, broadcast bit set", initReboot(t, macD, "192.168.0.9", giaddr("10.70.0.254")), "10.70.0.254:67", true},
		{"inform: unicast to ciaddr", inform(t, macA, "10.70.0.40"), "10.70.0.40:68", false},
	} {
		resp := s.Handle(tc.req)
		if resp == nil {
			t.Errorf("%s: no reply", tc.name)
			continue
		}
		got := ReplyAddr(tc.req, resp).String()
		if got != tc.want || resp.IsBroadcast() != tc.wantBroadcast {
			t.Errorf("%s: %s broadcast bit %v, want %s, %v", tc.name, got, resp.IsBroadcast(), tc.want, tc.wantBroadcast)
		}
	}
}
