package router

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
)

// TestV6DNS: the LAN is told the box's preferred LAN address and the local
// domain while the box's DNS runs, the ISP's servers and domains
// otherwise.
func TestV6DNS(t *testing.T) {
	cur := BoxAddr{Prefix: netip.MustParsePrefix("2001:db8:2::1/64")}
	old := BoxAddr{Prefix: netip.MustParsePrefix("2001:db8:1::1/64"), Deprecated: true}
	isp := &dhcp6c.Lease{DNS: []netip.Addr{netip.MustParseAddr("2001:db8:64::53")}, Domains: []string{"isp.example"}}
	for _, tc := range []struct {
		name        string
		dnsOn       bool
		box         []BoxAddr
		lease       *dhcp6c.Lease
		wantDNS     []netip.Addr
		wantDomains []string
	}{
		{"box DNS", true, []BoxAddr{cur, old}, isp, []netip.Addr{cur.Prefix.Addr()}, []string{"home"}},
		{"box DNS, current after the deprecated", true, []BoxAddr{old, cur}, isp, []netip.Addr{cur.Prefix.Addr()}, []string{"home"}},
		{"box DNS, only a deprecated address", true, []BoxAddr{old}, isp, nil, []string{"home"}},
		{"box DNS off", false, []BoxAddr{cur}, isp, isp.DNS, isp.Domains},
		{"box DNS off, no lease", false, []BoxAddr{cur}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Router{cfg: &config.Config{DNS: config.DNSServer{Domain: "home"}}}
			r.dns.on = tc.dnsOn
			r.v6.box, r.v6.lease = tc.box, tc.lease
			dns, domains := r.v6DNS()
			if diff := cmp.Diff(tc.wantDNS, dns, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("DNS servers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDomains, domains); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBoxLANAddr(t *testing.T) {
	for _, tc := range []struct{ lan, want string }{
		{"2001:db8:6600::/64", "2001:db8:6600::1/64"},
		{"2001:db8:6600:ff::/64", "2001:db8:6600:ff::1/64"},
		{"2001:db8:6600:1:2:3:4:5/64", "2001:db8:6600:1::1/64"},
	} {
		if got := BoxLANAddr(netip.MustParsePrefix(tc.lan)); got != netip.MustParsePrefix(tc.want) {
			t.Errorf("BoxLANAddr(%s) = %v, want %s", tc.lan, got, tc.want)
		}
	}
}

// TestSLAACSecret: the secret is made once (32 random bytes, hex, mode
// 0600) and read back after; an unusable file is replaced; without a
// writable directory it is still made, for this run only.
func TestSLAACSecret(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	first := slaacSecret(dir, log)
	path := filepath.Join(dir, slaacSecretFile)
	fi, err := os.Stat(path)
	if len(first) != 32 || err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("first secret %x (%d bytes), file %v %v; want 32 bytes kept with mode 0600", first, len(first), fi, err)
	}
	if again := slaacSecret(dir, log); !bytes.Equal(again, first) {
		t.Errorf("second read %x, want the kept %x", again, first)
	}
	if other := slaacSecret(t.TempDir(), log); bytes.Equal(other, first) {
		t.Error("another state directory made the same secret")
	}
	os.WriteFile(path, []byte("not hex\n"), 0o600)
	if fresh := slaacSecret(dir, log); len(fresh) != 32 || bytes.Equal(fresh, first) {
		t.Errorf("after a corrupt file: %x, want a new 32-byte secret", fresh)
	}
	if s := slaacSecret(filepath.Join(dir, "missing", "dir"), log); len(s) != 32 {
		t.Errorf("without a usable directory: %x, want a 32-byte secret for this run", s)
	}
}
