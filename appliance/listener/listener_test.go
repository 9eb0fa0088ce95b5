package listener

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
)

// TestAddresses: the -listen flag and a dashboard.listen with an address
// listen exactly there; a port alone listens on the host port's every
// address and the other non-data interfaces' loopback, private and
// link-local ones, never on a data port.
func TestAddresses(t *testing.T) {
	a := netip.MustParseAddr
	ifs := []ifaceAddrs{
		{"lo", []netip.Addr{a("127.0.0.1"), a("::1")}},
		{"eth0", []netip.Addr{a("10.0.0.5"), a("203.0.113.9"), a("fe80::1")}}, // the management port
		{"eth1", []netip.Addr{a("192.168.1.1")}},                              // a data port
		{"e1khost0", []netip.Addr{a("198.51.100.1"), a("192.168.1.2")}},       // the host port
	}
	cfg := func(listen string) *config.Config {
		return &config.Config{Dashboard: config.Dashboard{Listen: listen},
			Ports:    []config.Port{{Name: "lan", Interface: "eth1"}, {Name: "off", Interface: "eth2"}},
			HostPort: &config.HostPort{Name: "host", Interface: "e1khost0"}}
	}
	for _, tc := range []struct {
		name, flag, listen string
		want               []string
	}{
		{"the flag", "127.0.0.1:9090", ":8080", []string{"127.0.0.1:9090"}},
		{"an address in the config", "", "192.168.1.2:8080", []string{"192.168.1.2:8080"}},
		{"a port", "", ":8080", []string{"10.0.0.5:8080", "127.0.0.1:8080", "192.168.1.2:8080", "198.51.100.1:8080",
			"[::1]:8080", "[fe80::1%eth0]:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := specFor(tc.flag, cfg(tc.listen))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.addresses(ifs)); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := specFor("", cfg("8080")); err == nil {
		t.Error("dashboard.listen 8080 (no colon): no error")
	}
}
