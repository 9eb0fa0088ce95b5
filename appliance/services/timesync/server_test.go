package timesync

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    string // String() of the parsed server
		wantErr bool
	}{
		{spec: "192.0.2.1", want: "192.0.2.1"},
		{spec: "192.0.2.1:123", want: "192.0.2.1"},
		{spec: "192.0.2.1:1123", want: "192.0.2.1:1123"},
		{spec: "2001:db8::1", want: "2001:db8::1"},
		{spec: "[2001:db8::1]", want: "2001:db8::1"},
		{spec: "[2001:db8::1]:123", want: "2001:db8::1"},
		{spec: "[2001:db8::1]:4123", want: "[2001:db8::1]:4123"},
		{spec: "fe80::1%eth0", want: "fe80::1%eth0"},
		{spec: "[fe80::1%eth0]:123", want: "fe80::1%eth0"},
		{spec: "0.gokrazy.pool.ntp.org", want: "0.gokrazy.pool.ntp.org"},
		{spec: "NTP.Example.", want: "ntp.example"},
		{spec: "ntp.example:10123", want: "ntp.example:10123"},
		{spec: "time_1.corp", want: "time_1.corp"},
		{spec: "", wantErr: true},
		{spec: "192.0.2.1:0", wantErr: true},
		{spec: "192.0.2.1:65536", wantErr: true},
		{spec: "192.0.2.1:ntp", wantErr: true},
		{spec: "1.2.3", wantErr: true},
		{spec: "1.2.3.4.5", wantErr: true},
		{spec: "[ntp.example]:123", wantErr: true},
		{spec: "ntp..example", wantErr: true},
		{spec: "-ntp.example", wantErr: true},
		{spec: "ntp example", wantErr: true},
		{spec: "ntp.example:", wantErr: true},
		{spec: "[2001:db8::1", wantErr: true},
	} {
		s, err := parseServer(tc.spec)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseServer(%q) error %v, want error %v", tc.spec, err, tc.wantErr)
			continue
		}
		if err == nil && s.String() != tc.want {
			t.Errorf("parseServer(%q) = %q, want %q", tc.spec, s.String(), tc.want)
		}
	}
}

// FuzzParseServer checks that parseServer never panics and that what it
// accepts renders to a spec that parses back to the same server.
func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "[2001:db8::1]:123", "fe80::1%eth0", "ntp.example:10123", "0.gokrazy.pool.ntp.org", "[x]:1", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := parseServer(spec)
		if err != nil {
			return
		}
		if s.port == 0 || (s.host != "") == s.addr.IsValid() {
			t.Fatalf("parseServer(%q) = %+v: want a port and exactly one of host and address", spec, s)
		}
		back, err := parseServer(s.String())
		if err != nil {
			t.Fatalf("parseServer(%q) = %q, which does not parse: %v", spec, s, err)
		}
		if back != s {
			t.Fatalf("parseServer(%q) = %+v, but its String %q parses to %+v", spec, s, s.String(), back)
		}
	})
}

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := m[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return a, nil
}

func TestResolve(t *testing.T) {
	r := mapResolver{
		"mixed.test": {netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.2")},
		"empty.test": {},
	}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		spec    string
		want    []netip.AddrPort
		wantErr bool
	}{
		{spec: "198.51.100.7", want: []netip.AddrPort{ap("198.51.100.7:123")}},
		{spec: "mixed.test:1123", want: []netip.AddrPort{ap("192.0.2.1:1123"), ap("192.0.2.2:1123"), ap("[2001:db8::1]:1123")}},
		{spec: "empty.test", wantErr: true},
		{spec: "missing.test", wantErr: true},
	} {
		s, err := parseServer(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.resolve(context.Background(), r)
		if (err != nil) != tc.wantErr {
			t.Errorf("resolve(%q) error %v, want error %v", tc.spec, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
			t.Errorf("resolve(%q) (-want +got):\n%s", tc.spec, diff)
		}
	}
}
