package config

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// WANLink is the WAN's link stack above its port (the enabled port with
// role wan): optionally an 802.1Q VLAN on the port, and the options the
// WAN's DHCP clients send. DESIGN §10: the zones put LAN segments on
// VLANs with the same LinkVLAN.
type WANLink struct {
	// VLAN tags the WAN's frames with an 802.1Q VLAN (many fibre and DSL
	// lines: Deutsche Telekom VLAN 7, others 10, 35, 832 …). Default
	// none: untagged.
	VLAN LinkVLAN `json:"vlan,omitzero"`
	// DHCP are the WAN DHCPv4 client's extra options (nat.wanDHCP).
	DHCP WANDHCPOptions `json:"dhcp,omitzero"`
	// DHCPv6 are the WAN DHCPv6 client's extra options (ipv6).
	DHCPv6 WANDHCPv6Options `json:"dhcpv6,omitzero"`
	// PPPoE makes the WAN a PPPoE link (pppoe.go). Default none.
	PPPoE *WANPPPoE `json:"pppoe,omitempty"`
}

// LinkVLAN is an 802.1Q VLAN on a port: its frames carry the tag on the
// wire, and frames of other VLANs or untagged ones are not the link's.
type LinkVLAN struct {
	// ID is the VLAN id, 1..4094; 0 (the default) is untagged.
	ID uint16 `json:"id,omitempty"`
	// PCP is the 802.1p priority of data frames, 0..7. Default 0.
	PCP uint8 `json:"pcp,omitempty"`
	// ControlPCP is the 802.1p priority of control frames: DHCPv4,
	// DHCPv6, ARP and neighbour discovery, 0..7 (some ISPs require 6).
	// Default 0.
	ControlPCP uint8 `json:"controlPCP,omitempty"`
}

// IsZero reports whether the link is untagged.
func (l LinkVLAN) IsZero() bool { return l == LinkVLAN{} }

// WANDHCPOptions are options the WAN's DHCPv4 client adds to its
// DISCOVERs and REQUESTs, for ISPs that require them.
type WANDHCPOptions struct {
	// VendorClass is option 60 (vendor class identifier), as text.
	VendorClass string `json:"vendorClass,omitempty"`
	// ClientID is option 61 (client identifier) in hex, e.g.
	// "01:02:42:ac:11:00:02" (type 1, a MAC). Default: none (the server
	// keys the lease on the MAC).
	ClientID HexBytes `json:"clientID,omitempty"`
	// UserClass is option 77 (RFC 3004), one entry per user class.
	UserClass []string `json:"userClass,omitempty"`
	// Hostname is option 12. Default: none.
	Hostname string `json:"hostname,omitempty"`
	// Options are further options by code (1..254) and value in hex.
	Options []DHCPOption `json:"options,omitempty"`
}

// WANDHCPv6Options are options the WAN's DHCPv6 client adds to its
// SOLICITs and REQUESTs.
type WANDHCPv6Options struct {
	// UserClass is option 15 (RFC 8415 §21.15), one entry per class.
	UserClass []string `json:"userClass,omitempty"`
	// VendorClass is option 16: an enterprise number and its data.
	VendorClass *DHCPv6VendorClass `json:"vendorClass,omitempty"`
	// Options are further options by code and value in hex.
	Options []DHCPOption `json:"options,omitempty"`
}

// DHCPv6VendorClass is DHCPv6's vendor class option (16).
type DHCPv6VendorClass struct {
	// Enterprise is the vendor's IANA enterprise number.
	Enterprise uint32 `json:"enterprise"`
	// Data are the vendor class data items, as text.
	Data []string `json:"data"`
}

// DHCPOption is one extra DHCP option: its code and its value.
type DHCPOption struct {
	Code uint16   `json:"code"`
	Hex  HexBytes `json:"hex"`
}

// HexBytes is a byte string written in hex in JSON: "0a1b2c" or with
// colons, dashes or spaces between the bytes ("0a:1b:2c").
type HexBytes []byte

// MarshalText implements encoding.TextMarshaler (colon-separated).
func (h HexBytes) MarshalText() ([]byte, error) {
	parts := make([]string, len(h))
	for i, b := range h {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return []byte(strings.Join(parts, ":")), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *HexBytes) UnmarshalText(b []byte) error {
	s := strings.NewReplacer(":", "", "-", "", " ", "").Replace(string(b))
	v, err := hex.DecodeString(s)
	if err != nil {
		return fmt.Errorf("bad hex %q (want bytes in hex like \"01:02:42:ac:11:00:02\")", b)
	}
	*h = v
	return nil
}

// Limits of the WAN link.
const (
	maxPCP = 7
	// maxDHCPOptionLen is the longest value of one DHCPv4 option (its
	// length is one byte).
	maxDHCPOptionLen = 255
	// maxDHCPv6OptionLen bounds a DHCPv6 option's value (its length is
	// two bytes; a message must fit the WAN's MTU).
	maxDHCPv6OptionLen = 1024
	maxDHCPOptions     = 16
	// maxDHCPOptionBytes bounds the options of either client together
	// (each with its header): with the client's own, a message fits the
	// WAN's MTU (the clients refuse more).
	maxDHCPOptionBytes = 800
)

// dhcpv4Reserved are the DHCPv4 option codes the client owns: an extra
// option must not set them.
var dhcpv4Reserved = map[uint16]string{
	0: "pad", 50: "the requested address", 51: "the lease time", 53: "the message type",
	54: "the server identifier", 55: "the parameter request list", 57: "the maximum message size",
	61: "the client identifier (use clientID)", 60: "the vendor class (use vendorClass)",
	77: "the user class (use userClass)", 12: "the hostname (use hostname)", 255: "end",
}

// dhcpv6Reserved are the DHCPv6 option codes the client owns.
var dhcpv6Reserved = map[uint16]string{
	1: "the client identifier", 2: "the server identifier", 3: "IA_NA", 5: "IA addresses",
	6: "the option request", 8: "the elapsed time", 14: "rapid commit", 15: "the user class (use userClass)",
	16: "the vendor class (use vendorClass)", 25: "IA_PD", 26: "IA prefixes",
}

// wanLink checks nat.wan.
func (v *validator) wanLink() {
	w := &v.c.NAT.WAN
	if vl := w.VLAN; !vl.IsZero() {
		if vl.ID < MinVLAN || vl.ID > MaxVLAN {
			v.add("nat.wan.vlan.id", "VLAN %d out of range %d..%d", vl.ID, MinVLAN, MaxVLAN)
		}
		if vl.PCP > maxPCP {
			v.add("nat.wan.vlan.pcp", "priority %d out of range 0..%d", vl.PCP, maxPCP)
		}
		if vl.ControlPCP > maxPCP {
			v.add("nat.wan.vlan.controlPCP", "priority %d out of range 0..%d", vl.ControlPCP, maxPCP)
		}
	}
	d := &w.DHCP
	if !v.c.NAT.WANDHCP && !isZeroDHCP(d) {
		v.add("nat.wan.dhcp", "DHCP options need nat.wanDHCP (the WAN address is static)")
	}
	if len(d.VendorClass) > maxDHCPOptionLen {
		v.add("nat.wan.dhcp.vendorClass", "%d bytes; an option holds at most %d", len(d.VendorClass), maxDHCPOptionLen)
	}
	if n := len(d.ClientID); n == 1 || n > maxDHCPOptionLen {
		v.add("nat.wan.dhcp.clientID", "%d bytes; a client identifier is a type byte and 1..%d bytes (RFC 2132 §9.14)", n, maxDHCPOptionLen-1)
	}
	v.userClasses("nat.wan.dhcp.userClass", d.UserClass, 254)
	if n := encodedLen(d.UserClass, 1); n > maxDHCPOptionLen {
		v.add("nat.wan.dhcp.userClass", "%d bytes with their length bytes; an option holds at most %d", n, maxDHCPOptionLen)
	}
	if n := dhcpBytes(d); n > maxDHCPOptionBytes {
		v.add("nat.wan.dhcp", "the options take %d bytes; at most %d fit a message", n, maxDHCPOptionBytes)
	}
	if d.Hostname != "" && !isDomain(d.Hostname) {
		v.add("nat.wan.dhcp.hostname", "%q is not a host name (letters, digits, '-', dots between labels)", d.Hostname)
	}
	v.dhcpOptions("nat.wan.dhcp.options", d.Options, 254, maxDHCPOptionLen, dhcpv4Reserved)
	d6 := &w.DHCPv6
	if !v.c.IPv6.IsEnabled() && (len(d6.UserClass) > 0 || d6.VendorClass != nil || len(d6.Options) > 0) {
		v.add("nat.wan.dhcpv6", "DHCPv6 options need ipv6 on")
	}
	v.userClasses("nat.wan.dhcpv6.userClass", d6.UserClass, maxDHCPv6OptionLen)
	if vc := d6.VendorClass; vc != nil {
		if vc.Enterprise == 0 {
			v.add("nat.wan.dhcpv6.vendorClass.enterprise", "missing: the vendor's IANA enterprise number")
		}
		if len(vc.Data) == 0 {
			v.add("nat.wan.dhcpv6.vendorClass.data", "missing: at least one item (servers reject a vendor class without data)")
		}
		v.userClasses("nat.wan.dhcpv6.vendorClass.data", vc.Data, maxDHCPv6OptionLen)
	}
	v.dhcpOptions("nat.wan.dhcpv6.options", d6.Options, 65535, maxDHCPv6OptionLen, dhcpv6Reserved)
	if n := dhcpv6Bytes(d6); n > maxDHCPOptionBytes {
		v.add("nat.wan.dhcpv6", "the options take %d bytes; at most %d fit a message", n, maxDHCPOptionBytes)
	}
}

// encodedLen is the length of classes each preceded by a length of
// lenBytes bytes.
func encodedLen(cs []string, lenBytes int) int {
	n := 0
	for _, c := range cs {
		n += lenBytes + len(c)
	}
	return n
}

// dhcpBytes is what d's options take in a DHCPv4 message, headers
// included.
func dhcpBytes(d *WANDHCPOptions) int {
	n := 0
	for _, l := range []int{len(d.VendorClass), len(d.ClientID), len(d.Hostname)} {
		if l > 0 {
			n += 2 + l
		}
	}
	if len(d.UserClass) > 0 {
		n += 2 + encodedLen(d.UserClass, 1)
	}
	for _, o := range d.Options {
		n += 2 + len(o.Hex)
	}
	return n
}

// dhcpv6Bytes is what d's options take in a DHCPv6 message, headers
// included.
func dhcpv6Bytes(d *WANDHCPv6Options) int {
	n := 0
	if len(d.UserClass) > 0 {
		n += 4 + encodedLen(d.UserClass, 2)
	}
	if vc := d.VendorClass; vc != nil {
		n += 8 + encodedLen(vc.Data, 2)
	}
	for _, o := range d.Options {
		n += 4 + len(o.Hex)
	}
	return n
}

func isZeroDHCP(d *WANDHCPOptions) bool {
	return d.VendorClass == "" && len(d.ClientID) == 0 && len(d.UserClass) == 0 && d.Hostname == "" && len(d.Options) == 0
}

// userClasses checks a list of classes: each 1..max bytes.
func (v *validator) userClasses(at string, cs []string, max int) {
	for i, c := range cs {
		if len(c) == 0 || len(c) > max {
			v.add(index(at, i), "%d bytes; want 1..%d", len(c), max)
		}
	}
}

// dhcpOptions checks extra options: codes 1..maxCode, not reserved, not
// repeated, values of at most maxLen bytes.
func (v *validator) dhcpOptions(at string, opts []DHCPOption, maxCode uint16, maxLen int, reserved map[uint16]string) {
	if len(opts) > maxDHCPOptions {
		v.add(at, "%d options; at most %d", len(opts), maxDHCPOptions)
	}
	seen := map[uint16]int{}
	for i, o := range opts {
		oat := index(at, i)
		switch why, r := reserved[o.Code]; {
		case o.Code == 0 || o.Code > maxCode:
			v.add(oat+".code", "%d out of range 1..%d", o.Code, maxCode)
		case r:
			v.add(oat+".code", "option %d is %s, which the client sets itself", o.Code, why)
		}
		if j, dup := seen[o.Code]; dup {
			v.add(oat+".code", "option %d is already at %s", o.Code, index(at, j))
		}
		seen[o.Code] = i
		if len(o.Hex) > maxLen {
			v.add(oat+".hex", "%d bytes; an option holds at most %d", len(o.Hex), maxLen)
		}
	}
}
