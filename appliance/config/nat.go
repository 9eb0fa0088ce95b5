package config

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"
)

// NAT configures the router of NAT mode. The WAN port is the enabled port
// with role wan, the LAN ports are those with role lan; their addresses
// are in Port.Addresses.
type NAT struct {
	// WANDHCP takes the WAN address and gateway from a DHCP server on the
	// WAN side instead of the WAN port's addresses and Gateway. Default false.
	WANDHCP bool `json:"wanDHCP,omitempty"`
	// Gateway is the IPv4 default gateway on the WAN side; required with a
	// static WAN address, and inside the WAN prefix.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// MasqueradePorts are the WAN source ports masqueraded connections use.
	// Default 1024-65535.
	MasqueradePorts PortRange `json:"masqueradePorts"`
	// Conntrack sizes the connection table and its timeouts.
	Conntrack Conntrack `json:"conntrack"`
	// MSSClamp lowers the TCP MSS option of SYNs crossing the router to fit
	// the outgoing port's MTU. Default true.
	MSSClamp *bool `json:"mssClamp"`
	// Forwards are port forwards (DNAT) from the WAN address to LAN hosts.
	// Default none.
	Forwards []Forward `json:"forwards,omitempty"`
	// WAN is the WAN's link stack above its port (wanlink.go): a VLAN,
	// the DHCP clients' options. Default: the untagged port.
	WAN WANLink `json:"wan,omitzero"`
}

// MSSClampOn reports whether MSS clamping is on (true when unset).
func (n *NAT) MSSClampOn() bool { return n.MSSClamp == nil || *n.MSSClamp }

// Conntrack sizes the connection tracking table.
type Conntrack struct {
	// Size is the number of connections tracked, 256..16777216. Default
	// 65536.
	Size int `json:"size"`
	// Timeouts are idle timeouts per protocol state.
	Timeouts Timeouts `json:"timeouts"`
}

// size returns the table size, the default when unset.
func (c *Conntrack) size() int {
	if c.Size == 0 {
		return DefaultConntrackSize
	}
	return c.Size
}

// Timeouts are conntrack idle timeouts. Every default is Linux's
// (net.netfilter.nf_conntrack_*_timeout_*). Each must be 1s..30 days.
type Timeouts struct {
	TCPSynSent     Duration `json:"tcpSynSent"`     // default 2m
	TCPSynRecv     Duration `json:"tcpSynRecv"`     // default 1m
	TCPEstablished Duration `json:"tcpEstablished"` // default 5 days (120h)
	TCPFinWait     Duration `json:"tcpFinWait"`     // default 2m
	TCPCloseWait   Duration `json:"tcpCloseWait"`   // default 1m
	TCPLastAck     Duration `json:"tcpLastAck"`     // default 30s
	TCPTimeWait    Duration `json:"tcpTimeWait"`    // default 2m
	TCPClose       Duration `json:"tcpClose"`       // default 10s
	UDP            Duration `json:"udp"`            // default 30s (one direction seen)
	UDPStream      Duration `json:"udpStream"`      // default 2m (both directions seen)
	ICMP           Duration `json:"icmp"`           // default 30s
	Generic        Duration `json:"generic"`        // default 10m (other protocols)
}

// DefaultTimeouts are Linux's conntrack timeouts.
var DefaultTimeouts = Timeouts{
	TCPSynSent:     Duration(2 * time.Minute),
	TCPSynRecv:     Duration(time.Minute),
	TCPEstablished: Duration(5 * 24 * time.Hour),
	TCPFinWait:     Duration(2 * time.Minute),
	TCPCloseWait:   Duration(time.Minute),
	TCPLastAck:     Duration(30 * time.Second),
	TCPTimeWait:    Duration(2 * time.Minute),
	TCPClose:       Duration(10 * time.Second),
	UDP:            Duration(30 * time.Second),
	UDPStream:      Duration(2 * time.Minute),
	ICMP:           Duration(30 * time.Second),
	Generic:        Duration(10 * time.Minute),
}

type timeoutField struct {
	name string // the JSON name
	d    *Duration
}

// fields lists the timeouts with their JSON names, in declaration order.
// The names come from the struct tags, so an error's path is the
// document's.
func (t *Timeouts) fields() []timeoutField {
	v := reflect.ValueOf(t).Elem()
	out := make([]timeoutField, v.NumField())
	for i := range out {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		out[i] = timeoutField{name, v.Field(i).Addr().Interface().(*Duration)}
	}
	return out
}

// Defaults of the NAT router.
const DefaultConntrackSize = 65536

// DefaultMasqueradePorts is the default NAT.MasqueradePorts.
var DefaultMasqueradePorts = PortRange{First: 1024, Last: 65535}

// Limits of the NAT router.
const (
	minConntrackSize = 256
	maxConntrackSize = 1 << 24
	maxTimeout       = 30 * 24 * time.Hour
)

func (n *NAT) applyDefaults() {
	if n.MasqueradePorts == (PortRange{}) {
		n.MasqueradePorts = DefaultMasqueradePorts
	}
	if n.Conntrack.Size == 0 {
		n.Conntrack.Size = DefaultConntrackSize
	}
	defaults := DefaultTimeouts.fields()
	for i, f := range n.Conntrack.Timeouts.fields() {
		if *f.d == 0 {
			*f.d = *defaults[i].d
		}
	}
	if n.MSSClamp == nil {
		n.MSSClamp = ptr(true)
	}
	for i := range n.Forwards {
		n.Forwards[i].applyDefaults()
	}
}

// RouterLAN returns the router's LAN address with its prefix (the first
// IPv4 address of a LAN port), invalid when there is none.
func (c *Config) RouterLAN() netip.Prefix {
	if lan := c.routerPrefixes(RoleLAN); len(lan) > 0 {
		return lan[0]
	}
	return netip.Prefix{}
}

// routerPrefixes returns the IPv4 addresses of the enabled ports with the
// role, in order.
func (c *Config) routerPrefixes(role Role) []netip.Prefix {
	var out []netip.Prefix
	for i := range c.Ports {
		p := &c.Ports[i]
		if !p.IsEnabled() || p.Role != role {
			continue
		}
		for _, a := range p.Addresses {
			if a.Addr().Is4() {
				out = append(out, a)
			}
		}
	}
	return out
}

// natRoles checks that NAT mode has one WAN port and LAN ports.
func (v *validator) natRoles() {
	lan := 0
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		if !p.IsEnabled() {
			continue
		}
		switch p.Role {
		case RoleNone:
			v.add(index("ports", i)+".role", "missing; NAT mode needs every enabled port to be lan or wan")
		case RoleWAN:
			if v.wan >= 0 {
				v.add(index("ports", i)+".role", "NAT mode needs exactly one WAN port; ports[%d] is already wan", v.wan)
			} else {
				v.wan = i
			}
		case RoleLAN:
			lan++
		}
	}
	if v.wan < 0 {
		v.add("ports", "NAT mode needs exactly one enabled port with role wan, found none")
	}
	if lan == 0 {
		v.add("ports", "NAT mode needs at least one enabled port with role lan")
	}
}

// natPorts checks what the router needs of its ports: untagged (no
// VLANs), an MTU of at least MinNATMTU, one IPv4 address per side.
func (v *validator) natPorts() {
	var lanAddr string // path of the LAN address
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i)
		if !p.IsEnabled() {
			continue
		}
		switch {
		case p.VLANs.IsZero():
		case p.Role == RoleWAN:
			v.add(join(at, "vlans"), "VLAN-aware ports are for bridge mode; a tagged WAN is nat.wan.vlan")
		default:
			v.add(join(at, "vlans"), "VLAN-aware ports are for bridge mode; the NAT router's LAN ports are untagged")
		}
		if p.MTU >= MinMTU && p.MTU < MinNATMTU {
			v.add(join(at, "mtu"), "%d is below %d, the smallest MTU of a router port", p.MTU, MinNATMTU)
		}
		wanAddr := ""
		for j, a := range p.Addresses {
			aat := index(join(at, "addresses"), j)
			switch {
			case !a.IsValid():
			case !a.Addr().Is4():
				v.add(aat, "%s: NAT mode routes IPv4 only; an IPv6 address on a router port is not supported", a)
			case a.Bits() < 8 || a.Bits() > 30:
				v.add(aat, "%s: the router's subnets are /8 to /30", a)
			case p.Role == RoleWAN && wanAddr != "":
				v.add(aat, "the router has one WAN address (%s already); the first is the masquerade address", wanAddr)
			case p.Role == RoleWAN:
				wanAddr = aat
			case p.Role == RoleLAN && lanAddr != "":
				v.add(aat, "the router has one LAN address (%s already); the LAN ports form one segment", lanAddr)
			case p.Role == RoleLAN:
				lanAddr = aat
			}
		}
	}
}

// nat checks the router's WAN address and gateway, its LAN address, the
// masquerade ports and the connection table.
func (v *validator) nat() {
	n := &v.c.NAT
	wanPrefixes, lanPrefixes := v.c.routerPrefixes(RoleWAN), v.c.routerPrefixes(RoleLAN)
	pppoe := n.WAN.PPPoE != nil // pppoe.go checks the addresses and gateway
	if v.wan >= 0 && !pppoe {
		wan := &v.c.Ports[v.wan]
		at := index("ports", v.wan) + ".addresses"
		switch {
		case n.WANDHCP && len(wan.Addresses) > 0:
			v.add(at, "nat.wanDHCP is on, so DHCP gives the WAN address; remove these addresses or turn wanDHCP off")
		case !n.WANDHCP && len(wanPrefixes) == 0:
			v.add(at, "the WAN port needs a static IPv4 address like \"203.0.113.2/24\" (or set nat.wanDHCP)")
		}
	}
	switch {
	case pppoe:
	case n.WANDHCP && n.Gateway.IsValid():
		v.add("nat.gateway", "nat.wanDHCP is on, so DHCP gives the gateway; remove it")
	case n.WANDHCP:
	case !n.Gateway.IsValid():
		v.add("nat.gateway", "missing; a static WAN address needs the IPv4 address of the upstream router")
	case !n.Gateway.Is4():
		v.add("nat.gateway", "%s is not an IPv4 address", n.Gateway)
	case len(wanPrefixes) > 0 && !slices.ContainsFunc(wanPrefixes, func(p netip.Prefix) bool { return p.Contains(n.Gateway) }):
		v.add("nat.gateway", "%s is not in the WAN subnet %s", n.Gateway, wanPrefixes[0].Masked())
	case slices.ContainsFunc(wanPrefixes, func(p netip.Prefix) bool { return p.Addr() == n.Gateway }):
		v.add("nat.gateway", "%s is the box's own WAN address", n.Gateway)
	}
	firstLAN := slices.IndexFunc(v.c.Ports, func(p Port) bool { return p.IsEnabled() && p.Role == RoleLAN })
	if len(lanPrefixes) == 0 && firstLAN >= 0 {
		v.add(index("ports", firstLAN)+".addresses", "NAT mode needs the router's LAN address (an IPv4 address like \"192.168.1.1/24\") on a LAN port")
	}
	v.portRange("nat.masqueradePorts", n.MasqueradePorts, true)
	if s := n.Conntrack.Size; s != 0 && (s < minConntrackSize || s > maxConntrackSize) {
		v.add("nat.conntrack.size", "%d out of range %d..%d", s, minConntrackSize, maxConntrackSize)
	}
	for _, f := range n.Conntrack.Timeouts.fields() {
		if d := f.d.D(); d != 0 && (d < time.Second || d > maxTimeout) {
			v.add("nat.conntrack.timeouts."+f.name, "%s out of range 1s..%s", *f.d, Duration(maxTimeout))
		}
	}
}

// portRange checks a port or range; zeroOK accepts the unset range (a
// default fills it). It reports whether r is a usable range.
func (v *validator) portRange(at string, r PortRange, zeroOK bool) bool {
	switch {
	case r == (PortRange{}) && zeroOK:
	case r.First == 0:
		v.add(at, "port 0 is not usable; want ports 1..65535 like \"1024-65535\"")
	case r.First > r.Last:
		v.add(at, "range %d-%d is reversed (want %d-%d)", r.First, r.Last, r.Last, r.First)
	default:
		return true
	}
	return false
}
