package wanclient

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestLeaseTimers follows a lease that no server renews: RENEWING at T1
// (unicast to the server, retransmitted after half the time to T2, at
// least 60 s), REBINDING at T2 (broadcast, likewise to expiry), expiry
// with onChange(old, nil) and a DISCOVER that suggests the old address.
func TestLeaseTimers(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	l := e.dora()

	type step struct {
		at    time.Duration // since epoch, in ms
		state string
	}
	ms := time.Millisecond
	steps := []step{
		{500000 * ms, "renewing"},  // T1
		{687500 * ms, "renewing"},  // + (875-500)/2
		{781250 * ms, "renewing"},  // + (875-687.5)/2
		{841250 * ms, "renewing"},  // + 60 (half is 46.875)
		{875000 * ms, "rebinding"}, // T2 comes before +60
		{937500 * ms, "rebinding"}, // + (1000-875)/2
		{997500 * ms, "rebinding"}, // + 60
	}
	var renewXID, rebindXID dhcpv4.TransactionID
	for _, s := range steps {
		e.clk.At(s.at - time.Millisecond)
		e.quiet()
		e.clk.At(s.at)
		r := e.expect(dhcpv4.MessageTypeRequest)
		if got := e.c.Stats().State; got != s.state {
			t.Errorf("at %v: state %s, want %s", s.at, got, s.state)
		}
		if !r.msg.ClientIPAddr.Equal(net.IP(leaseIP.AsSlice())) || r.srcIP != leaseIP {
			t.Errorf("at %v: ciaddr %v from %v, want %v", s.at, r.msg.ClientIPAddr, r.srcIP, leaseIP)
		}
		if option(r.msg, 50) != nil || option(r.msg, 54) != nil {
			t.Errorf("at %v: %s REQUEST carries option 50 or 54", s.at, s.state)
		}
		switch s.state {
		case "renewing":
			if !macEqual(r.dstMAC, serverMAC) || r.dstIP != serverIP {
				t.Errorf("at %v: renewal to %s %v, want unicast to %s %v", s.at, r.dstMAC, r.dstIP, serverMAC, serverIP)
			}
			if renewXID == (dhcpv4.TransactionID{}) {
				renewXID = r.msg.TransactionID
			} else if r.msg.TransactionID != renewXID {
				t.Errorf("at %v: renewal retransmission changed the xid", s.at)
			}
		case "rebinding":
			if !macEqual(r.dstMAC, broadcastMAC) || r.dstIP != bcastAddr {
				t.Errorf("at %v: rebinding to %s %v, want broadcast", s.at, r.dstMAC, r.dstIP)
			}
			if rebindXID == (dhcpv4.TransactionID{}) {
				rebindXID = r.msg.TransactionID
				if rebindXID == renewXID {
					t.Errorf("REBINDING kept RENEWING's xid")
				}
			} else if r.msg.TransactionID != rebindXID {
				t.Errorf("at %v: rebinding retransmission changed the xid", s.at)
			}
		}
	}
	e.noChange()
	e.clk.At(1000*time.Second - time.Millisecond)
	e.quiet()
	e.clk.At(1000 * time.Second)
	ch := e.change()
	if diff := cmp.Diff(l, ch.old, leaseCmp); diff != "" || ch.new != nil {
		t.Errorf("at expiry onChange(%v, %v), want (lease, nil); old (-want +got):\n%s", ch.old, ch.new, diff)
	}
	if e.c.Current() != nil {
		t.Errorf("Current() = %+v after expiry", e.c.Current())
	}
	d := e.expect(dhcpv4.MessageTypeDiscover)
	if got := d.msg.RequestedIPAddress(); !got.Equal(net.IP(leaseIP.AsSlice())) {
		t.Errorf("DISCOVER after expiry suggests %v, want %v", got, leaseIP)
	}
	// It keeps trying.
	e.clk.At(1004 * time.Second)
	e.expect(dhcpv4.MessageTypeDiscover)
}

// TestRenewal answers the renewal at T1 with changed and unchanged values.
func TestRenewal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []dhcpv4.Option
		addr   netip.Addr
		change bool
		mod    func(*Lease)
	}{
		{name: "same values", change: false},
		{name: "longer lease", opts: []dhcpv4.Option{dhcpv4.OptIPAddressLeaseTime(3000 * time.Second)}, change: false,
			mod: func(l *Lease) {
				l.T1, l.T2, l.Expiry = l.Obtained.Add(1500*time.Second), l.Obtained.Add(2625*time.Second), l.Obtained.Add(3000*time.Second)
			}},
		{name: "new DNS", opts: []dhcpv4.Option{dhcpv4.OptDNS(net.IPv4(198, 51, 100, 53))}, change: true,
			mod: func(l *Lease) { l.DNS = []netip.Addr{netip.MustParseAddr("198.51.100.53")} }},
		{name: "new gateway", opts: []dhcpv4.Option{dhcpv4.OptRouter(net.IPv4(192, 0, 2, 254))}, change: true,
			mod: func(l *Lease) { l.Gateway = netip.MustParseAddr("192.0.2.254") }},
		{name: "new MTU", opts: []dhcpv4.Option{dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0x05, 0xdc})}, change: true,
			mod: func(l *Lease) { l.MTU = 1500 }},
		{name: "new domain", opts: []dhcpv4.Option{dhcpv4.OptDomainName("other.example")}, change: true,
			mod: func(l *Lease) { l.Domain = "other.example" }},
		{name: "new NTP", opts: []dhcpv4.Option{dhcpv4.OptNTPServers(net.IPv4(192, 0, 2, 124))}, change: true,
			mod: func(l *Lease) { l.NTP = []netip.Addr{netip.MustParseAddr("192.0.2.124")} }},
		{name: "new address", addr: netip.MustParseAddr("192.0.2.200"), change: true,
			mod: func(l *Lease) { l.Addr = netip.MustParsePrefix("192.0.2.200/24") }},
		{name: "new mask", opts: []dhcpv4.Option{dhcpv4.OptSubnetMask(net.CIDRMask(22, 32))}, change: true,
			mod: func(l *Lease) { l.Addr = netip.MustParsePrefix("192.0.2.100/22") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.run()
			old := e.dora()
			e.clk.At(500 * time.Second)
			r := e.expect(dhcpv4.MessageTypeRequest)
			addr := leaseIP
			if tc.addr.IsValid() {
				addr = tc.addr
			}
			e.clk.At(501 * time.Second) // the ACK comes a second later
			e.deliver(srv.frame(srv.msg(r.msg, dhcpv4.MessageTypeAck, addr, append(leaseOpts(), tc.opts...)...), leaseIP))
			want := wantLease(500 * time.Second) // counted from the REQUEST
			if tc.mod != nil {
				tc.mod(want)
			}
			if tc.change {
				ch := e.change()
				if diff := cmp.Diff(old, ch.old, leaseCmp); diff != "" {
					t.Errorf("onChange old (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want, ch.new, leaseCmp); diff != "" {
					t.Errorf("onChange new (-want +got):\n%s", diff)
				}
			} else {
				e.waitState("bound")
				e.noChange()
			}
			e.waitState("bound")
			if diff := cmp.Diff(want, e.c.Current(), leaseCmp); diff != "" {
				t.Errorf("Current (-want +got):\n%s", diff)
			}
			saved, err := loadLease(e.c.cfg.LeaseFile, clientMAC)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, saved, leaseCmp); diff != "" {
				t.Errorf("lease file (-want +got):\n%s", diff)
			}
			// The next renewal is at the new T1.
			e.clk.Set(want.T1.Add(-time.Millisecond))
			e.quiet()
			e.clk.Set(want.T1)
			if r := e.expect(dhcpv4.MessageTypeRequest); r.dstIP != serverIP || r.srcIP != want.Addr.Addr() {
				t.Errorf("next renewal %v -> %v", r.srcIP, r.dstIP)
			}
		})
	}
}

// TestRebindOtherServer: an ACK in REBINDING from another server moves the
// lease, and the next renewal goes to that server's MAC.
func TestRebindOtherServer(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	e.dora()
	e.clk.At(500 * time.Second)
	e.expect(dhcpv4.MessageTypeRequest)
	e.clk.At(875 * time.Second)
	r := e.expect(dhcpv4.MessageTypeRequest)
	other := fakeServer{mac: otherMAC, ip: netip.MustParseAddr("192.0.2.2")}
	e.deliver(other.frame(other.msg(r.msg, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...), leaseIP))
	e.waitState("bound")
	e.noChange() // same configuration from another server
	l := e.c.Current()
	if l.Server != other.ip || !macEqual(l.ServerMAC, otherMAC) {
		t.Fatalf("lease from %v %s, want %v %s", l.Server, l.ServerMAC, other.ip, otherMAC)
	}
	e.clk.Set(l.T1)
	if r := e.expect(dhcpv4.MessageTypeRequest); !macEqual(r.dstMAC, otherMAC) || r.dstIP != other.ip {
		t.Errorf("renewal to %s %v, want %s %v", r.dstMAC, r.dstIP, otherMAC, other.ip)
	}
}

func TestNAKWhileRenewing(t *testing.T) {
	for _, state := range []string{"renewing", "rebinding"} {
		t.Run(state, func(t *testing.T) {
			e := newEnv(t, nil)
			e.run()
			l := e.dora()
			e.clk.At(500 * time.Second)
			r := e.expect(dhcpv4.MessageTypeRequest)
			if state == "rebinding" {
				e.clk.At(875 * time.Second)
				r = e.expect(dhcpv4.MessageTypeRequest)
			}
			e.deliver(srv.frame(srv.msg(r.msg, dhcpv4.MessageTypeNak, netip.Addr{}, dhcpv4.OptMessage("address gone")), bcastAddr))
			ch := e.change()
			if diff := cmp.Diff(l, ch.old, leaseCmp); diff != "" || ch.new != nil {
				t.Errorf("onChange(%v, %v), want (lease, nil):\n%s", ch.old, ch.new, diff)
			}
			d := e.expect(dhcpv4.MessageTypeDiscover) // at once, without suggesting the NAKed address
			if option(d.msg, 50) != nil {
				t.Errorf("DISCOVER after NAK suggests %v", d.msg.RequestedIPAddress())
			}
			if _, err := os.Stat(e.c.cfg.LeaseFile); !os.IsNotExist(err) {
				t.Errorf("lease file after NAK: %v", err)
			}
			if e.c.Current() != nil {
				t.Errorf("Current() = %+v after NAK", e.c.Current())
			}
		})
	}
}
