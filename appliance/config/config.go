// Package config is e1kbox's runtime configuration: schema, defaults, validation, migration and atomic persistence with commit-confirm.
package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"e1kbox/rules"
	"e1kbox/tuning"
)

// Version is the schema version this package reads and writes. Older
// versions are migrated by Parse (see migrate.go): version 3 added the
// router services (dhcp, dns, time).
const Version = 3

// Config is the runtime configuration of the box: one JSON document,
// stored as /perm/e1kbox/config.json. Parse fills in every default, so a
// parsed Config has no optional field left unset; the defaults are the
// Default* constants below and are documented per field.
type Config struct {
	// Version is the schema version; always Version after Parse.
	Version int `json:"version"`
	// Mode is what the box does with the data ports: bridge or nat.
	Mode Mode `json:"mode"`
	// Ports are the data ports, in the order the dashboard shows them.
	Ports []Port `json:"ports"`
	// HostPort is the TAP device the dataplane attaches to the bridge (bridge
	// mode) or the LAN (NAT mode), so that the kernel holds the box's own
	// address on the data side. nil: no host port.
	HostPort *HostPort `json:"hostPort,omitempty"`
	// Bridge configures the L2 forwarding: the bridge in bridge mode, the
	// LAN segment (the LAN ports and the host port) in NAT mode.
	Bridge Bridge `json:"bridge"`
	// NAT configures the NAT router; used in NAT mode only.
	NAT NAT `json:"nat"`
	// Rules is the packet filter in the rules package's JSON form. Port
	// names in iif/oif are Port.Name (or HostPort.Name).
	Rules rules.Ruleset `json:"rules"`
	// Tuning is the NIC and kernel knob plan. Data ports that it does not
	// list are tuned as tuning.DataPort (see TuningPlan).
	Tuning tuning.Plan `json:"tuning"`
	// Dashboard configures the web UI and API.
	Dashboard Dashboard `json:"dashboard"`
	// DHCP is the LAN's DHCPv4 server; used in NAT mode only.
	DHCP DHCPServer `json:"dhcp"`
	// DNS is the LAN's DNS forwarder and cache; used in NAT mode only.
	DNS DNSServer `json:"dns"`
	// Time keeps the box's clock (NTP).
	Time Time `json:"time"`
	// FastPath is the in-kernel fast path for established flows: auto
	// (its default hook, tcx, where the kernel runs it), tcx, xdp (generic
	// XDP: only without VLAN-tagged traffic) or off (the rings carry
	// everything). Default auto.
	FastPath FastPath `json:"fastPath"`
	// IPv6 is routed IPv6 through the NAT router; used in NAT mode only.
	IPv6 IPv6 `json:"ipv6"`
}

// FastPath selects the fast path's hook, or none.
type FastPath string

// The fast path settings.
const (
	FastPathAuto FastPath = "auto"
	FastPathTCX  FastPath = "tcx"
	FastPathXDP  FastPath = "xdp"
	FastPathOff  FastPath = "off"
)

// IPv6 routes IPv6 in NAT mode without translation: the WAN asks the ISP
// for a prefix by DHCPv6 prefix delegation (or has a static one), the LAN gets its first /64 by
// router advertisements (SLAAC) from the box's stack on the host port, and
// a stateful firewall admits from the WAN only replies and what forward
// rules accept. Without a delegation nothing is announced or routed.
type IPv6 struct {
	// Enabled runs it. Default: on in NAT mode, off in bridge mode.
	Enabled *bool `json:"enabled"`
	// PrefixLength is the delegation size asked for (a hint: the ISP may
	// delegate another), 48 to 64. Default: 56.
	PrefixLength int `json:"prefixLength,omitempty"`
	// Prefix is a static delegated prefix, /48 to /64, for an ISP that
	// routes a fixed one to the box: set, the DHCPv6 client does not run
	// and the LAN gets its first /64 as from a delegation. Default: none
	// (the prefix comes by DHCPv6).
	Prefix netip.Prefix `json:"prefix,omitzero"`
	// Gateway is the WAN next hop, link-local or global. Default: none
	// (the source of the WAN's router advertisements).
	Gateway netip.Addr `json:"gateway,omitzero"`
	// DHCPServer runs the LAN's stateless DHCPv6 server (RFC 8415 6.1:
	// DNS servers and search domains to hosts that ask, no addresses) and
	// sets the O flag in the RAs. Ignored while IPv6 is off. Default: as
	// Enabled.
	DHCPServer *bool `json:"dhcpServer"`
	// WANAddress is how the box gets its own global WAN address: auto
	// (SLAAC where the ISP's router advertisements allow it, and an IA_NA
	// address asked for with the delegation; either may be absent), slaac,
	// dhcpv6, or off (the link-local address only). With a static prefix
	// auto is SLAAC only and dhcpv6 runs the DHCPv6 client for the
	// address alone. Default auto.
	WANAddress WANAddress `json:"wanAddress,omitempty"`
}

// WANAddress selects the box's own global WAN addresses.
type WANAddress string

// The WAN address settings.
const (
	WANAddressAuto   WANAddress = "auto"
	WANAddressSLAAC  WANAddress = "slaac"
	WANAddressDHCPv6 WANAddress = "dhcpv6"
	WANAddressOff    WANAddress = "off"
)

// WANSLAAC says whether the box forms SLAAC addresses on the WAN.
func (s *IPv6) WANSLAAC() bool {
	return s.WANAddress == WANAddressAuto || s.WANAddress == WANAddressSLAAC || s.WANAddress == ""
}

// WANIANA says whether the DHCPv6 client asks for an address (IA_NA): for
// auto beside a delegated prefix, and for dhcpv6.
func (s *IPv6) WANIANA() bool {
	return s.WANAddress == WANAddressDHCPv6 || (s.WANAddress == WANAddressAuto || s.WANAddress == "") && !s.HasStaticPrefix()
}

// HasStaticPrefix reports whether the prefix is static (ipv6.prefix)
// rather than delegated by DHCPv6.
func (s *IPv6) HasStaticPrefix() bool { return s.Prefix.IsValid() }

// IsEnabled reports whether IPv6 is routed.
func (s *IPv6) IsEnabled() bool { return s.Enabled != nil && *s.Enabled }

// DHCPServerOn reports whether the stateless DHCPv6 server runs: IPv6 is
// routed and dhcpServer is not false.
func (s *IPv6) DHCPServerOn() bool { return s.IsEnabled() && (s.DHCPServer == nil || *s.DHCPServer) }

// DHCPServer is the LAN's DHCPv4 server. It answers on the router's LAN
// address and hands out the router as gateway and DNS server.
type DHCPServer struct {
	// Enabled runs the server. Default: on in NAT mode (off in a version
	// 2 config migrated to 3, which had none), off in bridge mode.
	Enabled *bool `json:"enabled"`
	// Range is the pool, "192.168.1.100-192.168.1.250", inside the LAN
	// subnet. Default: the whole subnet but the network, broadcast,
	// router and host port addresses.
	Range AddrRange `json:"range,omitzero"`
	// LeaseTime is how long a lease lasts, 2m..30 days. Default 12h.
	LeaseTime Duration `json:"leaseTime"`
	// Static are fixed leases. Default none.
	Static []StaticLease `json:"static,omitempty"`
}

// IsEnabled reports whether the server runs.
func (d *DHCPServer) IsEnabled() bool { return d.Enabled != nil && *d.Enabled }

// StaticLease gives a device (by MAC) a fixed address and name.
type StaticLease struct {
	MAC rules.MAC `json:"mac"`
	// Address is an IPv4 address of the LAN subnet, not the router's; it
	// may lie inside or outside Range.
	Address netip.Addr `json:"address"`
	// Hostname is the device's DNS name under dns.domain (a DNS label).
	// Default: the name the device sends.
	Hostname string `json:"hostname,omitempty"`
}

// DNSServer is the LAN's DNS forwarder and cache on the router's LAN
// address (UDP and TCP 53; never on the WAN side).
type DNSServer struct {
	// Enabled runs the server; defaults as DHCPServer.Enabled.
	Enabled *bool `json:"enabled"`
	// Domain is the local domain: LAN devices are <hostname>.<domain>,
	// and the DHCP server hands it out. Default "lan".
	Domain string `json:"domain"`
	// Upstreams are the DNS servers asked for everything else. Default:
	// those of the WAN DHCP lease; with a static WAN address and none
	// here, only local names are answered.
	Upstreams []netip.Addr `json:"upstreams,omitempty"`
	// CacheSize bounds the cached answers, 0..1000000. Default 10000.
	CacheSize int `json:"cacheSize"`
}

// IsEnabled reports whether the server runs.
func (d *DNSServer) IsEnabled() bool { return d.Enabled != nil && *d.Enabled }

// Time configures the NTP client that keeps the box's clock.
type Time struct {
	// Servers are NTP servers (names or addresses). Default: gokrazy's
	// pool, 0-3.gokrazy.pool.ntp.org.
	Servers []string `json:"servers,omitempty"`
	// FromDHCP also asks the NTP servers of the WAN DHCP lease (option
	// 42), first. Default true.
	FromDHCP *bool `json:"fromDHCP"`
}

// AddrRange is an inclusive range of IPv4 addresses, written
// "192.168.1.100-192.168.1.250" in JSON.
type AddrRange struct {
	First, Last netip.Addr
}

// IsZero reports whether r is unset.
func (r AddrRange) IsZero() bool { return !r.First.IsValid() && !r.Last.IsValid() }

func (r AddrRange) String() string {
	if r.IsZero() {
		return ""
	}
	return r.First.String() + "-" + r.Last.String()
}

// MarshalText implements encoding.TextMarshaler.
func (r AddrRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *AddrRange) UnmarshalText(b []byte) error {
	lo, hi, ok := strings.Cut(string(b), "-")
	first, err1 := netip.ParseAddr(strings.TrimSpace(lo))
	last, err2 := netip.ParseAddr(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("bad address range %q (want a range like \"192.168.1.100-192.168.1.250\")", b)
	}
	*r = AddrRange{First: first, Last: last}
	return nil
}

// Mode selects bridge or NAT operation.
type Mode string

// The modes.
const (
	// ModeBridge forwards frames between all enabled ports by MAC address
	// (a transparent, learning switch with a packet filter).
	ModeBridge Mode = "bridge"
	// ModeNAT routes between one WAN port and a LAN segment made of the LAN
	// ports, masquerading LAN hosts behind the WAN address.
	ModeNAT Mode = "nat"
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

// Protects reports whether loop protection is on (the default).
func (b *Bridge) Protects() bool { return b.LoopProtection == nil || *b.LoopProtection }

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

// Bridge configures MAC learning.
type Bridge struct {
	// FDBAging is how long a learned MAC address stays without traffic.
	// Default 300s (like Linux bridges).
	FDBAging Duration `json:"fdbAging"`
	// FDBSize is the capacity of the forwarding database (learned and
	// static entries), 16..4194304. Default 8192.
	FDBSize int `json:"fdbSize"`
	// FDBFull says what learning does when the forwarding database has
	// no room for a new MAC address: "evict" replaces the oldest entry
	// that was seen only once (a flood of forged addresses churns its own
	// entries; stations that talk keep theirs), "refuse" keeps every
	// entry and floods frames to the new address. Default "evict".
	FDBFull string `json:"fdbFull,omitempty"`
	// LoopProtection probes the bridged ports for a loop outside the box
	// (a cable or a switch joining two ports, or a port's segment to
	// itself) and blocks a port of the loop until it is gone. Default
	// true.
	LoopProtection *bool `json:"loopProtection,omitempty"`
	// Static are fixed FDB entries; they never age and are never relearned
	// elsewhere. Default none.
	Static []StaticFDB `json:"static,omitempty"`
}

// StaticFDB pins a MAC address to a port.
type StaticFDB struct {
	// MAC is a unicast Ethernet address.
	MAC rules.MAC `json:"mac"`
	// Port is a port name (Port.Name or HostPort.Name).
	Port string `json:"port"`
	// VLAN is the VLAN id the entry is for, 1..4094; 0 means untagged or a
	// VLAN-unaware port. Default 0.
	VLAN uint16 `json:"vlan,omitempty"`
}

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

// Forward is a port forward: connections to WANPorts on the WAN address go
// to LANHost. A range maps one to one onto LANPort, LANPort+1, ...
type Forward struct {
	// Proto is tcp or udp.
	Proto string `json:"proto"`
	// WANPorts is the port or range on the WAN address, e.g. "443" or
	// "6000-6010".
	WANPorts PortRange `json:"wanPorts"`
	// LANHost is the IPv4 address of the LAN host, inside a LAN prefix.
	LANHost netip.Addr `json:"lanHost"`
	// LANPort is the first destination port on the LAN host. Default: the
	// first of WANPorts.
	LANPort uint16 `json:"lanPort"`
	// Comment is free text for the dashboard. Default "".
	Comment string `json:"comment,omitempty"`
}

// Dashboard configures the web UI.
type Dashboard struct {
	// Listen is the dashboard's TCP listen address. Default ":8080".
	Listen string `json:"listen"`
	// ConfirmTimeout is how long an applied change waits for confirmation
	// before it rolls back by itself, 5s..1h. Default 60s.
	ConfirmTimeout Duration `json:"confirmTimeout"`
	// UpdateKey is the ed25519 public key (base64 of its 32 bytes) that
	// firmware updates must be signed with (`firmware build -sign`); the
	// box refuses an unsigned or wrongly signed update. Default "": any
	// update is taken.
	UpdateKey string `json:"updateKey,omitempty"`
	// InternetProbe is a host (an IPv4 address or a name) the box pings
	// every 30 s to show on the overview whether the Internet is
	// reachable; "" (the default) probes nothing. NAT mode.
	InternetProbe string `json:"internetProbe,omitempty"`
}

// UpdatePublicKey is UpdateKey decoded (nil if unset or malformed, which
// Validate refuses).
func (d *Dashboard) UpdatePublicKey() ed25519.PublicKey {
	b, err := base64.StdEncoding.DecodeString(d.UpdateKey)
	if d.UpdateKey == "" || err != nil || len(b) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(b)
}

// Defaults of optional fields.
const (
	DefaultMTU               = 1500
	DefaultHostPortName      = "host"
	DefaultHostPortInterface = "e1khost0"
	DefaultFDBAging          = 300 * time.Second
	DefaultFDBSize           = 8192
	FDBEvict                 = "evict"
	FDBRefuse                = "refuse"
	DefaultConntrackSize     = 65536
	DefaultListen            = ":8080"
	DefaultConfirmTimeout    = 60 * time.Second
	DefaultLeaseTime         = 12 * time.Hour
	DefaultDomain            = "lan"
	DefaultDNSCacheSize      = 10000
)

// DefaultNTPServers are the NTP servers of Time.Servers by default:
// gokrazy's pool, as its own ntp program uses.
var DefaultNTPServers = []string{"0.gokrazy.pool.ntp.org", "1.gokrazy.pool.ntp.org", "2.gokrazy.pool.ntp.org", "3.gokrazy.pool.ntp.org"}

// DefaultMasqueradePorts is the default NAT.MasqueradePorts.
var DefaultMasqueradePorts = PortRange{First: 1024, Last: 65535}

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

// Duration is a time.Duration written as a Go duration string ("300s",
// "1m30s") in JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (want a Go duration like \"300s\" or \"1m30s\")", b)
	}
	*d = Duration(v)
	return nil
}

// PortRange is an inclusive range of TCP/UDP ports, written "443" or
// "1024-65535" in JSON.
type PortRange struct {
	First, Last uint16
}

// Len returns the number of ports in r (0 if reversed).
func (r PortRange) Len() int {
	if r.Last < r.First {
		return 0
	}
	return int(r.Last) - int(r.First) + 1
}

// Overlaps reports whether r and o share a port.
func (r PortRange) Overlaps(o PortRange) bool { return r.First <= o.Last && o.First <= r.Last }

func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return strconv.Itoa(int(r.First)) + "-" + strconv.Itoa(int(r.Last))
}

// MarshalText implements encoding.TextMarshaler.
func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Validate checks the
// order and the zero port.
func (r *PortRange) UnmarshalText(b []byte) error {
	s := string(b)
	lo, hi, isRange := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(lo, 10, 16)
	last, err2 := first, error(nil)
	if isRange {
		last, err2 = strconv.ParseUint(hi, 10, 16)
	}
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bad port range %q (want a port like \"443\" or a range like \"1024-65535\")", s)
	}
	*r = PortRange{First: uint16(first), Last: uint16(last)}
	return nil
}

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

// RouterLAN returns the router's LAN address with its prefix (the first
// IPv4 address of a LAN port), invalid when there is none.
func (c *Config) RouterLAN() netip.Prefix {
	for _, p := range c.LANPorts() {
		for _, a := range p.Addresses {
			if a.Addr().Is4() {
				return a
			}
		}
	}
	return netip.Prefix{}
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

// TuningPlan returns the tuning plan to apply: Tuning, with every enabled
// data port's interface marked Data, and a tuning.DataPort plan (offloads
// off) added for enabled data ports that Tuning does not list.
func (c *Config) TuningPlan() tuning.Plan {
	p := c.Tuning
	p.Ports = append([]tuning.PortPlan(nil), c.Tuning.Ports...)
	for _, port := range c.Ports {
		if !port.IsEnabled() {
			continue
		}
		found := false
		for i := range p.Ports {
			if p.Ports[i].Name == port.Interface {
				p.Ports[i].Data = true
				found = true
			}
		}
		if !found {
			p.Ports = append(p.Ports, tuning.DataPort(port.Interface))
		}
	}
	return p
}
