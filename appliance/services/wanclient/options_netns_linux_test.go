package wanclient

import (
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestNetnsISPOptions runs the client with an ISP's options against
// dnsmasq, which tags the client by what it received and answers by tag:
// the vendor class (60) gets the domain vendor.example, the user class
// "voip-box" (77, which dnsmasq splits by RFC 3004's length bytes) the
// NTP server 10.80.0.123, the extra option 224 de:ad an MTU of 1280
// instead of 1400; a user class matching across two classes ("tvvoip",
// as it would if the classes were sent run together) makes dnsmasq
// ignore the client. The hostname and client ID are in dnsmasq's lease.
// A client without the options gets the untagged answer; the renewal
// (a REQUEST in RENEWING) keeps the tagged one.
func TestNetnsISPOptions(t *testing.T) {
	l := newLab(t)
	l.startDnsmasq("10.80.0.100", "10.80.0.150",
		"--dhcp-vendorclass=set:vc,isp-vendor", "--dhcp-userclass=set:uc,voip-box", "--dhcp-userclass=set:bad,tvvoip",
		"--dhcp-match=set:opt,224,de:ad", "--dhcp-ignore=tag:bad",
		"--dhcp-option=tag:vc,15,vendor.example", "--dhcp-option=tag:uc,42,10.80.0.123", "--dhcp-option=tag:opt,26,1280")

	t.Run("without options", func(t *testing.T) {
		mac := net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0x42}
		b := l.startClient(Config{Interface: "c0", MAC: mac}, nil)
		got := b.change(t, 20*time.Second).new
		if got == nil || got.MTU != 1400 || got.Domain != "" || len(got.NTP) != 0 {
			t.Errorf("lease %+v, want MTU 1400, no domain, no NTP server", got)
		}
		b.stop(t)
	})

	cfg := Config{Interface: "c0", MAC: boxMAC, Hostname: "fritz", ClientID: []byte{0, 'i', 's', 'p', '-', 'i', 'd'},
		VendorClass: "isp-vendor", UserClass: []string{"iptv", "voip-box"},
		Options:   []Option{{Code: 224, Value: []byte{0xde, 0xad}}},
		LeaseFile: filepath.Join(l.dir, "wan.lease")}
	b := l.startClient(cfg, nil)
	first := b.change(t, 20*time.Second).new
	tagged := func(what string, got *Lease) {
		t.Helper()
		if got == nil || got.MTU != 1280 || got.Domain != "vendor.example" || !slices.Equal(got.NTP, []netip.Addr{netip.MustParseAddr("10.80.0.123")}) {
			t.Errorf("%s: lease %+v, want MTU 1280, domain vendor.example, NTP server 10.80.0.123", what, got)
		}
	}
	tagged("lease", first)
	var dl dnsmasqLease
	if !eventually(5*time.Second, func() (ok bool) { dl, ok = l.dnsmasqLease(boxMAC); return ok }) {
		t.Fatalf("dnsmasq's lease file has no lease for %s", boxMAC)
	}
	if dl.hostname != "fritz" || dl.clientID != "00:69:73:70:2d:69:64" {
		t.Errorf("dnsmasq's lease %+v, want hostname fritz, client id 00:69:73:70:2d:69:64", dl)
	}
	if first == nil {
		t.FailNow()
	}
	// dnsmasq's T1 is 5 s: the REQUEST in RENEWING must carry the options
	// again for the same answer (another one would call onChange).
	if !eventually(10*time.Second, func() bool {
		cur := b.c.Current()
		return cur != nil && cur.Obtained.After(first.Obtained)
	}) {
		t.Fatalf("no renewal within 10 s (stats %+v)", b.c.Stats())
	}
	tagged("after the renewal", b.c.Current())
	select {
	case c := <-b.changes:
		t.Errorf("renewal called onChange(%+v, %+v)", c.old, c.new)
	default:
	}
}
