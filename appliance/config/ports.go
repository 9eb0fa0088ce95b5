package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// Role is a port's side in NAT mode.
type Role string

// The roles. Bridge mode ignores roles (any role is accepted).
const (
	RoleNone Role = ""
	RoleLAN  Role = "lan"
	RoleWAN  Role = "wan"
)

// Port is one data port: a physical interface driven by the dataplane.
type Port struct {
	// Name is the port's name in rules (iif/oif), static FDB entries and the
	// dashboard: 1-15 letters, digits, '_', '.', '-'. Required, unique.
	Name string `json:"name"`
	// Interface is the kernel network interface, e.g. "eth1". Required,
	// unique, and it must exist on the box (for enabled ports).
	Interface string `json:"interface"`
	// Role is lan or wan in NAT mode (exactly one enabled wan port, at least
	// one lan port); bridge mode ignores it. Default "".
	Role Role `json:"role,omitempty"`
	// Addresses are the box's own addresses on this port, held by the
	// dataplane (it answers ARP and ping for them; the kernel interface gets
	// no address). NAT mode only: on the WAN port the static WAN address
	// (its first IPv4 prefix is the masquerade address; none with
	// nat.wanDHCP), on a LAN port the router's LAN address, the LAN hosts'
	// gateway (the LAN ports form one segment, so one LAN port carries it).
	// Bridge mode forwards transparently and takes no port addresses: the
	// box's address belongs on hostPort.addresses. Default none.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	// MTU is the largest IP packet on the port, 68..9216. Default 1500.
	MTU int `json:"mtu"`
	// VLANs filters 802.1Q tags; the zero value (the default) is VLAN-unaware.
	VLANs VLANs `json:"vlans,omitzero"`
	// Enabled: a disabled port is not opened by the dataplane and its
	// interface need not exist. Default true.
	Enabled *bool `json:"enabled"`
}

// IsEnabled reports whether the port is enabled (true when unset).
func (p *Port) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// mtu returns the port's MTU, the default when unset.
func (p *Port) mtu() int {
	if p.MTU == 0 {
		return DefaultMTU
	}
	return p.MTU
}

// VLANs is a port's 802.1Q setting, kept simple:
//
//   - zero value (no "vlans" key): VLAN-unaware; frames pass with their tags
//     (or none) unchanged.
//   - otherwise the port is VLAN-aware: a tagged frame passes only if its
//     VLAN id is in Allowed, and leaves other ports tagged; an untagged frame
//     belongs to Native and frames of Native leave this port untagged. Native
//     0 drops untagged frames.
type VLANs struct {
	// Native is the VLAN of untagged frames, 1..4094, or 0 for none.
	Native uint16 `json:"native,omitempty"`
	// Allowed are the tagged VLAN ids, 1..4094, without Native.
	Allowed []uint16 `json:"allowed,omitempty"`
}

// IsZero reports whether v is VLAN-unaware.
func (v VLANs) IsZero() bool { return v.Native == 0 && len(v.Allowed) == 0 }

// HostPort is a TAP device attached to the dataplane like a data port: the
// kernel owns its addresses, so management services (dashboard, ssh, ping)
// are reachable from the data side. The dataplane creates the TAP device.
type HostPort struct {
	// Name is the port's name in rules and FDB entries. Default "host".
	Name string `json:"name"`
	// Interface is the TAP device's name. Default "e1khost0".
	Interface string `json:"interface"`
	// Addresses are the kernel's addresses on the TAP device, e.g.
	// "192.168.1.2/24". Default none.
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// Defaults of the ports.
const (
	DefaultMTU               = 1500
	DefaultHostPortName      = "host"
	DefaultHostPortInterface = "e1khost0"
)

// Limits of the ports checked by Validate.
const (
	MinMTU = 68
	MaxMTU = 9216
	// MinNATMTU is the smallest MTU of a router port in NAT mode: RFC
	// 791's 576-byte datagram every host must accept.
	MinNATMTU = 576
	// MaxPorts bounds the enabled data ports plus the host port.
	MaxPorts    = 32
	MinVLAN     = 1
	MaxVLAN     = 4094
	maxPortName = 15 // IFNAMSIZ-1, as in rules
)

// WANPort returns the enabled port with role wan (the first, if Validate
// would complain about several), or nil.
func (c *Config) WANPort() *Port {
	for i := range c.Ports {
		if p := &c.Ports[i]; p.IsEnabled() && p.Role == RoleWAN {
			return p
		}
	}
	return nil
}

// LANPorts returns the enabled ports with role lan.
func (c *Config) LANPorts() []*Port {
	var lan []*Port
	for i := range c.Ports {
		if p := &c.Ports[i]; p.IsEnabled() && p.Role == RoleLAN {
			lan = append(lan, p)
		}
	}
	return lan
}

// Port returns the data port named name, or nil.
func (c *Config) Port(name string) *Port {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

func (p *Port) applyDefaults() {
	if p.MTU == 0 {
		p.MTU = DefaultMTU
	}
	if p.Enabled == nil {
		p.Enabled = ptr(true)
	}
}

func (h *HostPort) applyDefaults() {
	if h.Name == "" {
		h.Name = DefaultHostPortName
	}
	if h.Interface == "" {
		h.Interface = DefaultHostPortInterface
	}
}

// ports checks each data port on its own; the names and interfaces used
// twice are caught by name and ifname (crosscheck.go).
func (v *validator) ports() {
	enabled := 0
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i)
		v.name(join(at, "name"), p.Name)
		if v.ifname(join(at, "interface"), p.Interface) && p.IsEnabled() && !v.known(p.Interface) {
			v.add(join(at, "interface"), "unknown interface %q (this box has: %s); fix the name or set enabled to false", p.Interface, v.interfaceList())
		}
		switch p.Role {
		case RoleNone, RoleLAN, RoleWAN:
		default:
			v.add(join(at, "role"), "want lan or wan, got %q", p.Role)
		}
		if p.MTU != 0 && (p.MTU < MinMTU || p.MTU > MaxMTU) {
			v.add(join(at, "mtu"), "%d out of range %d..%d", p.MTU, MinMTU, MaxMTU)
		}
		v.vlans(join(at, "vlans"), p.VLANs)
		if p.IsEnabled() {
			enabled++
		}
	}
	if enabled == 0 {
		v.add("ports", "no enabled port; add a port like {\"name\": \"port1\", \"interface\": \"eth1\"}")
	}
	if v.c.HostPort != nil {
		enabled++
	}
	if enabled > MaxPorts {
		v.add("ports", "%d enabled ports (the host port included); the dataplane runs at most %d", enabled, MaxPorts)
	}
}

func (v *validator) vlans(at string, vl VLANs) {
	if vl.Native != 0 && (vl.Native < MinVLAN || vl.Native > MaxVLAN) {
		v.add(join(at, "native"), "VLAN %d out of range %d..%d (0: no native VLAN)", vl.Native, MinVLAN, MaxVLAN)
	}
	seen := map[uint16]int{}
	for i, id := range vl.Allowed {
		a := index(join(at, "allowed"), i)
		switch j, dup := seen[id]; {
		case id < MinVLAN || id > MaxVLAN:
			v.add(a, "VLAN %d out of range %d..%d", id, MinVLAN, MaxVLAN)
		case dup:
			v.add(a, "VLAN %d already listed at allowed[%d]", id, j)
		case id == vl.Native:
			v.add(a, "VLAN %d is the native VLAN (carried untagged); remove it from allowed", id)
		}
		seen[id] = i
	}
}

func (v *validator) hostPort() {
	h := v.c.HostPort
	if h == nil {
		return
	}
	if h.Name != "" {
		v.name("hostPort.name", h.Name)
	}
	if h.Interface != "" {
		v.ifname("hostPort.interface", h.Interface)
	}
}

// isNameChar reports whether c may stand in a port name.
func isNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// validName describes what is wrong with a port name on its own, or "".
func validName(name string) string {
	switch {
	case name == "":
		return "missing; give the port a name like \"lan1\""
	case len(name) > maxPortName:
		return fmt.Sprintf("%q is longer than %d characters", name, maxPortName)
	case strings.IndexFunc(name, func(r rune) bool { return !isNameChar(r) }) >= 0:
		return fmt.Sprintf("%q has characters other than letters, digits, '_', '.', '-'", name)
	}
	return ""
}

// validIfname describes what is wrong with an interface name on its own,
// or "".
func validIfname(name string) string {
	switch {
	case name == "":
		return "missing; want a network interface like \"eth1\""
	case len(name) > maxPortName || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\x00"):
		return fmt.Sprintf("%q is not a valid interface name", name)
	}
	return ""
}
