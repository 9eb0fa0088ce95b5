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
