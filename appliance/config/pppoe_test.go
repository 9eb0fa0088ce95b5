package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// pppoeWAN makes c's WAN a PPPoE link with credentials.
func pppoeWAN(c *Config) {
	c.Ports[0].Addresses = nil
	c.NAT.Gateway = netip.Addr{}
	c.NAT.WANDHCP = false
	c.IPv6.Enabled = ptr(false)
	c.NAT.WAN.PPPoE = &WANPPPoE{Username: "user@isp", Password: "secret"}
}

// TestValidatePPPoE checks nat.wan.pppoe (pppoe.go).
func TestValidatePPPoE(t *testing.T) {
	runValidate(t, []validateCase{
		{name: "PPPoE WAN", edit: pppoeWAN, want: map[string]string{}},
		{name: "on VLAN 7 with every option", edit: func(c *Config) {
			pppoeWAN(c)
			c.NAT.WAN.VLAN = LinkVLAN{ID: 7, ControlPCP: 6}
			p := c.NAT.WAN.PPPoE
			p.Service, p.ACName, p.MRU, p.LCPEchoInterval, p.LCPEchoFailures = "internet", "BRAS1", 1500, Duration(5*time.Second), 5
		}, want: map[string]string{}},
		{name: "no credentials", edit: func(c *Config) {
			pppoeWAN(c)
			c.NAT.WAN.PPPoE = &WANPPPoE{}
		}, want: map[string]string{
			"nat.wan.pppoe.username": "missing",
			"nat.wan.pppoe.password": "missing",
		}},
		{name: "the placeholder without a stored password", edit: func(c *Config) {
			pppoeWAN(c)
			c.NAT.WAN.PPPoE.Password = RedactedSecret
		}, want: map[string]string{"nat.wan.pppoe.password": "stands for the stored password"}},
		{name: "with wanDHCP, static addresses and a gateway", edit: func(c *Config) {
			pppoeWAN(c)
			dhcpWAN(c)
			c.NAT.WAN.PPPoE = &WANPPPoE{Username: "u", Password: "p"}
			c.NAT.WANDHCP = true
		}, want: map[string]string{"nat.wanDHCP": "turn wanDHCP off"}},
		{name: "static WAN address and gateway", edit: func(c *Config) {
			e := example(t)
			pppoeWAN(c)
			c.Ports[0].Addresses = e.Ports[0].Addresses
			c.NAT.Gateway = e.NAT.Gateway
		}, want: map[string]string{
			"ports[0].addresses": "nat.wan.pppoe gives the WAN address",
			"nat.gateway":        "the PPP peer",
		}},
		{name: "IPv6 on", edit: func(c *Config) {
			pppoeWAN(c)
			c.IPv6.Enabled = ptr(true)
		}},
		{name: "IPv6 with a gateway", edit: func(c *Config) {
			pppoeWAN(c)
			c.IPv6.Enabled = ptr(true)
			c.IPv6.Gateway = netip.MustParseAddr("fe80::1")
		}, want: map[string]string{"ipv6.gateway": "the IPv6 gateway is the PPP peer"}},
		{name: "out of range", edit: func(c *Config) {
			pppoeWAN(c)
			p := c.NAT.WAN.PPPoE
			p.MRU, p.LCPEchoInterval, p.LCPEchoFailures = 1501, Duration(time.Millisecond), 101
			p.ACName = strings.Repeat("a", 256)
		}, want: map[string]string{
			"nat.wan.pppoe.mru":             "1501 out of range 1280..1500",
			"nat.wan.pppoe.lcpEchoInterval": "out of range 1s..5m0s",
			"nat.wan.pppoe.lcpEchoFailures": "101 out of range 1..100",
			"nat.wan.pppoe.acName":          "256 bytes; at most 255",
		}},
		{name: "bridge mode", bridge: true, edit: func(c *Config) {
			c.NAT.WAN.PPPoE = &WANPPPoE{Username: "u", Password: "p"}
		}, want: map[string]string{"nat.wan.pppoe": "PPPoE needs mode \"nat\""}},
	})
}

func TestPPPoEDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        WANPPPoE
		mru      int
		interval time.Duration
		failures int
	}{
		{"defaults", WANPPPoE{}, 1492, 10 * time.Second, 3},
		{"set", WANPPPoE{MRU: 1500, LCPEchoInterval: Duration(time.Second), LCPEchoFailures: 7}, 1500, time.Second, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.EffectiveMRU(); got != tc.mru {
				t.Errorf("EffectiveMRU = %d, want %d", got, tc.mru)
			}
			if got := tc.p.EchoInterval(); got != tc.interval {
				t.Errorf("EchoInterval = %s, want %s", got, tc.interval)
			}
			if got := tc.p.EchoFailures(); got != tc.failures {
				t.Errorf("EchoFailures = %d, want %d", got, tc.failures)
			}
		})
	}
}

// TestDiffPPPoE: a PPPoE change restarts the PPPoE client only; PPPoE on
// or off also the WAN port.
func TestDiffPPPoE(t *testing.T) {
	restart := Changes{NAT: true, PPPoE: true, Effect: RestartPorts, Restart: []string{"wan"},
		Why: []string{"nat.wan.pppoe: a PPPoE WAN on or off restarts the WAN port"}}
	on := &WANPPPoE{Username: "u", Password: "p"}
	for _, tc := range []struct {
		name     string
		old, new *WANPPPoE
		want     Changes
	}{
		{"on", nil, on, restart},
		{"off", on, nil, restart},
		{"password", on, &WANPPPoE{Username: "u", Password: "q"}, Changes{NAT: true, PPPoE: true, Effect: Live}},
		{"mru", on, &WANPPPoE{Username: "u", Password: "p", MRU: 1500}, Changes{NAT: true, PPPoE: true, Effect: Live}},
		{"same", on, &WANPPPoE{Username: "u", Password: "p"}, Changes{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, new := example(t), example(t)
			old.NAT.WAN.PPPoE, new.NAT.WAN.PPPoE = tc.old, tc.new
			ch := Diff(old, new)
			if diff := cmp.Diff(tc.want, ch); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if tc.want.PPPoE && !strings.Contains(ch.String(), "pppoe") {
				t.Errorf("String %q does not name pppoe", ch.String())
			}
		})
	}
}

// TestStoreFileModes: the live config and its history hold the PPPoE
// password: only root reads them.
func TestStoreFileModes(t *testing.T) {
	s, paths := testStore(t)
	load(t, s)
	id, err := s.Apply(variant(t, 1000), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Confirm(id); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(paths.Live), "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files next to the live config (%v)", err)
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}
