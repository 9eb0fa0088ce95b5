package config

import (
	"bytes"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/rules"
)

var cmpConfig = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// TestExampleIsCanonical checks that testdata/example.json is in the form
// Marshal writes, i.e. every field and default is spelled out.
func TestExampleIsCanonical(t *testing.T) {
	want, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(example(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Marshal(Parse(example.json)) (-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"version": 2, "ports": [{"name": "p1", "interface": "eth1"}],
		"hostPort": {}, "nat": {"forwards": [{"proto": "tcp", "wanPorts": "8000-8010", "lanHost": "10.0.0.2"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Version:  Version,
		Mode:     ModeBridge,
		Ports:    []Port{{Name: "p1", Interface: "eth1", MTU: 1500, Enabled: ptr(true)}},
		HostPort: &HostPort{Name: "host", Interface: "e1khost0"},
		Bridge:   Bridge{FDBAging: Duration(300 * time.Second), FDBSize: 8192},
		NAT: NAT{
			MasqueradePorts: PortRange{1024, 65535},
			Conntrack:       Conntrack{Size: 65536, Timeouts: DefaultTimeouts},
			MSSClamp:        ptr(true),
			Forwards:        []Forward{{Proto: "tcp", WANPorts: PortRange{8000, 8010}, LANHost: netip.MustParseAddr("10.0.0.2"), LANPort: 8000}},
		},
		Rules:     rules.Ruleset{Rules: []rules.Rule{}},
		Dashboard: Dashboard{Listen: ":8080", ConfirmTimeout: Duration(60 * time.Second)},
		DHCP:      DHCPServer{Enabled: ptr(false), LeaseTime: Duration(DefaultLeaseTime), Probation: Duration(DefaultProbation), UnprovenShare: DefaultUnprovenShare, NewDevicesPerSecond: DefaultNewDevicesPerSecond},
		DNS:       DNSServer{Enabled: ptr(false), Domain: DefaultDomain, CacheSize: DefaultDNSCacheSize},
		Time:      Time{Servers: DefaultNTPServers, FromDHCP: ptr(true)},
		FastPath:  FastPathAuto,
		IPv6:      IPv6{Enabled: ptr(false), PrefixLength: DefaultIPv6PrefixLength, DHCPServer: ptr(false), WANAddress: WANAddressAuto},
	}
	if diff := cmp.Diff(want, c, cmpConfig); diff != "" {
		t.Errorf("Parse with defaults (-want +got):\n%s", diff)
	}
	if DefaultTimeouts.TCPEstablished.D() != 432000*time.Second || DefaultTimeouts.UDP.D() != 30*time.Second {
		t.Errorf("conntrack defaults differ from Linux: %+v", DefaultTimeouts)
	}
	if !c.Ports[0].IsEnabled() || !c.NAT.MSSClampOn() {
		t.Error("enabled and mssClamp do not default to true")
	}
	// Explicit false survives defaults.
	c, err = Parse([]byte(`{"version": 2, "ports": [{"name": "p1", "interface": "eth1", "enabled": false}], "nat": {"mssClamp": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ports[0].IsEnabled() || c.NAT.MSSClampOn() {
		t.Error("explicit false was overridden by a default")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Errors
	}{
		{
			name: "syntax",
			json: "{\"version\": 2,\n \"mode\": bridge}",
			want: Errors{{Message: "invalid JSON at line 2, column 10: invalid character 'b' looking for beginning of value"}},
		},
		{
			name: "not an object",
			json: `[1]`,
			want: Errors{{Message: "want a JSON object, got an array"}},
		},
		{
			name: "missing version",
			json: `{"mode": "bridge"}`,
			want: Errors{{Path: "version", Message: "missing; want 3 (this firmware reads versions 1 to 3)"}},
		},
		{
			name: "bad version",
			json: `{"version": "two"}`,
			want: Errors{{Path: "version", Message: `want an integer, got "two"`}},
		},
		{
			name: "future version",
			json: `{"version": 4}`,
			want: Errors{{Path: "version", Message: "version 4 is not supported; this firmware reads versions 1 to 3"}},
		},
		{
			name: "unknown fields everywhere",
			json: `{"version": 2, "colour": "red",
				"ports": [{"name": "a", "interface": "eth1"}, {"name": "b", "interface": "eth2", "MTU": 1500}],
				"nat": {"conntrack": {"timeouts": {"tcp": "1s"}}},
				"rules": {"rules": [{"action": "accept", "dprot": "22"}]},
				"tuning": {"ports": [{"name": "eth1", "ring": 4}]}}`,
			want: Errors{
				{Path: "colour", Message: `unknown field "colour" (known fields: bridge, dashboard, dhcp, dns, fastPath, hostPort, ipv6, mode, nat, ports, rules, time, tuning, version)`},
				{Path: "ports[1].MTU", Message: `unknown field "MTU" (did you mean "mtu"?)`},
				{Path: "nat.conntrack.timeouts.tcp", Message: `unknown field "tcp" (known fields: generic, icmp, tcpClose, tcpCloseWait, tcpEstablished, tcpFinWait, tcpLastAck, tcpSynRecv, tcpSynSent, tcpTimeWait, udp, udpStream)`},
				{Path: "rules.rules[0].dprot", Message: `unknown field "dprot" (known fields: action, chain, comment, counter, ct_state, daddr, dport, ether_daddr, ether_saddr, ether_type, icmp_code, icmp_type, iif, l4proto, log, oif, saddr, sport, tcp_flags, vlan_id)`},
				{Path: "tuning.ports[0].ring", Message: `unknown field "ring" (known fields: data, irq, itr, name, offloads, rps, rxRing, threaded, txRing)`},
			},
		},
		{
			name: "wrong types and bad values",
			json: `{"version": 2, "mode": 1,
				"ports": [{"name": "a", "interface": "eth1", "mtu": "1500", "addresses": ["10.0.0.1/33", 7],
				           "vlans": {"allowed": [70000, -1]}, "enabled": "yes"}],
				"hostPort": [],
				"bridge": {"fdbAging": "5 minutes", "static": [{"mac": "02:00", "port": "a"}]},
				"nat": {"masqueradePorts": "1024-", "gateway": "1.2.3", "forwards": {}},
				"rules": {"policy": {"sideways": "drop"}, "rules": [{"action": "maybe", "vlan_id": 1.5}]},
				"tuning": {"ports": [{"name": "eth1", "itr": true}]},
				"dashboard": {"confirmTimeout": 60}}`,
			want: Errors{
				{Path: "mode", Message: "want a string, got number"},
				{Path: "ports[0].mtu", Message: "want an integer, got string"},
				{Path: "ports[0].addresses[0]", Message: `bad prefix "10.0.0.1/33": want an address with a prefix length like "192.168.1.1/24"`},
				{Path: "ports[0].addresses[1]", Message: "want a string, got number"},
				{Path: "ports[0].vlans.allowed[0]", Message: "want an integer 0..65535, got number 70000"},
				{Path: "ports[0].vlans.allowed[1]", Message: "want an integer 0..65535, got number -1"},
				{Path: "ports[0].enabled", Message: "want true or false, got string"},
				{Path: "hostPort", Message: "want an object, got an array"},
				{Path: "bridge.fdbAging", Message: `bad duration "5 minutes" (want a Go duration like "300s" or "1m30s")`},
				{Path: "bridge.static[0].mac", Message: `bad MAC address "02:00" (want six hex bytes like 02:00:5e:10:00:01)`},
				{Path: "nat.masqueradePorts", Message: `bad port range "1024-" (want a port like "443" or a range like "1024-65535")`},
				{Path: "nat.gateway", Message: `bad address "1.2.3": want an IP address like "192.168.1.1"`},
				{Path: "nat.forwards", Message: "want an array, got an object"},
				{Path: "rules.policy.sideways", Message: `unknown chain "sideways" (want input, forward or output)`},
				{Path: "rules.rules[0].action", Message: `unknown action "maybe" (want accept, drop or reject)`},
				{Path: "rules.rules[0].vlan_id", Message: "want an integer 0..65535, got number 1.5"},
				{Path: "tuning.ports[0].itr", Message: "itr: want a mode name or interrupts per second: json: cannot unmarshal bool into Go value of type string"},
				{Path: "dashboard.confirmTimeout", Message: "want a string, got number"},
			},
		},
		{
			name: "bad static IPv6 prefix and gateway",
			json: `{"version": 3, "mode": "nat", "ipv6": {"prefix": "2001:db8::", "gateway": "fe80::1::2"}}`,
			want: Errors{
				{Path: "ipv6.prefix", Message: `bad prefix "2001:db8::": want an address with a prefix length like "192.168.1.1/24"`},
				{Path: "ipv6.gateway", Message: `bad address "fe80::1::2": want an IP address like "192.168.1.1"`},
			},
		},
		{
			name: "duplicate fields",
			json: `{"version": 2, "mode": "nat", "mode": "bridge", "tuning": {"ports": [{"name": "eth1", "offloads": {"rx-gro": false, "rx-gro": true}}]}}`,
			want: Errors{
				{Path: "mode", Message: `duplicate field "mode"`},
				{Path: "tuning.ports[0].offloads.rx-gro", Message: `duplicate key "rx-gro"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if diff := cmp.Diff(tt.want, AsErrors(err)); diff != "" {
				t.Errorf("Parse errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPortRangeText(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want PortRange
		ok   bool
	}{
		{"443", PortRange{443, 443}, true},
		{"1024-65535", PortRange{1024, 65535}, true},
		{"2000-1000", PortRange{2000, 1000}, true}, // Validate rejects it
		{"65536", PortRange{}, false},
		{"-5", PortRange{}, false},
		{"1-2-3", PortRange{}, false},
		{"", PortRange{}, false},
	} {
		var r PortRange
		err := r.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || r != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, ok %v", tt.in, r, err, tt.want, tt.ok)
		}
		if tt.ok {
			if b, _ := r.MarshalText(); string(b) != tt.in && tt.in != "2000-1000" {
				t.Errorf("MarshalText(%v) = %q, want %q", r, b, tt.in)
			}
		}
	}
}

// FuzzParse: Parse never panics; what it accepts marshals and parses back
// to the same config, and Marshal is a fixed point; Validate never panics.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/example.json", "testdata/v1.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version": 2}`))
	f.Add([]byte(`{"version": 2, "mode": "nat", "ports": [{"name": "w", "interface": "eth1", "role": "wan", "addresses": ["1.2.3.4/24"]}]}`))
	f.Add([]byte(`{"version": 2, "rules": {"policy": {"forward": "drop"}, "rules": [{"iif": "a", "dport": "1-2", "l4proto": "tcp", "action": "drop"}]}}`))
	f.Add([]byte(`{"version": 1, "rules": "tcp dport 22 drop"}`))
	f.Add([]byte(`{"version": 2, "bridge": {"static": [{"mac": "02:00:00:00:00:01", "port": "x"}]}, "nat": {"forwards": [{"wanPorts": "1-9"}]}}`))
	f.Add([]byte(`{"version": 2, "tuning": {"ports": [{"name": "eth1", "itr": 20000, "irq": {"rx": 1}}]}}`))
	f.Add([]byte(`{"version": 2, "ports": null, "hostPort": null, "x": [1, {"y": null}]}`))
	f.Add([]byte(`nul`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a config and an error")
			}
			if len(AsErrors(err)) == 0 {
				t.Fatal("Parse error without field errors")
			}
			return
		}
		_ = c.Validate(testEnv)
		b, err := Marshal(c)
		if err != nil {
			// Values that decode but do not encode (e.g. an invalid
			// rules action) are caught by Validate.
			if c.Validate(Env{}) == nil {
				t.Fatalf("valid config does not marshal: %v", err)
			}
			return
		}
		c2, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
		}
		if diff := cmp.Diff(c, c2, cmpConfig, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
		b2, err := Marshal(c2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("Marshal is not a fixed point (%v):\n%s\n%s", err, b, b2)
		}
	})
}
