package dhcpd

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// step is one request of a case: the clock moves by advance, then req is
// handled and its reply must summarize to want (see summary).
type step struct {
	advance time.Duration
	req     *dhcpv4.DHCPv4
	want    string
}

// TestHandle drives the state machine through RFC 2131's exchanges, one
// server per case, and checks every reply and the table at the end.
func TestHandle(t *testing.T) {
	const lease = DefaultLeaseTime
	static := func(c *Config) {
		c.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100"), Hostname: "printer"}}
	}
	for _, tc := range []struct {
		name       string
		cfg        func(*Config)
		steps      []step
		wantLeases []string // nil: not checked
	}{
		{
			name: "DORA gives the first pool address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "a second client gets the next address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{req: selecting(t, macB, "10.70.0.3"), want: "ACK 10.70.0.3"},
			},
		},
		{
			name: "a released address is remembered for its client",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: release(t, macA, "10.70.0.2"), want: ""},
				{req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 offered", macB + " 10.70.0.3 offered"},
		},
		{
			name: "an expired lease is remembered for its client",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease + time.Second, req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
			},
		},
		{
			name: "a bound client that starts over is offered its lease",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macA, requested("10.70.0.9")), want: "OFFER 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "the requested address is offered when free",
			steps: []step{
				{req: discover(t, macA, requested("10.70.0.50")), want: "OFFER 10.70.0.50"},
				{req: selecting(t, macA, "10.70.0.50"), want: "ACK 10.70.0.50"},
			},
		},
		{
			name: "a requested address that is taken is not offered",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.3"},
			},
		},
		{
			name: "a requested address outside the pool is not offered",
			cfg: func(c *Config) {
				c.PoolStart, c.PoolEnd = netip.MustParseAddr("10.70.0.100"), netip.MustParseAddr("10.70.0.110")
			},
			steps: []step{
				{req: discover(t, macA, requested("10.70.0.5")), want: "OFFER 10.70.0.100"},
				{req: discover(t, macB, requested("192.168.1.5")), want: "OFFER 10.70.0.101"},
				{req: initReboot(t, macC, "10.70.0.5"), want: "NAK"},
			},
		},
		{
			name: "an offer is held for OfferHold",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.3"},
				{req: initReboot(t, macC, "10.70.0.2"), want: "NAK"},
				{advance: OfferHold + time.Second, req: discover(t, macD, requested("10.70.0.2")), want: "OFFER 10.70.0.2"},
			},
		},
		{
			name: "choosing another server withdraws the offer",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: msg(t, dhcpv4.MessageTypeRequest, macA, requested("10.70.0.2"), serverID("10.70.0.99")), want: ""},
				{req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.2"},
			},
			wantLeases: []string{macB + " 10.70.0.2 offered"},
		},
		{
			name: "SELECTING an address that was not offered",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.7"), want: "NAK"},
			},
		},
		{
			name: "SELECTING after the offer expired, address still free",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{advance: time.Hour, req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "INIT-REBOOT with the client's address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: time.Hour, req: initReboot(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "INIT-REBOOT on the wrong network",
			steps: []step{
				{req: initReboot(t, macA, "192.168.1.5"), want: "NAK"},
			},
			wantLeases: []string{},
		},
		{
			name: "INIT-REBOOT with another client's address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: initReboot(t, macB, "10.70.0.2"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "INIT-REBOOT of an unknown client with a free address (authoritative)",
			steps: []step{
				{req: initReboot(t, macA, "10.70.0.77"), want: "ACK 10.70.0.77"},
			},
			wantLeases: []string{macA + " 10.70.0.77 bound"},
		},
		{
			name: "INIT-REBOOT of a bound client with another address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: initReboot(t, macA, "10.70.0.9"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "RENEWING",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease / 2, req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease * 3 / 4, req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "RENEWING another client's address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: renew(t, macB, "10.70.0.2"), want: "NAK"},
				{req: renew(t, macB, "192.168.1.7"), want: "NAK"},
			},
		},
		{
			name: "REBINDING after expiry while the address is still free",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease + time.Hour, req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "an expired lease taken by another client is NAKed",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease + time.Second, req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.2"},
				{req: renew(t, macA, "10.70.0.2"), want: "NAK"},
				{req: discover(t, macA), want: "OFFER 10.70.0.3"},
			},
			wantLeases: []string{macB + " 10.70.0.2 offered", macA + " 10.70.0.3 offered"},
		},
		{
			name: "DECLINE quarantines the address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: decline(t, macA, "10.70.0.2"), want: ""},
				{req: discover(t, macA), want: "OFFER 10.70.0.3"},
				{req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.4"},
				{req: initReboot(t, macC, "10.70.0.2"), want: "NAK"},
				{advance: QuarantineTime + time.Second, req: discover(t, macD, requested("10.70.0.2")), want: "OFFER 10.70.0.2"},
			},
		},
		{
			name: "DECLINE of an address the client does not hold is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: decline(t, macB, "10.70.0.2"), want: ""},
				{req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "DECLINE of an address only offered is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: decline(t, macA, "10.70.0.2"), want: ""},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "the quarantine holds at most MaxLeases addresses",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: initReboot(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"},
				{req: decline(t, macA, "10.70.0.10"), want: ""},
				{advance: time.Second, req: initReboot(t, macA, "10.70.0.11"), want: "ACK 10.70.0.11"},
				{req: decline(t, macA, "10.70.0.11"), want: ""},
				{advance: time.Second, req: initReboot(t, macA, "10.70.0.12"), want: "ACK 10.70.0.12"},
				{req: decline(t, macA, "10.70.0.12"), want: ""},
				// .10 left the quarantine early, .11 and .12 are in it.
				{req: initReboot(t, macB, "10.70.0.11"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.12"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.10"), want: "ACK 10.70.0.10"},
			},
		},
		{
			name: "RELEASE frees the address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: release(t, macA, "10.70.0.2"), want: ""},
				{req: initReboot(t, macB, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
			wantLeases: []string{macB + " 10.70.0.2 bound"},
		},
		{
			name: "RELEASE of another client's address is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: release(t, macB, "10.70.0.2"), want: ""},
				{req: msg(t, dhcpv4.MessageTypeRelease, macA, ciaddr("10.70.0.2"), serverID("10.70.0.99")), want: ""},
				{req: initReboot(t, macC, "10.70.0.2"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "INFORM is answered without a lease",
			steps: []step{
				{req: inform(t, macA, "10.70.0.20"), want: "ACK ciaddr=10.70.0.20"},
				{req: inform(t, macA, "192.168.1.20"), want: ""},
			},
			wantLeases: []string{},
		},
		{
			name: "a static lease goes to its device only",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
				{req: selecting(t, macS, "10.70.0.100"), want: "ACK 10.70.0.100"},
				{req: discover(t, macA, requested("10.70.0.100")), want: "OFFER 10.70.0.2"},
				{req: initReboot(t, macB, "10.70.0.100"), want: "NAK"},
				{req: renew(t, macB, "10.70.0.100"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 offered", macS + " 10.70.0.100 bound static config printer"},
		},
		{
			name: "a static lease is reserved before its device comes",
			cfg:  static,
			steps: []step{
				{req: initReboot(t, macA, "10.70.0.100"), want: "NAK"},
				{req: discover(t, macA, requested("10.70.0.100")), want: "OFFER 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 offered", macS + " 10.70.0.100 reserved static config printer"},
		},
		{
			name: "a device with a static lease gets no other address",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS, requested("10.70.0.7")), want: "OFFER 10.70.0.100"},
				{req: initReboot(t, macS, "10.70.0.7"), want: "NAK"},
				{req: renew(t, macS, "10.70.0.7"), want: "NAK"},
			},
		},
		{
			name: "a static lease outside the pool",
			cfg: func(c *Config) {
				c.PoolStart, c.PoolEnd = netip.MustParseAddr("10.70.0.100"), netip.MustParseAddr("10.70.0.110")
				c.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.50")}}
			},
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.50"},
				{req: selecting(t, macS, "10.70.0.50"), want: "ACK 10.70.0.50"},
			},
		},
		{
			name: "a declined static address falls back to the pool",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
				{req: selecting(t, macS, "10.70.0.100"), want: "ACK 10.70.0.100"},
				{req: decline(t, macS, "10.70.0.100"), want: ""},
				{req: discover(t, macS), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macS, "10.70.0.2"), want: "ACK 10.70.0.2"},
				// Once the quarantine is over the device moves back.
				{advance: QuarantineTime + time.Second, req: renew(t, macS, "10.70.0.2"), want: "NAK"},
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
			},
		},
		{
			name: "excluded, server, network and broadcast addresses are never leased",
			cfg:  func(c *Config) { c.Exclude = []netip.Addr{netip.MustParseAddr("10.70.0.2")} },
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.3"},
				{req: initReboot(t, macB, "10.70.0.2"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.1"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.0"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.255"), want: "NAK"},
				{req: discover(t, macC, requested("10.70.0.1")), want: "OFFER 10.70.0.4"},
			},
		},
		{
			name: "the client identifier, not chaddr, identifies a client",
			steps: []step{
				{req: discover(t, macA, clientID(1, 2, 3)), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2", clientID(1, 2, 3)), want: "ACK 10.70.0.2"},
				{req: discover(t, macA), want: "OFFER 10.70.0.3"},
				{req: selecting(t, macA, "10.70.0.3"), want: "ACK 10.70.0.3"},
				{req: renew(t, macB, "10.70.0.2", clientID(1, 2, 3)), want: "ACK 10.70.0.2"},
			},
			wantLeases: []string{macB + " 10.70.0.2 bound", macA + " 10.70.0.3 bound"},
		},
		{
			name: "relayed requests from the subnet are served, from elsewhere ignored",
			steps: []step{
				{req: discover(t, macA, giaddr("10.70.0.254")), want: "OFFER 10.70.0.2"},
				{req: discover(t, macB, giaddr("192.168.9.1")), want: ""},
			},
		},
		{
			name: "host names are sanitized, static names win",
			cfg:  static,
			steps: []step{
				{req: discover(t, macA, hostname("John's iPhone.local")), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macS, hostname("whatever")), want: "OFFER 10.70.0.100"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound john-s-iphone", macS + " 10.70.0.100 offered static config printer"},
		},
		{
			name: "malformed requests are ignored",
			steps: []step{
				{req: msg(t, dhcpv4.MessageTypeDiscover, macA, func(d *dhcpv4.DHCPv4) { d.OpCode = dhcpv4.OpcodeBootReply }), want: ""},
				{req: msg(t, dhcpv4.MessageTypeDiscover, macA, dhcpv4.WithHWType(iana.HWTypeIEEE802)), want: ""},
				{req: msg(t, dhcpv4.MessageTypeDiscover, "02:00:00:00:00:00:00:01"), want: ""},
				{req: msg(t, dhcpv4.MessageTypeDiscover, "03:00:00:00:00:01"), want: ""},
				{req: msg(t, dhcpv4.MessageTypeDiscover, "00:00:00:00:00:00"), want: ""},
				{req: msg(t, dhcpv4.MessageTypeOffer, macA), want: ""},
				{req: msg(t, dhcpv4.MessageTypeRequest, macA), want: ""},
				{req: msg(t, dhcpv4.MessageTypeDiscover, macA, dhcpv4.WithoutOption(dhcpv4.OptionDHCPMessageType)), want: ""},
			},
			wantLeases: []string{},
		},
		{
			name: "a full table of bound leases refuses new clients",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{req: selecting(t, macB, "10.70.0.3"), want: "ACK 10.70.0.3"},
				{req: discover(t, macC), want: ""},
				{req: initReboot(t, macC, "10.70.0.9"), want: ""},
				{req: release(t, macB, "10.70.0.3"), want: ""},
				{req: discover(t, macC), want: "OFFER 10.70.0.3"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound", macC + " 10.70.0.3 offered"},
		},
		{
			name: "a full table reclaims the oldest offer",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{advance: time.Second, req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{advance: time.Second, req: discover(t, macC), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "NAK"},
				{req: selecting(t, macB, "10.70.0.3"), want: "ACK 10.70.0.3"},
			},
			wantLeases: []string{macC + " 10.70.0.2 offered", macB + " 10.70.0.3 bound"},
		},
		{
			name: "an exhausted pool reclaims the expired lease first",
			cfg: func(c *Config) {
				c.PoolStart, c.PoolEnd = netip.MustParseAddr("10.70.0.2"), netip.MustParseAddr("10.70.0.3")
			},
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease + time.Second, req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{advance: time.Second, req: discover(t, macC), want: "OFFER 10.70.0.2"},
				{advance: time.Second, req: discover(t, macD), want: "OFFER 10.70.0.3"},
			},
			wantLeases: []string{macC + " 10.70.0.2 offered", macD + " 10.70.0.3 offered"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s, clk := newTestServer(t, cfg)
			for i, st := range tc.steps {
				clk.Add(st.advance)
				if got := summary(s.Handle(st.req)); got != st.want {
					t.Errorf("step %d (%s %s): got %q, want %q", i, st.req.MessageType(), st.req.ClientHWAddr, got, st.want)
				}
				checkInvariants(t, s)
			}
			if tc.wantLeases != nil {
				if diff := cmp.Diff(tc.wantLeases, leaseLines(s), cmp.Transformer("nilEmpty", func(s []string) []string {
					if s == nil {
						return []string{}
					}
					return s
				})); diff != "" {
					t.Errorf("Leases (-want +got):\n%s", diff)
				}
			}
		})
	}
}

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

// TestStats counts one of each exchange.
func TestStats(t *testing.T) {
	s, _ := newTestServer(t, testConfig())
	dora(t, s, macA)
	s.Handle(discover(t, macB))
	s.Handle(initReboot(t, macC, "10.70.0.2")) // NAK
	s.Handle(decline(t, macA, "10.70.0.2"))
	s.Handle(release(t, macB, "10.70.0.3")) // B holds an offer only: dropped
	s.Handle(inform(t, macD, "10.70.0.40"))
	s.Handle(msg(t, dhcpv4.MessageTypeDiscover, "03:00:00:00:00:01")) // dropped
	dora(t, s, macD)
	want := Stats{
		Discovers: 3, Offers: 3, Requests: 3, Acks: 3, Naks: 1, Declines: 1, Releases: 1, Informs: 1, Dropped: 2,
		PoolSize: 253, LeasesInUse: 1, Offered: 1,
	}
	if diff := cmp.Diff(want, s.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestPool(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name         string
		first, last  netip.Addr // in the config
		wantF, wantL netip.Addr
	}{
		{"default", netip.Addr{}, netip.Addr{}, a("10.70.0.1"), a("10.70.0.254")},
		{"configured", a("10.70.0.100"), a("10.70.0.150"), a("10.70.0.100"), a("10.70.0.150")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.PoolStart, cfg.PoolEnd = tc.first, tc.last
			s, _ := newTestServer(t, cfg)
			if f, l := s.Pool(); f != tc.wantF || l != tc.wantL {
				t.Errorf("Pool() = %v-%v, want %v-%v", f, l, tc.wantF, tc.wantL)
			}
		})
	}
}
