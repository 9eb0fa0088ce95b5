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

// handleCase is one run of a server of its own through steps.
type handleCase struct {
	name       string
	cfg        func(*Config)
	steps      []step
	wantLeases []string // the table at the end; nil: not checked
}

// runHandle runs each case as a subtest and checks every reply and the
// table at the end.
func runHandle(t *testing.T, cases []handleCase) {
	t.Helper()
	for _, tc := range cases {
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

// TestHandle drives the state machine through RFC 2131's exchanges, one
// server per case, and checks every reply and the table at the end: which
// address DISCOVER, OFFER and REQUEST give a client.
func TestHandle(t *testing.T) {
	const lease = DefaultLeaseTime
	runHandle(t, []handleCase{
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
	})
}

// TestHandleReboot: INIT-REBOOT, RENEWING and REBINDING.
func TestHandleReboot(t *testing.T) {
	const lease = DefaultLeaseTime
	runHandle(t, []handleCase{
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
	})
}

// TestHandleRequests: the addresses never leased, who a client is, relays,
// host names and malformed requests.
func TestHandleRequests(t *testing.T) {
	static := func(c *Config) {
		c.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100"), Hostname: "printer"}}
	}
	runHandle(t, []handleCase{
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
	})
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
