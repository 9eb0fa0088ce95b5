package config

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dhcpWAN makes c's WAN take its address by DHCP.
func dhcpWAN(c *Config) {
	c.NAT.WANDHCP = true
	c.Ports[0].Addresses = nil
	c.NAT.Gateway = netip.Addr{}
}

// TestValidateWANLink checks nat.wan: the VLAN and the DHCP clients' options (wanlink.go).
func TestValidateWANLink(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "tagged WAN",
			edit: func(c *Config) { c.NAT.WAN.VLAN = LinkVLAN{ID: 7, ControlPCP: 6} },
			want: map[string]string{},
		},
		{
			name: "VLAN and priorities out of range",
			edit: func(c *Config) { c.NAT.WAN.VLAN = LinkVLAN{ID: 4095, PCP: 8, ControlPCP: 9} },
			want: map[string]string{
				"nat.wan.vlan.id":         "VLAN 4095 out of range 1..4094",
				"nat.wan.vlan.pcp":        "priority 8 out of range 0..7",
				"nat.wan.vlan.controlPCP": "priority 9 out of range 0..7",
			},
		},
		{
			name: "priority without a VLAN",
			edit: func(c *Config) { c.NAT.WAN.VLAN = LinkVLAN{PCP: 3} },
			want: map[string]string{"nat.wan.vlan.id": "VLAN 0 out of range"},
		},
		{
			name: "VLAN filter on the WAN port",
			edit: func(c *Config) { c.Ports[0].VLANs = VLANs{Allowed: []uint16{7}} },
			want: map[string]string{"ports[0].vlans": "a tagged WAN is nat.wan.vlan"},
		},
		{
			name: "DHCP options",
			edit: func(c *Config) {
				dhcpWAN(c)
				c.NAT.WAN.DHCP = WANDHCPOptions{VendorClass: "e1kbox", ClientID: HexBytes{1, 2, 3}, UserClass: []string{"a", "b"},
					Hostname: "box.example", Options: []DHCPOption{{Code: 43, Hex: HexBytes{1}}}}
			},
			want: map[string]string{},
		},
		{
			name: "DHCP options on a static WAN",
			edit: func(c *Config) { c.NAT.WAN.DHCP.VendorClass = "x" },
			want: map[string]string{"nat.wan.dhcp": "need nat.wanDHCP"},
		},
		{
			name: "bad DHCP options",
			edit: func(c *Config) {
				dhcpWAN(c)
				c.NAT.WAN.DHCP = WANDHCPOptions{VendorClass: strings.Repeat("v", 256), ClientID: HexBytes{1}, UserClass: []string{""},
					Hostname: "no spaces", Options: []DHCPOption{{Code: 53}, {Code: 255}, {Code: 43, Hex: make(HexBytes, 256)}, {Code: 43}}}
			},
			want: map[string]string{
				"nat.wan.dhcp.vendorClass":     "256 bytes; an option holds at most 255",
				"nat.wan.dhcp.clientID":        "a type byte and",
				"nat.wan.dhcp.userClass[0]":    "0 bytes; want 1..254",
				"nat.wan.dhcp.hostname":        "is not a host name",
				"nat.wan.dhcp.options[0].code": "option 53 is the message type",
				"nat.wan.dhcp.options[1].code": "255 out of range 1..254",
				"nat.wan.dhcp.options[2].hex":  "256 bytes",
				"nat.wan.dhcp.options[3].code": "option 43 is already at nat.wan.dhcp.options[2]",
			},
		},
		{
			name: "DHCP options too long together",
			edit: func(c *Config) {
				dhcpWAN(c)
				c.NAT.WAN.DHCP = WANDHCPOptions{UserClass: []string{strings.Repeat("u", 200), strings.Repeat("u", 60)},
					Options: []DHCPOption{{Code: 224, Hex: make(HexBytes, 255)}, {Code: 225, Hex: make(HexBytes, 255)}, {Code: 226, Hex: make(HexBytes, 255)}}}
			},
			want: map[string]string{
				"nat.wan.dhcp.userClass": "262 bytes with their length bytes; an option holds at most 255",
				"nat.wan.dhcp":           "the options take 1035 bytes; at most 800 fit a message",
			},
		},
		{
			name: "DHCPv6 options too long together",
			edit: func(c *Config) {
				c.NAT.WAN.DHCPv6 = WANDHCPv6Options{UserClass: []string{strings.Repeat("u", 400)},
					VendorClass: &DHCPv6VendorClass{Enterprise: 1, Data: []string{strings.Repeat("d", 300)}},
					Options:     []DHCPOption{{Code: 17, Hex: make(HexBytes, 100)}}}
			},
			want: map[string]string{"nat.wan.dhcpv6": "the options take 820 bytes; at most 800 fit a message"},
		},
		{
			name: "DHCPv6 options",
			edit: func(c *Config) {
				c.NAT.WAN.DHCPv6 = WANDHCPv6Options{UserClass: []string{"u"}, VendorClass: &DHCPv6VendorClass{Enterprise: 3561, Data: []string{"d"}},
					Options: []DHCPOption{{Code: 17, Hex: HexBytes{0, 0, 0x0d, 0xe9}}}}
			},
			want: map[string]string{},
		},
		{
			name: "bad DHCPv6 options",
			edit: func(c *Config) {
				c.NAT.WAN.DHCPv6 = WANDHCPv6Options{VendorClass: &DHCPv6VendorClass{}, Options: []DHCPOption{{Code: 25}, {Code: 0}}}
			},
			want: map[string]string{
				"nat.wan.dhcpv6.vendorClass.enterprise": "missing",
				"nat.wan.dhcpv6.vendorClass.data":       "missing: at least one item",
				"nat.wan.dhcpv6.options[0].code":        "option 25 is IA_PD",
				"nat.wan.dhcpv6.options[1].code":        "0 out of range 1..65535",
			},
		},
		{
			name: "DHCPv6 options without IPv6",
			edit: func(c *Config) {
				c.IPv6.Enabled = ptr(false)
				c.NAT.WAN.DHCPv6.UserClass = []string{"u"}
			},
			want: map[string]string{"nat.wan.dhcpv6": "need ipv6 on"},
		},
	})
}

// TestHexBytes checks the hex byte strings of DHCP options: the forms
// accepted and the canonical one written back.
func TestHexBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want HexBytes
		ok   bool
	}{
		{`"01:02:42:ac"`, HexBytes{1, 2, 0x42, 0xac}, true},
		{`"0102-42 AC"`, HexBytes{1, 2, 0x42, 0xac}, true},
		{`""`, HexBytes{}, true},
		{`"123"`, nil, false},
		{`"zz"`, nil, false},
	} {
		var got HexBytes
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err == nil) != tt.ok {
			t.Errorf("Unmarshal(%s): err %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Unmarshal(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
	b, err := json.Marshal(HexBytes{1, 0xab})
	if err != nil || string(b) != `"01:ab"` {
		t.Errorf(`Marshal = %s, %v; want "01:ab"`, b, err)
	}
}

// TestParseWANLink reads nat.wan from JSON, the way an owner writes it.
func TestParseWANLink(t *testing.T) {
	c := example(t)
	dhcpWAN(c)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), `"nat":{`, `"nat":{"wan":{"vlan":{"id":7,"controlPCP":6},"dhcp":{"vendorClass":"e1kbox","clientID":"01:02:42:ac:11:00:02","userClass":["iptv"],"options":[{"code":43,"hex":"0a0b"}]}},`, 1)
	got, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := WANLink{
		VLAN: LinkVLAN{ID: 7, ControlPCP: 6},
		DHCP: WANDHCPOptions{VendorClass: "e1kbox", ClientID: HexBytes{1, 2, 0x42, 0xac, 0x11, 0, 2}, UserClass: []string{"iptv"},
			Options: []DHCPOption{{Code: 43, Hex: HexBytes{0x0a, 0x0b}}}},
	}
	if diff := cmp.Diff(want, got.NAT.WAN); diff != "" {
		t.Errorf("nat.wan (-want +got):\n%s", diff)
	}
	if err := got.Validate(testEnv); err != nil {
		t.Errorf("Validate: %v", err)
	}
	bad := strings.Replace(doc, `"0a0b"`, `"0a0"`, 1)
	if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "nat.wan.dhcp.options[0].hex") {
		t.Errorf("Parse of a bad hex value: %v, want an error at nat.wan.dhcp.options[0].hex", err)
	}
}
