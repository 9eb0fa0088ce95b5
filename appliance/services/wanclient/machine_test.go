package wanclient

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/services/dhcpclient"
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
		{"VLAN 4095", Config{Interface: "wan0", MAC: clientMAC, VLAN: dhcpclient.VLAN{ID: 4095}}},
		{"VLAN priority 8", Config{Interface: "wan0", MAC: clientMAC, VLAN: dhcpclient.VLAN{ID: 7, PCP: 8}}},
		{"priority without a VLAN", Config{Interface: "wan0", MAC: clientMAC, VLAN: dhcpclient.VLAN{PCP: 6}}},
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
