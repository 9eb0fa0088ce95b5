package dhcp6c

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
		{"vendor class without data", func(c *Config) { c.VendorClass.Data = nil }},
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

// FuzzISPOptions6: whatever options New accepts are in the message as
// configured: the message's options (read as raw TLVs, since an extra
// option's value is the user's, well-formed or not) hold the user and
// vendor classes the library parses back, and the extra option as given.
func FuzzISPOptions6(f *testing.F) {
	f.Add([]byte("iptv\x00abc"), uint32(3561), []byte("vdata"), uint16(1234), []byte{0xde, 0xad})
	f.Add([]byte{}, uint32(0), []byte{}, uint16(17), []byte{})
	f.Fuzz(func(t *testing.T, classes []byte, enterprise uint32, data []byte, code uint16, value []byte) {
		split := func(b []byte) [][]byte {
			if len(b) == 0 {
				return nil
			}
			return bytes.Split(b, []byte{0})
		}
		cfg := Config{Interface: "wan", MAC: boxMAC, UserClass: split(classes), Options: []Option{{Code: code, Value: value}}}
		if enterprise != 0 {
			cfg.VendorClass = &VendorClass{Enterprise: enterprise, Data: split(data)}
		}
		c, err := New(cfg, nil)
		if err != nil {
			return
		}
		msg := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeSolicit}
		(&machine{c: c}).addExtras(msg)
		opts := tlvs(t, msg.ToBytes()[4:])
		var uc dhcpv6.OptUserClass
		if len(cfg.UserClass) > 0 {
			if len(opts[15]) != 1 || uc.FromBytes(opts[15][0]) != nil {
				t.Fatalf("user class option %x", opts[15])
			}
		} else if len(opts[15]) != 0 {
			t.Fatalf("user class option %x, want none", opts[15])
		}
		if diff := cmp.Diff(cfg.UserClass, uc.UserClasses, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("user classes (-want +got):\n%s", diff)
		}
		var vc dhcpv6.OptVendorClass
		if cfg.VendorClass != nil {
			if len(opts[16]) != 1 || vc.FromBytes(opts[16][0]) != nil || vc.EnterpriseNumber != enterprise {
				t.Fatalf("vendor class option %x", opts[16])
			}
			if diff := cmp.Diff(cfg.VendorClass.Data, vc.Data, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("vendor class data (-want +got):\n%s", diff)
			}
		} else if len(opts[16]) != 0 {
			t.Fatalf("vendor class option %x, want none", opts[16])
		}
		if got := opts[code]; len(got) != 1 || !bytes.Equal(got[0], value) {
			t.Fatalf("option %d = %x, want %x", code, got, value)
		}
	})
}

// tlvs splits DHCPv6 options into their values by code.
func tlvs(t *testing.T, b []byte) map[uint16][][]byte {
	t.Helper()
	m := map[uint16][][]byte{}
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%d bytes left after the options", len(b))
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			t.Fatalf("option %d of %d bytes overruns the message", code, n)
		}
		m[code] = append(m[code], b[4:4+n])
		b = b[4+n:]
	}
	return m
}
