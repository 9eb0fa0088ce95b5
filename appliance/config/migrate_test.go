package config

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/rules"
)

func TestMigrateV1(t *testing.T) {
	b, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(v1.json): %v", err)
	}
	rs, err := rules.Parse("policy forward drop\niif port1 tcp dport 22 accept comment \"ssh\"\n")
	if err != nil {
		t.Fatal(err)
	}
	rs.Rules[0].Line = 0
	want := &Config{
		Version: Version,
		Mode:    ModeBridge,
		Ports: []Port{
			{Name: "port1", Interface: "eth1", MTU: 1500, Enabled: ptr(true)},
			{Name: "port2", Interface: "eth2", MTU: 9000, Enabled: ptr(false)},
		},
		Bridge: Bridge{FDBAging: Duration(600 * time.Second), FDBSize: DefaultFDBSize},
		NAT: NAT{
			MasqueradePorts: DefaultMasqueradePorts,
			Conntrack:       Conntrack{Size: DefaultConntrackSize, Timeouts: DefaultTimeouts},
			MSSClamp:        ptr(true),
		},
		Rules:     *rs,
		Dashboard: Dashboard{Listen: ":8080", ConfirmTimeout: Duration(DefaultConfirmTimeout)},
		DHCP:      DHCPServer{Enabled: ptr(false), LeaseTime: Duration(DefaultLeaseTime), Probation: Duration(DefaultProbation), UnprovenShare: DefaultUnprovenShare, NewDevicesPerSecond: DefaultNewDevicesPerSecond},
		DNS:       DNSServer{Enabled: ptr(false), Domain: DefaultDomain, CacheSize: DefaultDNSCacheSize},
		Time:      Time{Servers: DefaultNTPServers, FromDHCP: ptr(true)},
		FastPath:  FastPathAuto,
		IPv6:      IPv6{Enabled: ptr(false), PrefixLength: DefaultIPv6PrefixLength, DHCPServer: ptr(false), WANAddress: WANAddressAuto},
	}
	if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
		t.Errorf("migrated v1.json (-want +got):\n%s", diff)
	}
	if err := got.Validate(testEnv); err != nil {
		t.Errorf("migrated config does not validate: %v", err)
	}
	// The migrated config is written as version 2 and reads back equal.
	m, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(m)
	if err != nil {
		t.Fatalf("Parse(Marshal(migrated)): %v", err)
	}
	if again.Version != Version {
		t.Errorf("re-parsed version %d", again.Version)
	}
	if diff := cmp.Diff(got, again, cmpConfig); diff != "" {
		t.Errorf("migrated round trip (-want +got):\n%s", diff)
	}
}

func TestMigrateV1Errors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Errors
	}{
		{
			name: "nat mode",
			json: `{"version": 1, "mode": "nat", "ports": []}`,
			want: Errors{{Path: "mode", Message: `version 1 has bridge mode only, got "nat" (write a version 3 config for nat)`}},
		},
		{
			name: "bad rules text",
			json: `{"version": 1, "rules": "tcp dport 2000-1000 drop\nfoo\n"}`,
			want: Errors{
				{Path: "rules", Message: "1:11: tcp dport: range 2000-1000 is reversed (want 1000-2000)"},
				{Path: "rules", Message: `2:1: unknown keyword "foo"`},
			},
		},
		{
			name: "negative aging",
			json: `{"version": 1, "fdbAgingSeconds": -1}`,
			want: Errors{{Path: "fdbAgingSeconds", Message: "negative (-1); want seconds, e.g. 300"}},
		},
		{
			name: "version 2 fields are unknown in version 1",
			json: `{"version": 1, "ports": [{"name": "a", "interface": "eth1", "role": "lan"}], "nat": {}}`,
			want: Errors{
				{Path: "ports[0].role", Message: `unknown field "role" (known fields: enabled, interface, mtu, name)`},
				{Path: "nat", Message: `unknown field "nat" (known fields: dashboard, fdbAgingSeconds, mode, ports, rules, version)`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			got := AsErrors(err)
			if tt.name == "bad rules text" {
				// The rules package words its own messages; check the
				// paths and that each message carries a line number.
				for i := range got {
					if len(got[i].Message) < 2 || got[i].Message[1] != ':' {
						t.Errorf("rules error without position: %q", got[i].Message)
					}
					got[i].Message, tt.want[i].Message = "", ""
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFactoryConfig checks the factory config shipped in the repository's
// gokrazy config.json: it parses (migrating an older version) and validates.
func TestFactoryConfig(t *testing.T) {
	b, err := os.ReadFile("../../config.json")
	if err != nil {
		t.Fatal(err)
	}
	var inst struct {
		PackageConfig map[string]struct {
			ExtraFileContents map[string]string
		}
	}
	if err := json.Unmarshal(b, &inst); err != nil {
		t.Fatal(err)
	}
	factory, ok := inst.PackageConfig["e1kbox/appliance"].ExtraFileContents[DefaultPaths().Factory]
	if !ok {
		t.Fatalf("config.json has no %s for e1kbox/appliance", DefaultPaths().Factory)
	}
	c, err := Parse([]byte(factory))
	if err != nil {
		t.Fatalf("Parse(factory): %v", err)
	}
	if err := c.Validate(Env{Interfaces: []string{"lo", "eth0", "eth1", "eth2"}}); err != nil {
		t.Errorf("factory config does not validate: %v", err)
	}
	if c.Mode != ModeBridge || len(c.Ports) < 2 {
		t.Errorf("factory config: mode %s with %d ports, want a bridge of at least two ports", c.Mode, len(c.Ports))
	}
}
