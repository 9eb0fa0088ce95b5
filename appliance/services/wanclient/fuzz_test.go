package wanclient

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/services/dhcpclient"
)

// discardTransport takes every frame and never receives one.
type discardTransport struct{}

func (discardTransport) Read([]byte) (int, bool, error)       { return 0, false, net.ErrClosed }
func (discardTransport) Write([]byte, net.HardwareAddr) error { return nil }
func (discardTransport) Close() error                         { return nil }

// fuzzMachine is a machine in state s waiting for xid, with a bound lease
// where the state has one.
func fuzzMachine(c *Client, s state, xid dhcpv4.TransactionID) *machine {
	m := newMachine(c, discardTransport{}, 1500, func(_, _ *Lease) {})
	m.state, m.xid, m.reqAt, m.began = s, xid, epoch, epoch
	switch s {
	case stateRequesting:
		req := &dhcpv4.DHCPv4{TransactionID: xid, ClientHWAddr: clientMAC, ClientIPAddr: net.IPv4zero}
		m.offer, m.offerBy = srv.msg(req, dhcpv4.MessageTypeOffer, leaseIP), serverIP
	case stateInitReboot:
		m.reboot = wantLease(0)
	case stateRenewing, stateRebinding:
		m.lease = wantLease(0)
	}
	return m
}

// FuzzReply feeds raw frames through the frame parsing around the DHCP
// library and the state machine's checks in every waiting state: nothing
// panics, and a lease that comes out of it is one the client can use.
func FuzzReply(f *testing.F) {
	good := offerFrame(f)
	f.Add(good)
	req := &dhcpv4.DHCPv4{TransactionID: dhcpv4.TransactionID{1, 2, 3, 4}, ClientHWAddr: clientMAC, ClientIPAddr: net.IPv4zero}
	for _, t := range []dhcpv4.MessageType{dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak} {
		f.Add(srv.frame(srv.msg(req, t, leaseIP, leaseOpts()...), leaseIP))
	}
	f.Add(good[:len(good)/2])
	f.Add(good[:ethHdrLen+ipv4HdrLen+udpHdrLen+10])
	f.Add([]byte{})
	f.Add(srv.msg(req, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...).ToBytes())

	c, err := New(Config{Interface: "wan0", MAC: clientMAC}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	c.core.Clock = newFakeClock()
	f.Fuzz(func(t *testing.T, data []byte) {
		// data as a whole frame, and as the DHCP payload of a good frame
		// (so that mutations reach the DHCP parser past the checksums).
		wrapped := (&dhcpclient.Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverIP, DstIP: leaseIP,
			SrcPort: serverPort, DstPort: clientPort, Payload: data}).Marshal()
		for i, frame := range [][]byte{data, data, wrapped} {
			csumValid := i == 1
			r, why := decodeReply(frame, csumValid)
			if why != "" {
				if r.Msg != nil {
					t.Fatalf("dropped (%s) but decoded", why)
				}
				continue
			}
			if r.Msg == nil || len(r.SrcMAC) != 6 || len(r.DstMAC) != 6 || !r.SrcIP.Is4() {
				t.Fatalf("decoded %+v", r)
			}
			if l, err := leaseFromACK(r.Msg, r.SrcMAC, r.SrcIP, epoch); err == nil {
				checkLease(t, l)
			}
			// Reach past the xid check in every state that waits.
			r.DstMAC = broadcastMAC
			r.Msg.ClientHWAddr = clientMAC
			for _, s := range []state{stateSelecting, stateRequesting, stateInitReboot, stateRenewing, stateRebinding} {
				m := fuzzMachine(c, s, r.Msg.TransactionID)
				m.Handle(r, epoch.Add(time.Second))
				if m.lease != nil {
					checkLease(t, m.lease)
				}
			}
		}
	})
}

// checkLease fails unless l is a lease the client can configure and time.
func checkLease(t *testing.T, l *Lease) {
	t.Helper()
	if !usable(l.Addr.Addr()) || l.Addr.Bits() <= 0 || l.Addr.Bits() > 32 || !usable(l.Server) {
		t.Fatalf("unusable lease %+v", l)
	}
	if l.T1.Before(l.Obtained) || !l.T2.After(l.T1) || !l.Expiry.After(l.T2) {
		t.Fatalf("lease times out of order: %v %v %v %v", l.Obtained, l.T1, l.T2, l.Expiry)
	}
	if l.MTU != 0 && l.MTU < 68 {
		t.Fatalf("MTU %d", l.MTU)
	}
}

// FuzzLeaseFile: decoding a lease file never panics, and what it accepts
// it writes back the same.
func FuzzLeaseFile(f *testing.F) {
	good, err := encodeLease(clientMAC, wantLease(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"mac":"02:00:00:00:00:01","addr":"10.0.0.1/8","server":"10.0.0.2"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := decodeLease(data, clientMAC)
		if err != nil {
			return
		}
		b, err := encodeLease(clientMAC, l)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := decodeLease(b, clientMAC)
		if err != nil {
			t.Fatalf("re-encoded lease does not decode: %v\n%s", err, b)
		}
		if diff := cmp.Diff(l, l2, leaseCmp); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
