package wanclient

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"e1kbox/appliance/services/dhcpclient"
)

// DHCP option codes (RFC 2132) the client sends or reads by number.
const (
	optHostname    = 12
	optLeaseTime   = 51
	optRenewalT1   = 58
	optRebindingT2 = 59
	optVendorClass = 60
	optClientID    = 61
	optUserClass   = 77
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
	// VendorClass is option 60 (vendor class identifier) when not empty.
	VendorClass string
	// UserClass is option 77 in RFC 3004's encoding (each class a length
	// byte and its bytes) when not empty.
	UserClass []string
	// Options are further options, sent as they are.
	Options []Option
	// VLAN is the WAN's 802.1Q VLAN: every frame goes out with its tag
	// (ID, and PCP: the WAN's control priority), and only that VLAN's
	// replies come in (ingressdrop hands them over). Zero: untagged.
	VLAN dhcpclient.VLAN
}

// Option is an extra DHCP option the client sends: its code and value.
type Option struct {
	Code  uint8
	Value []byte
}

// owned are the option codes the client sets itself, which an extra
// option must not (config's dhcpv4Reserved).
var owned = map[uint8]bool{
	0: true, optHostname: true, 50: true, optLeaseTime: true, 53: true, 54: true, 55: true, 57: true,
	optVendorClass: true, optClientID: true, optUserClass: true, 255: true,
}

// maxOptionBytes bounds what the client's own options and the extra
// ones take in a message: with the fixed fields (240 bytes), the IP and
// UDP headers (28) and the client's other options (at most 40 and the
// parameter list), a message fits a 1500-byte MTU.
const maxOptionBytes = 900

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
	if err := cfg.checkExtras(); err != nil {
		return err
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	cfg.ClientID = append([]byte(nil), cfg.ClientID...)
	cfg.Params = append([]byte(nil), cfg.Params...)
	cfg.UserClass = slices.Clone(cfg.UserClass)
	opts := make([]Option, len(cfg.Options))
	for i, o := range cfg.Options {
		opts[i] = Option{Code: o.Code, Value: slices.Clone(o.Value)}
	}
	cfg.Options = opts
	return nil
}

// checkExtras checks the vendor class, the user classes and the extra
// options: each fits an option, no extra option is one the client sets
// or repeats another, and together they fit a message.
func (cfg *Config) checkExtras() error {
	if len(cfg.VendorClass) > 255 {
		return fmt.Errorf("vendor class is %d bytes, more than 255", len(cfg.VendorClass))
	}
	n := len(cfg.Hostname) + len(cfg.ClientID) + len(cfg.VendorClass) + 6
	uc := 0
	for i, c := range cfg.UserClass {
		if len(c) == 0 || len(c) > 254 {
			return fmt.Errorf("user class %d is %d bytes, not 1 to 254", i, len(c))
		}
		uc += 1 + len(c)
	}
	if uc > 255 {
		return fmt.Errorf("user classes take %d bytes, more than an option's 255", uc)
	}
	n += uc + 2
	seen := map[uint8]bool{}
	for _, o := range cfg.Options {
		switch {
		case owned[o.Code]:
			return fmt.Errorf("option %d is one the client sets itself", o.Code)
		case seen[o.Code]:
			return fmt.Errorf("option %d given twice", o.Code)
		case len(o.Value) > 255:
			return fmt.Errorf("option %d is %d bytes, more than 255", o.Code, len(o.Value))
		}
		seen[o.Code] = true
		n += 2 + len(o.Value)
	}
	if n > maxOptionBytes {
		return fmt.Errorf("the options take %d bytes, more than %d (a message must fit the MTU)", n, maxOptionBytes)
	}
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
