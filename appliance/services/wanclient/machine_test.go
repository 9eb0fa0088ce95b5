package wanclient

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

func TestDORA(t *testing.T) {
	e := newEnv(t, nil)
	e.run()

	d := e.expect(dhcpv4.MessageTypeDiscover)
	if !macEqual(d.dstMAC, broadcastMAC) || d.srcIP != zeroAddr || d.dstIP != bcastAddr {
		t.Errorf("DISCOVER %s %v -> %v, want broadcast from 0.0.0.0", d.dstMAC, d.srcIP, d.dstIP)
	}
	if !macEqual(d.msg.ClientHWAddr, clientMAC) || !d.msg.ClientIPAddr.Equal(net.IPv4zero) || d.msg.IsBroadcast() {
		t.Errorf("DISCOVER chaddr %s ciaddr %v broadcast flag %v", d.msg.ClientHWAddr, d.msg.ClientIPAddr, d.msg.IsBroadcast())
	}
	for _, o := range []struct {
		code uint8
		want []byte
	}{
		{optClientID, append([]byte{1}, clientMAC...)},
		{optHostname, []byte("e1kbox")},
		{55, DefaultParams},
		{57, []byte{0x05, 0xc0}}, // 1472: MTU 1500 less IPv4 and UDP
	} {
		if got := option(d.msg, o.code); !bytes.Equal(got, o.want) {
			t.Errorf("DISCOVER option %d = %v, want %v", o.code, got, o.want)
		}
	}
	if diff := cmp.Diff([]int{12, 53, 55, 57, 61}, optionCodes(d.msg)); diff != "" {
		t.Errorf("DISCOVER options (-want +got):\n%s", diff)
	}

	e.deliver(srv.reply(d, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...))
	r := e.expect(dhcpv4.MessageTypeRequest)
	if r.msg.TransactionID != d.msg.TransactionID || r.msg.NumSeconds != d.msg.NumSeconds {
		t.Errorf("REQUEST xid %s secs %d, want the DISCOVER's %s %d", r.msg.TransactionID, r.msg.NumSeconds, d.msg.TransactionID, d.msg.NumSeconds)
	}
	if !macEqual(r.dstMAC, broadcastMAC) || r.srcIP != zeroAddr || r.dstIP != bcastAddr || !r.msg.ClientIPAddr.Equal(net.IPv4zero) {
		t.Errorf("REQUEST %s %v -> %v ciaddr %v, want broadcast from 0.0.0.0", r.dstMAC, r.srcIP, r.dstIP, r.msg.ClientIPAddr)
	}
	if got := r.msg.RequestedIPAddress(); !got.Equal(net.IP(leaseIP.AsSlice())) {
		t.Errorf("REQUEST option 50 = %v, want %v", got, leaseIP)
	}
	if got := r.msg.ServerIdentifier(); !got.Equal(net.IP(serverIP.AsSlice())) {
		t.Errorf("REQUEST option 54 = %v, want %v", got, serverIP)
	}

	e.deliver(srv.reply(r, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...))
	ch := e.change()
	e.waitState("bound")
	if ch.old != nil {
		t.Errorf("onChange old = %+v, want nil", ch.old)
	}
	if diff := cmp.Diff(wantLease(0), ch.new, leaseCmp); diff != "" {
		t.Errorf("lease (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLease(0), e.c.Current(), leaseCmp); diff != "" {
		t.Errorf("Current (-want +got):\n%s", diff)
	}
	saved, err := loadLease(e.c.cfg.LeaseFile, clientMAC)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantLease(0), saved, leaseCmp); diff != "" {
		t.Errorf("lease file (-want +got):\n%s", diff)
	}
	st := e.c.Stats()
	if st.State != "bound" {
		t.Errorf("state %s, want bound", st.State)
	}
	if diff := diffStats(map[string]uint64{"DISCOVER": 1, "REQUEST": 1}, st.Sent); diff != "" {
		t.Errorf("Sent (-want +got):\n%s", diff)
	}
	if diff := diffStats(map[string]uint64{"OFFER": 1, "ACK": 1}, st.Received); diff != "" {
		t.Errorf("Received (-want +got):\n%s", diff)
	}
	if diff := diffStats(nil, st.Ignored); diff != "" {
		t.Errorf("Ignored (-want +got):\n%s", diff)
	}
}

// TestDiscoverBackoff checks the DISCOVER retransmissions: 4, 8, 16, 32,
// 64, 64 … s, each with the jitter added, the xid kept and secs counting.
func TestDiscoverBackoff(t *testing.T) {
	e := newEnv(t, nil)
	jitter := []time.Duration{time.Second, -time.Second, 500 * time.Millisecond, -250 * time.Millisecond, 0, time.Second, -time.Second, 0}
	i := 0
	e.c.jitter = func() time.Duration { j := jitter[i%len(jitter)]; i++; return j }
	e.run()

	first := e.expect(dhcpv4.MessageTypeDiscover)
	at := time.Duration(0)
	var got []time.Duration
	for n, base := range []time.Duration{4, 8, 16, 32, 64, 64, 64} {
		at += base*time.Second + jitter[n]
		e.clk.At(at - time.Millisecond)
		e.quiet()
		e.clk.At(at)
		d := e.expect(dhcpv4.MessageTypeDiscover)
		got = append(got, at)
		if d.msg.TransactionID != first.msg.TransactionID {
			t.Errorf("retransmission %d has xid %s, want %s", n+1, d.msg.TransactionID, first.msg.TransactionID)
		}
		if want := uint16(at / time.Second); d.msg.NumSeconds != want {
			t.Errorf("retransmission %d: secs %d, want %d", n+1, d.msg.NumSeconds, want)
		}
	}
	want := []time.Duration{5 * time.Second, 12 * time.Second, 28500 * time.Millisecond, 60250 * time.Millisecond,
		124250 * time.Millisecond, 189250 * time.Millisecond, 252250 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DISCOVER times (-want +got):\n%s", diff)
	}
}

func TestJitterRange(t *testing.T) {
	c, err := New(Config{Interface: "wan0", MAC: clientMAC}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Duration(0), time.Duration(0)
	for range 10000 {
		j := c.jitter()
		if j < -time.Second || j > time.Second {
			t.Fatalf("jitter %v outside ±1 s", j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo > -900*time.Millisecond || hi < 900*time.Millisecond {
		t.Errorf("jitter spans only [%v, %v] in 10000 draws", lo, hi)
	}
}

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

// TestNAKWhileRequesting: the first NAK restarts at once, NAKs in a row
// wait 4, then 8 s; a NAK from another server is ignored.
func TestNAKWhileRequesting(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	now := time.Duration(0)
	for n, delay := range []time.Duration{0, 4 * time.Second, 8 * time.Second} {
		e.deliver(srv.reply(d, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...))
		r := e.expect(dhcpv4.MessageTypeRequest)
		if n == 0 {
			other := fakeServer{mac: otherMAC, ip: netip.MustParseAddr("192.0.2.2")}
			e.deliver(other.frame(other.msg(r.msg, dhcpv4.MessageTypeNak, netip.Addr{}), bcastAddr))
		}
		e.deliver(srv.frame(srv.msg(r.msg, dhcpv4.MessageTypeNak, netip.Addr{}), bcastAddr))
		if delay > 0 {
			e.waitState("init")
			e.clk.At(now + delay - time.Millisecond)
			e.quiet()
			now += delay
			e.clk.At(now)
		}
		d = e.expect(dhcpv4.MessageTypeDiscover)
	}
	e.noChange()
	if got := e.c.Stats().Ignored[dropWrongServer]; got != 1 {
		t.Errorf("Ignored[%s] = %d, want 1", dropWrongServer, got)
	}
}

// TestRequestTimeout: an OFFER whose REQUEST nobody answers (4, 8, 16 s)
// leads back to INIT.
func TestRequestTimeout(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	e.deliver(srv.reply(d, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...))
	e.expect(dhcpv4.MessageTypeRequest)
	e.clk.At(4 * time.Second)
	e.expect(dhcpv4.MessageTypeRequest)
	e.clk.At(12 * time.Second)
	e.expect(dhcpv4.MessageTypeRequest)
	e.clk.At(28*time.Second - time.Millisecond)
	e.quiet()
	e.clk.At(28 * time.Second)
	if d2 := e.expect(dhcpv4.MessageTypeDiscover); d2.msg.TransactionID == d.msg.TransactionID {
		t.Errorf("new DISCOVER reuses the old xid")
	}
}

// writeLeaseFile stores l as the lease file of e's client.
func (e *env) writeLeaseFile(l *Lease, mac net.HardwareAddr) {
	e.t.Helper()
	if err := saveLease(e.c.cfg.LeaseFile, mac, l); err != nil {
		e.t.Fatal(err)
	}
}

func TestInitReboot(t *testing.T) {
	stored := wantLease(-300 * time.Second) // obtained 300 s ago: 700 s left
	t.Run("ack", func(t *testing.T) {
		e := newEnv(t, nil)
		e.writeLeaseFile(stored, clientMAC)
		e.run()
		r := e.expect(dhcpv4.MessageTypeRequest)
		if !macEqual(r.dstMAC, broadcastMAC) || r.srcIP != zeroAddr || r.dstIP != bcastAddr || !r.msg.ClientIPAddr.Equal(net.IPv4zero) {
			t.Errorf("INIT-REBOOT %s %v -> %v ciaddr %v, want broadcast from 0.0.0.0", r.dstMAC, r.srcIP, r.dstIP, r.msg.ClientIPAddr)
		}
		if got := r.msg.RequestedIPAddress(); !got.Equal(net.IP(leaseIP.AsSlice())) {
			t.Errorf("INIT-REBOOT requests %v, want %v", got, leaseIP)
		}
		if option(r.msg, 54) != nil {
			t.Errorf("INIT-REBOOT carries a server identifier")
		}
		e.deliver(srv.reply(r, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...))
		ch := e.change()
		if diff := cmp.Diff(wantLease(0), ch.new, leaseCmp); diff != "" || ch.old != nil {
			t.Errorf("onChange(%v, …) (-want +got):\n%s", ch.old, diff)
		}
		if got := e.c.Stats().Sent["DISCOVER"]; got != 0 {
			t.Errorf("%d DISCOVERs", got)
		}
	})
	t.Run("nak", func(t *testing.T) {
		e := newEnv(t, nil)
		e.writeLeaseFile(stored, clientMAC)
		e.run()
		r := e.expect(dhcpv4.MessageTypeRequest)
		e.deliver(srv.frame(srv.msg(r.msg, dhcpv4.MessageTypeNak, netip.Addr{}), bcastAddr))
		if d := e.expect(dhcpv4.MessageTypeDiscover); option(d.msg, 50) != nil {
			t.Errorf("DISCOVER after NAK suggests %v", d.msg.RequestedIPAddress())
		}
		if _, err := os.Stat(e.c.cfg.LeaseFile); !os.IsNotExist(err) {
			t.Errorf("lease file after NAK: %v", err)
		}
		e.noChange()
	})
	t.Run("silence", func(t *testing.T) {
		e := newEnv(t, nil)
		e.writeLeaseFile(stored, clientMAC)
		e.run()
		r := e.expect(dhcpv4.MessageTypeRequest)
		e.clk.At(4 * time.Second)
		if r2 := e.expect(dhcpv4.MessageTypeRequest); r2.msg.TransactionID != r.msg.TransactionID {
			t.Errorf("retransmission changed the xid")
		}
		e.clk.At(12*time.Second - time.Millisecond)
		e.quiet()
		e.clk.At(12 * time.Second)
		if d := e.expect(dhcpv4.MessageTypeDiscover); !d.msg.RequestedIPAddress().Equal(net.IP(leaseIP.AsSlice())) {
			t.Errorf("DISCOVER suggests %v, want %v", d.msg.RequestedIPAddress(), leaseIP)
		}
		e.noChange()
	})
	t.Run("expires while asking", func(t *testing.T) {
		e := newEnv(t, nil)
		l := wantLease(-998 * time.Second) // 2 s left
		e.writeLeaseFile(l, clientMAC)
		e.run()
		e.expect(dhcpv4.MessageTypeRequest)
		e.clk.At(2 * time.Second)
		e.expect(dhcpv4.MessageTypeDiscover)
	})
	for _, tc := range []struct {
		name     string
		write    func(e *env)
		wantHint bool
		wantErr  bool
	}{
		{name: "no file", write: func(*env) {}},
		{name: "expired", write: func(e *env) { e.writeLeaseFile(wantLease(-1000*time.Second), clientMAC) }, wantHint: true},
		{name: "other MAC", write: func(e *env) { e.writeLeaseFile(stored, otherMAC) }, wantErr: true},
		{name: "corrupt", write: func(e *env) {
			if err := os.WriteFile(e.c.cfg.LeaseFile, []byte(`{"mac": `), 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tc.write(e)
			e.run()
			d := e.expect(dhcpv4.MessageTypeDiscover)
			if got := option(d.msg, 50) != nil; got != tc.wantHint {
				t.Errorf("DISCOVER suggests an address: %v, want %v", got, tc.wantHint)
			}
			if got := e.c.Stats().LastError != ""; got != tc.wantErr {
				t.Errorf("LastError %q, want an error: %v", e.c.Stats().LastError, tc.wantErr)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	l := e.dora()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.expect(dhcpv4.MessageTypeRelease)
	if !macEqual(r.dstMAC, serverMAC) || r.dstIP != serverIP || r.srcIP != leaseIP || !r.msg.ClientIPAddr.Equal(net.IP(leaseIP.AsSlice())) {
		t.Errorf("RELEASE %s %v -> %v ciaddr %v, want unicast from the lease to the server", r.dstMAC, r.srcIP, r.dstIP, r.msg.ClientIPAddr)
	}
	if !r.msg.ServerIdentifier().Equal(net.IP(serverIP.AsSlice())) || !bytes.Equal(option(r.msg, optClientID), append([]byte{1}, clientMAC...)) {
		t.Errorf("RELEASE server id %v client id %x", r.msg.ServerIdentifier(), option(r.msg, optClientID))
	}
	ch := e.change()
	if diff := cmp.Diff(l, ch.old, leaseCmp); diff != "" || ch.new != nil {
		t.Errorf("onChange(%v, %v), want (lease, nil):\n%s", ch.old, ch.new, diff)
	}
	if err := e.wait(); err != nil {
		t.Errorf("Run after Release: %v", err)
	}
	if _, err := os.Stat(e.c.cfg.LeaseFile); !os.IsNotExist(err) {
		t.Errorf("lease file after Release: %v", err)
	}
	if e.c.Current() != nil || e.c.Stats().State != "stopped" {
		t.Errorf("after Release: Current %v, state %s", e.c.Current(), e.c.Stats().State)
	}
}

// TestReleaseAfterRun: Run ended keeps the lease; Release then opens a
// socket of its own.
func TestReleaseAfterRun(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	e.dora()
	e.cancel()
	if err := e.wait(); err != nil {
		t.Fatal(err)
	}
	if e.c.Current() == nil {
		t.Fatal("Run's end dropped the lease")
	}
	if _, err := os.Stat(e.c.cfg.LeaseFile); err != nil {
		t.Fatalf("Run's end dropped the lease file: %v", err)
	}
	e.tr = newFakeTransport() // the first was closed with Run
	if err := e.c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := e.expect(dhcpv4.MessageTypeRelease); r.dstIP != serverIP {
		t.Errorf("RELEASE to %v", r.dstIP)
	}
	if e.opens != 2 {
		t.Errorf("%d opens, want 2", e.opens)
	}
	if e.c.Current() != nil {
		t.Errorf("Current() = %v after Release", e.c.Current())
	}
	e.noChange()
}

func TestRunTwice(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	e.expect(dhcpv4.MessageTypeDiscover)
	if err := e.c.Run(context.Background(), nil); err == nil {
		t.Error("a second Run at once did not fail")
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no interface", Config{MAC: clientMAC}},
		{"no MAC", Config{Interface: "wan0"}},
		{"short MAC", Config{Interface: "wan0", MAC: clientMAC[:4]}},
		{"multicast MAC", Config{Interface: "wan0", MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}},
		{"zero MAC", Config{Interface: "wan0", MAC: make(net.HardwareAddr, 6)}},
		{"short client id", Config{Interface: "wan0", MAC: clientMAC, ClientID: []byte{1}}},
		{"pad in params", Config{Interface: "wan0", MAC: clientMAC, Params: []byte{1, 0}}},
		{"long hostname", Config{Interface: "wan0", MAC: clientMAC, Hostname: string(make([]byte, 256))}},
	} {
		if _, err := New(tc.cfg, nil); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.cfg)
		}
	}
}

func TestConfigParams(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Params = []byte{1, 3, 6}
		c.ClientID = []byte{0, 'w', 'a', 'n'}
		c.Hostname = ""
	})
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	if got := option(d.msg, 55); !bytes.Equal(got, []byte{1, 3, 6}) {
		t.Errorf("option 55 = %v", got)
	}
	if got := option(d.msg, optClientID); !bytes.Equal(got, []byte{0, 'w', 'a', 'n'}) {
		t.Errorf("option 61 = %v", got)
	}
	if option(d.msg, optHostname) != nil {
		t.Errorf("option 12 sent without a hostname")
	}
}
