package wanclient

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/services/dhcpclient"
)

func TestLeaseFromACK(t *testing.T) {
	s := time.Second
	ack := func(yiaddr string, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
		req := &dhcpv4.DHCPv4{ClientHWAddr: clientMAC, ClientIPAddr: net.IPv4zero}
		m := srv.msg(req, dhcpv4.MessageTypeAck, netip.MustParseAddr(yiaddr), opts...)
		return m
	}
	lt := func(d time.Duration) dhcpv4.Option { return dhcpv4.OptIPAddressLeaseTime(d) }
	mask := func(n int) dhcpv4.Option { return dhcpv4.OptSubnetMask(net.CIDRMask(n, 32)) }
	base := func(addr string, mod func(*Lease)) *Lease {
		l := &Lease{
			Addr: netip.MustParsePrefix(addr), Server: serverIP, ServerMAC: serverMAC,
			Obtained: epoch, T1: epoch.Add(50 * s), T2: epoch.Add(87500 * time.Millisecond), Expiry: epoch.Add(100 * s),
		}
		if mod != nil {
			mod(l)
		}
		return l
	}
	for _, tc := range []struct {
		name    string
		ack     *dhcpv4.DHCPv4
		srcIP   netip.Addr
		want    *Lease
		wantErr bool
	}{
		{name: "defaults", ack: ack("192.0.2.100", lt(100*s), mask(24)), want: base("192.0.2.100/24", nil)},
		{name: "everything", ack: ack("192.0.2.100", leaseOpts()...), want: wantLease(0)},
		{name: "T1 and T2 given", ack: ack("192.0.2.100", lt(100*s), mask(24), dhcpv4.OptRenewTimeValue(10*s), dhcpv4.OptRebindingTimeValue(20*s)),
			want: base("192.0.2.100/24", func(l *Lease) { l.T1, l.T2 = epoch.Add(10*s), epoch.Add(20*s) })},
		{name: "T1 after T2", ack: ack("192.0.2.100", lt(100*s), mask(24), dhcpv4.OptRenewTimeValue(30*s), dhcpv4.OptRebindingTimeValue(21*s)),
			want: base("192.0.2.100/24", func(l *Lease) { l.T1, l.T2 = epoch.Add(12*s), epoch.Add(21*s) })},
		{name: "T2 past the lease", ack: ack("192.0.2.100", lt(100*s), mask(24), dhcpv4.OptRebindingTimeValue(200*s)),
			want: base("192.0.2.100/24", nil)},
		{name: "infinite", ack: ack("192.0.2.100", lt(0xffffffff*s), mask(24)),
			want: base("192.0.2.100/24", func(l *Lease) {
				l.T1, l.T2, l.Expiry = epoch.Add(0xffffffff*s/2), epoch.Add(0xffffffff*s/8*7), epoch.Add(0xffffffff*s)
			})},
		{name: "classful A", ack: ack("10.1.2.3", lt(100*s)), want: base("10.1.2.3/8", nil)},
		{name: "classful B", ack: ack("172.16.2.3", lt(100*s)), want: base("172.16.2.3/16", nil)},
		{name: "classful C", ack: ack("192.168.2.3", lt(100*s)), want: base("192.168.2.3/24", nil)},
		{name: "/32", ack: ack("192.0.2.100", lt(100*s), mask(32)), want: base("192.0.2.100/32", nil)},
		{name: "tiny MTU ignored", ack: ack("192.0.2.100", lt(100*s), mask(24), dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0, 60})),
			want: base("192.0.2.100/24", nil)},
		{name: "odd servers dropped", ack: ack("192.0.2.100", lt(100*s), mask(24),
			dhcpv4.OptDNS(net.IPv4zero, net.IPv4(192, 0, 2, 53), net.IPv4bcast), dhcpv4.OptRouter(net.IPv4(224, 0, 0, 1), net.IPv4(192, 0, 2, 1))),
			want: base("192.0.2.100/24", func(l *Lease) {
				l.DNS = []netip.Addr{netip.MustParseAddr("192.0.2.53")}
				l.Gateway = netip.MustParseAddr("192.0.2.1")
			})},
		{name: "domain with NUL", ack: ack("192.0.2.100", lt(100*s), mask(24), dhcpv4.OptDomainName("isp.example\x00")),
			want: base("192.0.2.100/24", func(l *Lease) { l.Domain = "isp.example" })},
		{name: "server id from the source", ack: func() *dhcpv4.DHCPv4 {
			m := ack("192.0.2.100", lt(100*s), mask(24))
			m.Options.Del(dhcpv4.OptionServerIdentifier)
			return m
		}(), srcIP: netip.MustParseAddr("192.0.2.9"), want: base("192.0.2.100/24", func(l *Lease) { l.Server = netip.MustParseAddr("192.0.2.9") })},
		{name: "no server at all", ack: func() *dhcpv4.DHCPv4 {
			m := ack("192.0.2.100", lt(100*s), mask(24))
			m.Options.Del(dhcpv4.OptionServerIdentifier)
			return m
		}(), srcIP: zeroAddr, wantErr: true},
		{name: "no lease time", ack: ack("192.0.2.100", mask(24)), wantErr: true},
		{name: "zero lease time", ack: ack("192.0.2.100", lt(0), mask(24)), wantErr: true},
		{name: "short lease time", ack: ack("192.0.2.100", mask(24), dhcpv4.OptGeneric(dhcpv4.OptionIPAddressLeaseTime, []byte{1, 2})), wantErr: true},
		{name: "no address", ack: ack("0.0.0.0", lt(100*s), mask(24)), wantErr: true},
		{name: "broadcast address", ack: ack("255.255.255.255", lt(100*s), mask(24)), wantErr: true},
		{name: "non-contiguous mask", ack: ack("192.0.2.100", lt(100*s), dhcpv4.OptGeneric(dhcpv4.OptionSubnetMask, []byte{255, 0, 255, 0})), wantErr: true},
		{name: "zero mask", ack: ack("192.0.2.100", lt(100*s), mask(0)), wantErr: true},
		{name: "short mask", ack: ack("192.0.2.100", lt(100*s), dhcpv4.OptGeneric(dhcpv4.OptionSubnetMask, []byte{255, 255})), wantErr: true},
	} {
		got, err := leaseFromACK(tc.ack, serverMAC, tc.srcIP, epoch)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: got lease %+v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, leaseCmp); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestSameConfig(t *testing.T) {
	a := wantLease(0)
	for _, tc := range []struct {
		name string
		mod  func(*Lease)
		same bool
	}{
		{"times and server", func(l *Lease) {
			l.Obtained, l.Expiry, l.Server, l.ServerMAC = l.Obtained.Add(time.Hour), l.Expiry.Add(time.Hour), zeroAddr, otherMAC
		}, true},
		{"addr", func(l *Lease) { l.Addr = netip.MustParsePrefix("192.0.2.101/24") }, false},
		{"mask", func(l *Lease) { l.Addr = netip.MustParsePrefix("192.0.2.100/25") }, false},
		{"gateway", func(l *Lease) { l.Gateway = netip.Addr{} }, false},
		{"dns order", func(l *Lease) { l.DNS[0], l.DNS[1] = l.DNS[1], l.DNS[0] }, false},
		{"ntp", func(l *Lease) { l.NTP = nil }, false},
		{"mtu", func(l *Lease) { l.MTU = 0 }, false},
		{"domain", func(l *Lease) { l.Domain = "x" }, false},
	} {
		b := a.Clone()
		tc.mod(b)
		if got := sameConfig(a, b); got != tc.same {
			t.Errorf("%s: sameConfig = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func TestClone(t *testing.T) {
	a := wantLease(0)
	b := a.Clone()
	b.DNS[0], b.NTP[0], b.ServerMAC[0] = zeroAddr, zeroAddr, 0xff
	if diff := cmp.Diff(wantLease(0), a, leaseCmp); diff != "" {
		t.Errorf("changing the clone changed the lease (-want +got):\n%s", diff)
	}
	if (*Lease)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
}

func TestLeaseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "wan.lease") // the directory is made
	l := wantLease(0)
	l.Obtained = time.Now() // with a monotonic reading, which is not stored
	l.T1, l.T2, l.Expiry = l.Obtained.Add(time.Minute), l.Obtained.Add(2*time.Minute), l.Obtained.Add(3*time.Minute)
	if err := saveLease(path, clientMAC, l); err != nil {
		t.Fatal(err)
	}
	got, err := loadLease(path, clientMAC)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got, leaseCmp); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	// A second write replaces it and leaves no temp file behind.
	l.DNS = nil
	if err := saveLease(path, clientMAC, l); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want just the lease file", len(entries))
	}
	if _, err := loadLease(path, otherMAC); !errors.Is(err, errOtherMAC) {
		t.Errorf("load for another MAC: %v, want errOtherMAC", err)
	}
	if err := dhcpclient.RemoveFile(path); err != nil {
		t.Fatal(err)
	}
	if got, err := loadLease(path, clientMAC); got != nil || err != nil {
		t.Errorf("after remove: %v, %v; want no lease and no error", got, err)
	}
	if err := dhcpclient.RemoveFile(path); err != nil {
		t.Errorf("removing a missing lease file: %v", err)
	}
}

func TestDecodeLeaseRejects(t *testing.T) {
	good, err := encodeLease(clientMAC, wantLease(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeLease(good, clientMAC); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Lease)
	}{
		{"no addr", func(l *Lease) { l.Addr = netip.Prefix{} }},
		{"zero addr", func(l *Lease) { l.Addr = netip.MustParsePrefix("0.0.0.0/24") }},
		{"no server", func(l *Lease) { l.Server = netip.Addr{} }},
		{"multicast gateway", func(l *Lease) { l.Gateway = netip.MustParseAddr("224.0.0.1") }},
		{"mtu", func(l *Lease) { l.MTU = 20 }},
		{"T1 before obtained", func(l *Lease) { l.T1 = l.Obtained.Add(-time.Second) }},
		{"T2 before T1", func(l *Lease) { l.T2 = l.T1.Add(-time.Second) }},
		{"expiry at T2", func(l *Lease) { l.Expiry = l.T2 }},
		{"bad dns", func(l *Lease) { l.DNS = []netip.Addr{zeroAddr} }},
		{"IPv6", func(l *Lease) { l.Addr = netip.MustParsePrefix("2001:db8::1/64") }},
	} {
		l := wantLease(0)
		tc.mod(l)
		b, err := encodeLease(clientMAC, l)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, err := decodeLease(b, clientMAC); err == nil {
			t.Errorf("%s: decoded %+v", tc.name, got)
		}
	}
	for _, raw := range []string{"", "{", `{"mac": "zz"}`, `{"mac": "02:00:00:00:00:01", "server_mac": "1"}`} {
		if _, err := decodeLease([]byte(raw), clientMAC); err == nil {
			t.Errorf("%q decoded", raw)
		}
	}
}
