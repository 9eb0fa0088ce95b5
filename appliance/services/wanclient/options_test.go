package wanclient

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// ispOptions is a client's config with every ISP option set.
func ispOptions(c *Config) {
	c.Hostname = "fritz"
	c.ClientID = []byte{0, 'i', 's', 'p', '-', 'i', 'd'}
	c.VendorClass = "isp-vendor"
	c.UserClass = []string{"iptv", "voip-box"}
	c.Options = []Option{{Code: 224, Value: []byte{0xde, 0xad}}, {Code: 125, Value: []byte{0, 0, 0x0d, 0xe9, 0}}}
}

// ispWire are the options ispOptions puts on the wire, by code. Option 77
// is RFC 3004's encoding: each class a length byte and its bytes.
var ispWire = map[int][]byte{
	optHostname:    []byte("fritz"),
	optClientID:    {0, 'i', 's', 'p', '-', 'i', 'd'},
	optVendorClass: []byte("isp-vendor"),
	optUserClass:   append(append([]byte{4}, "iptv"...), append([]byte{8}, "voip-box"...)...),
	224:            {0xde, 0xad},
	125:            {0, 0, 0x0d, 0xe9, 0},
}

// extras are the ISP options in m, by code, as on the wire.
func extras(m *dhcpv4.DHCPv4) map[int][]byte {
	got := map[int][]byte{}
	for code := range ispWire {
		if v := option(m, uint8(code)); v != nil {
			got[code] = v
		}
	}
	return got
}

// checkISP checks that msg carries the ISP options, also as the library
// decodes them.
func checkISP(t *testing.T, what string, m *dhcpv4.DHCPv4) {
	t.Helper()
	if diff := cmp.Diff(ispWire, extras(m)); diff != "" {
		t.Errorf("%s options (-want +got):\n%s", what, diff)
	}
	if diff := cmp.Diff([]string{"iptv", "voip-box"}, m.UserClass()); diff != "" {
		t.Errorf("%s user classes (-want +got):\n%s", what, diff)
	}
	if got := m.ClassIdentifier(); got != "isp-vendor" {
		t.Errorf("%s vendor class %q, want isp-vendor", what, got)
	}
}

// TestISPOptions: the vendor class, user class, client ID, hostname and
// extra options go in the DISCOVER and in the REQUESTs of every state
// (selecting, renewing, rebinding, INIT-REBOOT); the RELEASE carries the
// client ID only.
func TestISPOptions(t *testing.T) {
	e := newEnv(t, ispOptions)
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	checkISP(t, "DISCOVER", d.msg)
	e.deliver(srv.reply(d, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...))
	r := e.expect(dhcpv4.MessageTypeRequest)
	checkISP(t, "REQUEST (selecting)", r.msg)
	e.deliver(srv.reply(r, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...))
	e.change()
	e.waitState("bound")

	e.clk.At(500 * time.Second)
	r = e.expect(dhcpv4.MessageTypeRequest)
	if r.dstIP != serverIP {
		t.Fatalf("renewal to %v", r.dstIP)
	}
	checkISP(t, "REQUEST (renewing)", r.msg)
	e.clk.At(875 * time.Second)
	r = e.expect(dhcpv4.MessageTypeRequest)
	if r.dstIP != bcastAddr {
		t.Fatalf("rebinding to %v", r.dstIP)
	}
	checkISP(t, "REQUEST (rebinding)", r.msg)
	e.deliver(srv.reply(r, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...))
	e.waitState("bound")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rel := e.expect(dhcpv4.MessageTypeRelease)
	if diff := cmp.Diff(map[int][]byte{optClientID: ispWire[optClientID]}, extras(rel.msg)); diff != "" {
		t.Errorf("RELEASE options (-want +got):\n%s", diff)
	}
}

func TestISPOptionsInitReboot(t *testing.T) {
	e := newEnv(t, ispOptions)
	e.writeLeaseFile(wantLease(-300*time.Second), clientMAC)
	e.run()
	r := e.expect(dhcpv4.MessageTypeRequest)
	if option(r.msg, 54) != nil {
		t.Fatalf("not an INIT-REBOOT REQUEST: it has a server identifier")
	}
	checkISP(t, "REQUEST (init-reboot)", r.msg)
}

// TestISPOptionsUnset: without them, none of the ISP options but the
// default client ID and the box's hostname is sent.
func TestISPOptionsUnset(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	want := map[int][]byte{optHostname: []byte("e1kbox"), optClientID: append([]byte{1}, clientMAC...)}
	if diff := cmp.Diff(want, extras(d.msg)); diff != "" {
		t.Errorf("DISCOVER options (-want +got):\n%s", diff)
	}
}

func TestISPOptionsRejected(t *testing.T) {
	long := string(make([]byte, 256))
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"long vendor class", func(c *Config) { c.VendorClass = long }},
		{"empty user class", func(c *Config) { c.UserClass = []string{"a", ""} }},
		{"user classes over an option", func(c *Config) { c.UserClass = []string{long[:200], long[:60]} }},
		{"option the client sets", func(c *Config) { c.Options = []Option{{Code: 55, Value: []byte{1}}} }},
		{"vendor class as an option", func(c *Config) { c.Options = []Option{{Code: optVendorClass, Value: []byte{1}}} }},
		{"option twice", func(c *Config) { c.Options = []Option{{Code: 224}, {Code: 224}} }},
		{"long option", func(c *Config) { c.Options = []Option{{Code: 224, Value: make([]byte, 256)}} }},
		{"too much for a message", func(c *Config) {
			for code := uint8(224); code < 228; code++ {
				c.Options = append(c.Options, Option{Code: code, Value: make([]byte, 250)})
			}
		}},
	} {
		cfg := Config{Interface: "wan0", MAC: clientMAC}
		tc.mod(&cfg)
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("%s: New accepted it", tc.name)
		}
	}
	cfg := Config{Interface: "wan0", MAC: clientMAC}
	ispOptions(&cfg)
	if _, err := New(cfg, nil); err != nil {
		t.Errorf("New refused the ISP options: %v", err)
	}
}

// TestISPOptionsCopied: the client keeps its own copy of the options.
func TestISPOptionsCopied(t *testing.T) {
	var cfg Config
	e := newEnv(t, func(c *Config) { ispOptions(c); cfg = *c })
	cfg.UserClass[0] = "XXXX"
	cfg.Options[0].Value[0] = 0
	e.run()
	checkISP(t, "DISCOVER", e.expect(dhcpv4.MessageTypeDiscover).msg)
}

// FuzzISPOptions: whatever options New accepts, the DISCOVER and the
// REQUEST built with them fit a 1500-byte MTU and decode to the same
// options (the library's parser over the client's encoding).
func FuzzISPOptions(f *testing.F) {
	f.Add("isp-vendor", []byte("iptv\x00voip-box"), uint8(224), []byte{0xde, 0xad})
	f.Add("", []byte{}, uint8(1), []byte{})
	f.Add(strings.Repeat("v", 255), bytes.Repeat([]byte{'u'}, 254), uint8(43), bytes.Repeat([]byte{1}, 255))
	f.Fuzz(func(t *testing.T, vendor string, classes []byte, code uint8, value []byte) {
		cfg := Config{Interface: "wan0", MAC: clientMAC, Hostname: "e1kbox", VendorClass: vendor,
			Options: []Option{{Code: code, Value: value}}}
		if len(classes) > 0 {
			cfg.UserClass = strings.Split(string(classes), "\x00")
		}
		c, err := New(cfg, nil)
		if err != nil {
			return
		}
		var uc []byte
		for _, s := range cfg.UserClass {
			uc = append(append(uc, byte(len(s))), s...)
		}
		for _, t0 := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest} {
			b := message(c, dhcpv4.TransactionID{1, 2, 3, 4}, t0, 0, netip.Addr{}, 1472,
				dhcpv4.OptRequestedIPAddress(net.IP(leaseIP.AsSlice()))).ToBytes()
			if n := len(b) + ipv4HdrLen + udpHdrLen; n > 1500 {
				t.Fatalf("%s of %d bytes", t0, n)
			}
			m, err := dhcpv4.FromBytes(b)
			if err != nil {
				t.Fatalf("%s does not decode: %v", t0, err)
			}
			for _, o := range []struct {
				code uint8
				sent bool
				want []byte
			}{{optVendorClass, vendor != "", []byte(vendor)}, {optUserClass, len(uc) > 0, uc}, {code, true, value}} {
				has := m.Options.Has(dhcpv4.GenericOptionCode(o.code))
				if got := option(m, o.code); has != o.sent || !bytes.Equal(got, o.want) {
					t.Fatalf("%s option %d = %x (sent %v), want %x (sent %v)", t0, o.code, got, has, o.want, o.sent)
				}
			}
		}
	})
}
