package dhcp6c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"e1kbox/appliance/services/dhcpclient"
)

// Config says where and as whom the client asks.
type Config struct {
	// Interface is the WAN interface the packet socket binds to.
	Interface string
	// MAC is the router's WAN MAC: the source of every frame, the base of
	// the link-local source address, the DUID and the IAID. When it is
	// not the interface's own MAC the socket puts the interface in
	// promiscuous mode.
	MAC net.HardwareAddr
	// StateDir keeps the DUID and the last lease (on /perm); empty keeps
	// nothing and uses DUID-LL.
	StateDir string
	// PrefixLength is the delegated prefix length asked for as a hint
	// (48 to 64); 0 asks for any. The server may delegate another.
	PrefixLength int
	// Address asks for an address (IA_NA) besides the prefix.
	Address bool
	// NoPrefix asks for no prefix (IA_PD): with Address, an address only.
	NoPrefix bool
	// UserClass is the user class option (15), one entry per class, when
	// not empty.
	UserClass [][]byte
	// VendorClass is the vendor class option (16) when not nil.
	VendorClass *VendorClass
	// Options are further options, sent as they are.
	Options []Option
	// VLAN is the WAN's 802.1Q VLAN: every frame goes out with its tag
	// (ID, and PCP: the WAN's control priority), and only that VLAN's
	// replies come in (ingressdrop hands them over). Zero: untagged.
	VLAN dhcpclient.VLAN
	// LinkLocal is the client's source address (it takes replies to it);
	// invalid: the MAC's (LinkLocal). A PPPoE session's is the one IPv6CP
	// negotiated.
	LinkLocal netip.Addr
	// SolicitKept asks for a kept lease again in a SOLICIT (as a hint)
	// instead of confirming it with a REBIND: on a new link (a new PPPoE
	// session) the server may not know the binding, and one that does
	// hands the same prefix back.
	SolicitKept bool
	// Open, when set, opens the transport instead of the packet socket on
	// Interface (which then only names the client in its logs): e.g. the
	// PPPoE session's (dataplane.PPPoELink.DHCPv6). Its mtu is unused.
	Open dhcpclient.Opener
}

// VendorClass is DHCPv6's vendor class option: the vendor's IANA
// enterprise number and its class data.
type VendorClass struct {
	Enterprise uint32
	Data       [][]byte
}

// Option is an extra DHCPv6 option the client sends: its code and value.
type Option struct {
	Code  uint16
	Value []byte
}

// owned are the option codes the client sets itself (RFC 8415 section
// 21), which an extra option must not (config's dhcpv6Reserved).
var owned = map[uint16]bool{
	0: true, 1: true, 2: true, 3: true, 5: true, 6: true, 8: true,
	uint16(dhcpv6.OptionRapidCommit): true, uint16(dhcpv6.OptionUserClass): true,
	uint16(dhcpv6.OptionVendorClass): true, uint16(dhcpv6.OptionIAPD): true, uint16(dhcpv6.OptionIAPrefix): true,
}

// maxOptionBytes bounds what the extra options take in a message: with
// the client's own options (its IAs with a few hints), the headers (48)
// and the Ethernet header, a message fits a 1280-byte IPv6 MTU.
const maxOptionBytes = 900

// check validates cfg and copies what it keeps.
func (cfg *Config) check() error {
	if cfg.Interface == "" {
		return errors.New("no interface")
	}
	if err := cfg.VLAN.Check(); err != nil {
		return err
	}
	if len(cfg.MAC) != 6 {
		return fmt.Errorf("MAC %q is not a 6-byte Ethernet address", cfg.MAC)
	}
	if cfg.MAC[0]&1 != 0 || [6]byte(cfg.MAC) == [6]byte{} {
		return fmt.Errorf("MAC %s is not a unicast address", cfg.MAC)
	}
	if cfg.PrefixLength != 0 && (cfg.PrefixLength < 48 || cfg.PrefixLength > 64) {
		return fmt.Errorf("prefix length %d is not 0 or 48 to 64", cfg.PrefixLength)
	}
	if a := cfg.LinkLocal; a.IsValid() && (!a.Is6() || !a.IsLinkLocalUnicast() || a.Zone() != "") {
		return fmt.Errorf("source %v is not an IPv6 link-local address", a)
	}
	if cfg.NoPrefix && !cfg.Address {
		return errors.New("neither a prefix nor an address to ask for")
	}
	if err := cfg.checkExtras(); err != nil {
		return err
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	cfg.UserClass = cloneAll(cfg.UserClass)
	if vc := cfg.VendorClass; vc != nil {
		cfg.VendorClass = &VendorClass{Enterprise: vc.Enterprise, Data: cloneAll(vc.Data)}
	}
	opts := make([]Option, len(cfg.Options))
	for i, o := range cfg.Options {
		opts[i] = Option{Code: o.Code, Value: slices.Clone(o.Value)}
	}
	cfg.Options = opts
	return nil
}

// checkExtras checks the user classes, the vendor class and the extra
// options: no empty class, no extra option the client sets or repeated,
// and together they fit a message.
func (cfg *Config) checkExtras() error {
	n := 0
	classes := func(what string, cs [][]byte) error {
		for i, c := range cs {
			if len(c) == 0 {
				return fmt.Errorf("%s %d is empty", what, i)
			}
			n += 2 + len(c)
		}
		return nil
	}
	if len(cfg.UserClass) > 0 {
		n += 4
	}
	if err := classes("user class", cfg.UserClass); err != nil {
		return err
	}
	if vc := cfg.VendorClass; vc != nil {
		if len(vc.Data) == 0 {
			return errors.New("vendor class without data")
		}
		n += 8
		if err := classes("vendor class data", vc.Data); err != nil {
			return err
		}
	}
	seen := map[uint16]bool{}
	for _, o := range cfg.Options {
		switch {
		case owned[o.Code]:
			return fmt.Errorf("option %d is one the client sets itself", o.Code)
		case seen[o.Code]:
			return fmt.Errorf("option %d given twice", o.Code)
		}
		seen[o.Code] = true
		n += 4 + len(o.Value)
	}
	if n > maxOptionBytes {
		return fmt.Errorf("the options take %d bytes, more than %d (a message must fit the MTU)", n, maxOptionBytes)
	}
	return nil
}

func cloneAll(bs [][]byte) [][]byte {
	if bs == nil {
		return nil
	}
	c := make([][]byte, len(bs))
	for i, b := range bs {
		c[i] = slices.Clone(b)
	}
	return c
}

// iaid is the IAID of both IAs: the last four bytes of the MAC.
func (cfg *Config) iaid() [4]byte { return [4]byte(cfg.MAC[2:6]) }

// LinkLocal is the link-local address of mac by modified EUI-64 (RFC 4291
// appendix A): the client's source address.
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	binary.BigEndian.PutUint16(a[0:2], 0xfe80)
	a[8] = mac[0] ^ 0x02
	a[9], a[10] = mac[1], mac[2]
	a[11], a[12] = 0xff, 0xfe
	a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	return netip.AddrFrom16(a)
}
