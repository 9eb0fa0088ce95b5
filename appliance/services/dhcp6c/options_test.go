package dhcp6c

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// ispConfig6 asks for a prefix and an address with every ISP option.
func ispConfig6() Config {
	return Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56, Address: true,
		UserClass:   [][]byte{[]byte("iptv"), []byte("abc")},
		VendorClass: &VendorClass{Enterprise: 3561, Data: [][]byte{[]byte("vdata")}},
		Options:     []Option{{Code: 1234, Value: []byte{0xde, 0xad}}, {Code: 17, Value: []byte{0, 0, 0x0d, 0xe9}}}}
}

// ispWire6 are the options ispConfig6 puts on the wire, by code: user
// class (15) and vendor class data (16) are each a 2-byte length and the
// bytes (RFC 8415 21.15, 21.16).
var ispWire6 = map[uint16][]byte{
	15:   {0, 4, 'i', 'p', 't', 'v', 0, 3, 'a', 'b', 'c'},
	16:   {0, 0, 0x0d, 0xe9, 0, 5, 'v', 'd', 'a', 't', 'a'},
	1234: {0xde, 0xad},
	17:   {0, 0, 0x0d, 0xe9},
}

// extras6 are the ISP options in m, by code, as on the wire.
func extras6(m *dhcpv6.Message) map[uint16][]byte {
	got := map[uint16][]byte{}
	for code := range ispWire6 {
		for _, o := range m.Options.Get(dhcpv6.OptionCode(code)) {
			got[code] = append(got[code], o.ToBytes()...)
		}
	}
	return got
}

func checkISP6(t *testing.T, m *dhcpv6.Message) {
	t.Helper()
	if diff := cmp.Diff(ispWire6, extras6(m)); diff != "" {
		t.Errorf("%s options (-want +got):\n%s", m.MessageType, diff)
	}
	if diff := cmp.Diff([][]byte{[]byte("iptv"), []byte("abc")}, m.Options.UserClasses()); diff != "" {
		t.Errorf("%s user classes (-want +got):\n%s", m.MessageType, diff)
	}
	if diff := cmp.Diff([][]byte{[]byte("vdata")}, m.Options.VendorClass(3561)); diff != "" {
		t.Errorf("%s vendor class 3561 (-want +got):\n%s", m.MessageType, diff)
	}
}

// TestISPOptions6: the user class, vendor class and extra options go in
// SOLICIT, REQUEST, RENEW and REBIND; a DECLINE has none of them.
func TestISPOptions6(t *testing.T) {
	f := startFake(t, ispConfig6())
	sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
	checkISP6(t, sol)
	f.answer(sol, dhcpv6.MessageTypeAdvertise, dhcpv6.OptPreference(255), iapd(iana.StatusSuccess), ianaOpt(iana.StatusSuccess))
	req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
	checkISP6(t, req)
	f.answer(req, dhcpv6.MessageTypeReply, shortT1(iapd(iana.StatusSuccess)), shortT1(ianaOpt(iana.StatusSuccess)))
	f.change(2 * time.Second)
	checkISP6(t, f.sent(dhcpv6.MessageTypeRenew, 3*time.Second))
	reb := f.sent(dhcpv6.MessageTypeRebind, 3*time.Second)
	checkISP6(t, reb)
	f.answer(reb, dhcpv6.MessageTypeReply, iapd(iana.StatusSuccess), ianaOpt(iana.StatusSuccess))
	f.c.Decline(naAddr)
	dec := f.sent(dhcpv6.MessageTypeDecline, 3*time.Second)
	if diff := cmp.Diff(map[uint16][]byte{}, extras6(dec)); diff != "" {
		t.Errorf("DECLINE options (-want +got):\n%s", diff)
	}
}

// TestISPOptions6Unset: without them, none is sent.
func TestISPOptions6Unset(t *testing.T) {
	f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56})
	if diff := cmp.Diff(map[uint16][]byte{}, extras6(f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second))); diff != "" {
		t.Errorf("SOLICIT options (-want +got):\n%s", diff)
	}
}

func TestISPOptions6Rejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"empty user class", func(c *Config) { c.UserClass = [][]byte{{}} }},
		{"empty vendor class data", func(c *Config) { c.VendorClass.Data = [][]byte{[]byte("a"), nil} }},
		{"option the client sets", func(c *Config) { c.Options = []Option{{Code: 6}} }},
		{"user class as an option", func(c *Config) { c.Options = []Option{{Code: 15, Value: []byte{0, 1, 'a'}}} }},
		{"IA_PD as an option", func(c *Config) { c.Options = []Option{{Code: 25}} }},
		{"option twice", func(c *Config) { c.Options = []Option{{Code: 1234}, {Code: 1234}} }},
		{"too much for a message", func(c *Config) { c.Options = []Option{{Code: 1234, Value: make([]byte, 1000)}} }},
	} {
		cfg := ispConfig6()
		tc.mod(&cfg)
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
	if _, err := New(ispConfig6(), nil); err != nil {
		t.Errorf("New refused the ISP options: %v", err)
	}
}

// TestISPOptions6Copied: the client keeps its own copy of the options.
func TestISPOptions6Copied(t *testing.T) {
	cfg := ispConfig6()
	f := startFake(t, cfg)
	cfg.UserClass[0][0] = 'X'
	cfg.VendorClass.Data[0][0] = 'X'
	cfg.Options[0].Value[0] = 0
	checkISP6(t, f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second))
}
