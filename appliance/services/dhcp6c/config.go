package dhcp6c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

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
	// VLAN is the WAN's 802.1Q VLAN: every frame goes out with its tag
	// (ID, and PCP: the WAN's control priority), and only that VLAN's
	// replies come in (ingressdrop hands them over). Zero: untagged.
	VLAN dhcpclient.VLAN
}

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
	if cfg.NoPrefix && !cfg.Address {
		return errors.New("neither a prefix nor an address to ask for")
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	return nil
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
