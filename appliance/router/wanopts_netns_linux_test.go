package router

import (
	"log/slog"
	"strings"
	"testing"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestApplyWANOptions: Apply restarts the WAN DHCPv4 client when
// nat.wan.dhcp changes and the DHCPv6 client when nat.wan.dhcpv6 does,
// each leaving the other running, and the config diff of either is live.
// Apply runs in a namespace that has the WAN and host ports' interfaces
// (the clients it starts run outside it and fail to open their sockets:
// only which client runs is checked here).
func TestApplyWANOptions(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := netnstest.New(t, "wanopts")
	netnstest.Veth(t, netnstest.End{NS: ns, Name: "e1kwo-wan", MAC: "02:00:00:00:0a:01", Up: true},
		netnstest.End{NS: ns, Name: "e1kwo-isp", Up: true})
	netnstest.Veth(t, netnstest.End{NS: ns, Name: "e1kwo-host", Up: true}, netnstest.End{NS: ns, Name: "e1kwo-hp", Up: true})
	doc := strings.NewReplacer(`"eth0"`, `"e1kwo-wan"`, `"e1khost0"`, `"e1kwo-host"`,
		`"ipv6": {"enabled": true}`, `"ipv6": {"enabled": true}, "dhcp": {"enabled": false}, "dns": {"enabled": false},
		"time": {"servers": ["127.0.0.1"]}`).Replace(wanOptsConfig)
	r := New(Options{Log: slog.New(slog.DiscardHandler), State: t.TempDir(), Hostname: "box",
		OnLease: func(*wanclient.Lease) {}})
	t.Cleanup(r.Close)
	apply := func(want config.Effect, edit func(*config.Config)) *Live {
		t.Helper()
		cfg := parse(t, doc)
		edit(cfg)
		if err := cfg.Validate(config.Env{}); err != nil {
			t.Fatalf("the edited config is not valid: %v", err)
		}
		if old := r.Live(); old != nil {
			if e := config.Diff(old.Config, cfg).Effect; e != want {
				t.Errorf("Diff's effect %s, want %s", e, want)
			}
		}
		ns.Do(t, func() { r.Apply(cfg) }) // the RA daemon's error outside the namespace is not this test's
		l := r.Live()
		if l.WAN == nil || l.DHCP6 == nil {
			t.Fatalf("WAN client %v, DHCPv6 client %v: want both running", l.WAN, l.DHCP6)
		}
		return l
	}
	first := apply(config.Restart, func(*config.Config) {})
	same := apply(config.Unchanged, func(*config.Config) {})
	if same.WAN != first.WAN || same.DHCP6 != first.DHCP6 {
		t.Errorf("the same config restarted a client")
	}
	v4 := apply(config.Live, func(c *config.Config) { c.NAT.WAN.DHCP.VendorClass = "other-vendor" })
	if v4.WAN == same.WAN || v4.DHCP6 != same.DHCP6 {
		t.Errorf("a new vendor class: WAN client restarted %v (want true), DHCPv6 client %v (want false)",
			v4.WAN != same.WAN, v4.DHCP6 != same.DHCP6)
	}
	v6 := apply(config.Live, func(c *config.Config) {
		c.NAT.WAN.DHCP.VendorClass = "other-vendor"
		c.NAT.WAN.DHCPv6.UserClass = []string{"other"}
	})
	if v6.WAN != v4.WAN || v6.DHCP6 == v4.DHCP6 {
		t.Errorf("a new DHCPv6 user class: WAN client restarted %v (want false), DHCPv6 client %v (want true)",
			v6.WAN != v4.WAN, v6.DHCP6 != v4.DHCP6)
	}
}
