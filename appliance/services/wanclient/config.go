package wanclient

import (
	"errors"
	"fmt"
	"net"

	"e1kbox/appliance/services/dhcpclient"
)

// DHCP option codes (RFC 2132) the client sends or reads by number.
const (
	optHostname    = 12
	optLeaseTime   = 51
	optRenewalT1   = 58
	optRebindingT2 = 59
	optClientID    = 61
)

// DefaultParams is the parameter request list sent when Config.Params is
// empty: subnet mask (1), router (3), DNS (6), domain name (15), interface
// MTU (26), NTP servers (42), broadcast address (28), lease time (51), T1
// (58), T2 (59).
var DefaultParams = []byte{1, 3, 6, 15, 26, 42, 28, 51, 58, 59}

// Config says where and as whom the client asks for a lease.
type Config struct {
	// Interface is the WAN interface the packet socket binds to.
	Interface string
	// MAC is the router's WAN MAC: the client hardware address (chaddr)
	// and the source of every frame. When it is not the interface's own
	// MAC the socket puts the interface in promiscuous mode.
	MAC net.HardwareAddr
	// Hostname is sent as option 12 when not empty.
	Hostname string
	// ClientID is option 61. Empty means type 1 (Ethernet) followed by
	// MAC, which stays the same across reboots.
	ClientID []byte
	// LeaseFile keeps the last lease (on /perm) for INIT-REBOOT after a
	// restart; empty keeps none.
	LeaseFile string
	// Params is the parameter request list (option 55); empty means
	// DefaultParams.
	Params []byte
	// VLAN is the WAN's 802.1Q VLAN: every frame goes out with its tag
	// (ID, and PCP: the WAN's control priority), and only that VLAN's
	// replies come in (ingressdrop hands them over). Zero: untagged.
	VLAN dhcpclient.VLAN
}

// check validates cfg and fills in its defaults.
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
	if cfg.MAC[0]&1 != 0 || isZero(cfg.MAC) {
		return fmt.Errorf("MAC %s is not a unicast address", cfg.MAC)
	}
	if len(cfg.Hostname) > 255 {
		return fmt.Errorf("hostname is %d bytes, more than 255", len(cfg.Hostname))
	}
	if len(cfg.ClientID) == 0 {
		cfg.ClientID = append([]byte{1}, cfg.MAC...)
	}
	if len(cfg.ClientID) < 2 || len(cfg.ClientID) > 255 {
		return fmt.Errorf("client identifier is %d bytes, not 2 to 255", len(cfg.ClientID))
	}
	if len(cfg.Params) == 0 {
		cfg.Params = DefaultParams
	}
	if len(cfg.Params) > 255 {
		return fmt.Errorf("%d requested parameters, more than 255", len(cfg.Params))
	}
	for _, p := range cfg.Params {
		if p == 0 || p == 255 {
			return fmt.Errorf("requested parameter %d is not an option code", p)
		}
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	cfg.ClientID = append([]byte(nil), cfg.ClientID...)
	cfg.Params = append([]byte(nil), cfg.Params...)
	return nil
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
