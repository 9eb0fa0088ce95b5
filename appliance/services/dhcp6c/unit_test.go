package dhcp6c

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

var addrCmp = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"prefix", Config{Interface: "wan", MAC: boxMAC}, true},
		{"hint /60", Config{Interface: "wan", MAC: boxMAC, PrefixLength: 60}, true},
		{"address only", Config{Interface: "wan", MAC: boxMAC, NoPrefix: true, Address: true}, true},
		{"no interface", Config{MAC: boxMAC}, false},
		{"short MAC", Config{Interface: "wan", MAC: boxMAC[:4]}, false},
		{"multicast MAC", Config{Interface: "wan", MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}, false},
		{"zero MAC", Config{Interface: "wan", MAC: make(net.HardwareAddr, 6)}, false},
		{"hint /40", Config{Interface: "wan", MAC: boxMAC, PrefixLength: 40}, false},
		{"hint /65", Config{Interface: "wan", MAC: boxMAC, PrefixLength: 65}, false},
		{"nothing asked", Config{Interface: "wan", MAC: boxMAC, NoPrefix: true}, false},
		{"VLAN 7, priority 6", Config{Interface: "wan", MAC: boxMAC, VLAN: dhcpclient.VLAN{ID: 7, PCP: 6}}, true},
		{"VLAN 4095", Config{Interface: "wan", MAC: boxMAC, VLAN: dhcpclient.VLAN{ID: 4095}}, false},
		{"priority without a VLAN", Config{Interface: "wan", MAC: boxMAC, VLAN: dhcpclient.VLAN{PCP: 6}}, false},
		{"IPv6CP's link-local", Config{Interface: "wan", MAC: boxMAC, LinkLocal: netip.MustParseAddr("fe80::1c:2d:3e:4f")}, true},
		{"a global source", Config{Interface: "wan", MAC: boxMAC, LinkLocal: netip.MustParseAddr("2001:db8::1")}, false},
		{"a zoned source", Config{Interface: "wan", MAC: boxMAC, LinkLocal: netip.MustParseAddr("fe80::1%ppp0")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.check()
			if (err == nil) != tc.ok {
				t.Errorf("check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestLinkLocal(t *testing.T) {
	got := LinkLocal(net.HardwareAddr{0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e})
	if want := netip.MustParseAddr("fe80::21b:21ff:fe3c:4d5e"); got != want {
		t.Errorf("LinkLocal = %v, want %v", got, want)
	}
}

func replyFrame(payload []byte, mutate func(*dhcpclient.Frame)) []byte {
	f := dhcpclient.Frame{DstMAC: boxMAC, SrcMAC: ispMAC, SrcIP: LinkLocal(ispMAC), DstIP: LinkLocal(boxMAC),
		SrcPort: serverPort, DstPort: clientPort, Payload: payload}
	if mutate != nil {
		mutate(&f)
	}
	return f.Marshal()
}

func TestDecodeFrame(t *testing.T) {
	payload := []byte{7, 1, 2, 3} // a Reply header
	good := replyFrame(payload, nil)
	for _, tc := range []struct {
		name  string
		frame []byte
		why   string
	}{
		{"reply", good, ""},
		{"to ff02::1:2", replyFrame(payload, func(f *dhcpclient.Frame) { f.DstMAC, f.DstIP = allServersMAC, allServers }), ""},
		{"short", good[:ethHdrLen+ipv6HdrLen+4], dhcpclient.DropShort},
		{"ipv4", withByte(good, 12, 0x08, 13, 0x00), dhcpclient.DropNotIPv6},
		{"version 4", withByte(good, ethHdrLen, 0x40), dhcpclient.DropBadIPHeader},
		{"payload length past the end", withByte(good, ethHdrLen+4, 0x10), dhcpclient.DropBadIPHeader},
		{"extension header", withByte(good, ethHdrLen+6, 0), dhcpclient.DropNotUDP},
		{"other MAC", replyFrame(payload, func(f *dhcpclient.Frame) { f.DstMAC = ispMAC }), dhcpclient.DropNotForUs},
		{"other address", replyFrame(payload, func(f *dhcpclient.Frame) { f.DstIP = netip.MustParseAddr("fe80::9") }), dhcpclient.DropNotForUs},
		{"udp length short", withByte(good, ethHdrLen+ipv6HdrLen+5, 4), dhcpclient.DropBadUDPLength},
		{"checksum", withByte(good, len(good)-1, 0xff), dhcpclient.DropBadUDPChecksum},
		{"zero checksum", withByte(good, ethHdrLen+ipv6HdrLen+6, 0, ethHdrLen+ipv6HdrLen+7, 0), dhcpclient.DropBadUDPChecksum},
		{"wrong port", replyFrame(payload, func(f *dhcpclient.Frame) { f.SrcPort = 53 }), dhcpclient.DropWrongPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, why := decodeFrame(tc.frame, boxMAC, LinkLocal(boxMAC), false)
			if why != tc.why {
				t.Fatalf("why = %q, want %q", why, tc.why)
			}
			if why == "" && (!bytes.Equal(r.Payload, payload) || r.SrcIP != LinkLocal(ispMAC) || r.SrcMAC.String() != ispMAC.String()) {
				t.Errorf("decoded %+v, want payload %x from %v", r, payload, LinkLocal(ispMAC))
			}
		})
	}
}

// withByte returns a copy of b with b[i] = v for each pair.
func withByte(b []byte, iv ...int) []byte {
	c := bytes.Clone(b)
	for k := 0; k < len(iv); k += 2 {
		c[iv[k]] = byte(iv[k+1])
	}
	return c
}

func ipnet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func reply(iaid [4]byte, t1, t2 time.Duration, prefixes ...*dhcpv6.OptIAPrefix) *dhcpv6.Message {
	m, _ := dhcpv6.NewMessage()
	m.MessageType = dhcpv6.MessageTypeReply
	pd := &dhcpv6.OptIAPD{IaId: iaid, T1: t1, T2: t2}
	for _, p := range prefixes {
		pd.Options.Add(p)
	}
	m.AddOption(pd)
	m.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ispMAC}))
	return m
}

func TestMerge(t *testing.T) {
	iaid := [4]byte{0, 0, 0, 1}
	p := func(s string, pref, valid time.Duration) *dhcpv6.OptIAPrefix {
		return &dhcpv6.OptIAPrefix{Prefix: ipnet(s), PreferredLifetime: pref, ValidLifetime: valid}
	}
	old := &Lease{Prefixes: []Prefix{
		{netip.MustParsePrefix("2001:db8:1::/56"), t0.Add(time.Hour), t0.Add(2 * time.Hour)},
		{netip.MustParsePrefix("2001:db8:2::/56"), t0.Add(time.Hour), t0.Add(2 * time.Hour)},
	}}
	at := t0.Add(10 * time.Minute)
	msg := reply(iaid, 0, 0,
		p("2001:db8:1::/56", 0, 0),                      // taken back
		p("2001:db8:3::/56", 30*time.Minute, time.Hour), // new
		p("2001:db8:4::/56", 2*time.Hour, time.Hour),    // preferred > valid: ignored
		p("2001:db8:5::/72", time.Hour, time.Hour),      // longer than /64: ignored
		p("fe80::/56", time.Hour, time.Hour))            // not global: ignored
	msg.AddOption(&dhcpv6.OptIAPD{IaId: [4]byte{9, 9, 9, 9}, Options: dhcpv6.PDOptions{Options: dhcpv6.Options{p("2001:db8:9::/56", time.Hour, time.Hour)}}})
	got := merge(old, msg, iaid, at, at)
	want := []Prefix{
		{netip.MustParsePrefix("2001:db8:3::/56"), at.Add(30 * time.Minute), at.Add(time.Hour)},
		{netip.MustParsePrefix("2001:db8:2::/56"), t0.Add(time.Hour), t0.Add(2 * time.Hour)}, // not mentioned: kept
	}
	if diff := cmp.Diff(want, got.Prefixes, addrCmp); diff != "" {
		t.Errorf("prefixes (-want +got):\n%s", diff)
	}
	// T1 and T2 from 0.5 and 0.8 of the shortest preferred lifetime (the
	// kept prefix's 50 min left, the new one's 30 min).
	if got.T1 != at.Add(15*time.Minute) || got.T2 != at.Add(24*time.Minute) {
		t.Errorf("T1 %v T2 %v, want +15m and +24m", got.T1.Sub(at), got.T2.Sub(at))
	}
	got = merge(nil, reply(iaid, 100*time.Second, 200*time.Second, p("2001:db8:3::/56", time.Hour, 2*time.Hour)), iaid, at, at)
	if got.T1 != at.Add(100*time.Second) || got.T2 != at.Add(200*time.Second) {
		t.Errorf("server's T1 %v T2 %v, want 100s and 200s", got.T1.Sub(at), got.T2.Sub(at))
	}
	got = merge(nil, reply(iaid, infinite, infinite, p("2001:db8:3::/56", infinite, infinite)), iaid, at, at)
	if !got.T1.After(at.AddDate(50, 0, 0)) || !got.Expiry().After(at.AddDate(50, 0, 0)) {
		t.Errorf("infinite lifetimes: T1 %v expiry %v, want never", got.T1, got.Expiry())
	}
}

func TestDUIDKept(t *testing.T) {
	dir := t.TempDir()
	d1, err := loadDUID(dir, boxMAC, t0)
	if err != nil {
		t.Fatal(err)
	}
	if d1.DUIDType() != dhcpv6.DUID_LLT {
		t.Errorf("DUID type %v, want DUID-LLT", d1.DUIDType())
	}
	d2, err := loadDUID(dir, net.HardwareAddr{2, 0, 0, 0, 0, 9}, t0.Add(time.Hour))
	if err != nil || !bytes.Equal(d1.ToBytes(), d2.ToBytes()) {
		t.Errorf("second load %v, %v; want the kept %v (even with another MAC)", d2, err, d1)
	}
	ll, _ := loadDUID("", boxMAC, t0)
	if ll.DUIDType() != dhcpv6.DUID_LL {
		t.Errorf("without a state dir: %v, want DUID-LL", ll)
	}
	os.WriteFile(filepath.Join(dir, duidFile), []byte("zz\n"), 0o644)
	if _, err := loadDUID(dir, boxMAC, t0); err == nil {
		t.Error("a corrupt DUID file loaded")
	}
}

func TestLeaseFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	duid, _ := loadDUID("", boxMAC, t0)
	iaid := [4]byte{0, 0, 0, 1}
	l := &Lease{
		Prefixes: []Prefix{{netip.MustParsePrefix("2001:db8:100::/56"), t0.Add(time.Hour), t0.Add(2 * time.Hour)}},
		Addrs:    []Address{{netip.MustParseAddr("2001:db8::5"), t0.Add(time.Hour), t0.Add(2 * time.Hour)}},
		DNS:      []netip.Addr{netip.MustParseAddr("2001:db8::53")}, Domains: []string{"example.net"},
		ServerID: []byte{0, 3, 0, 1, 2, 3, 4, 5, 6, 7}, Server: LinkLocal(ispMAC), ServerMAC: ispMAC,
		Obtained: t0, T1: t0.Add(30 * time.Minute), T2: t0.Add(48 * time.Minute),
	}
	if err := saveLease(dir, duid, iaid, l); err != nil {
		t.Fatal(err)
	}
	got, err := loadLease(dir, duid, iaid)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got, addrCmp); diff != "" {
		t.Errorf("lease (-want +got):\n%s", diff)
	}
	if _, err := loadLease(dir, duid, [4]byte{9}); err == nil {
		t.Error("a lease for another IAID loaded")
	}
	if err := saveLease(dir, duid, iaid, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := loadLease(dir, duid, iaid); got != nil || err != nil {
		t.Errorf("after removal: %v, %v; want none", got, err)
	}
}
