package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
	"e1kbox/tuning"
)

// Mode is what the dataplane does with frames.
type Mode string

// Modes.
const (
	// ModeBridge is a learning bridge of all ports.
	ModeBridge Mode = "bridge"
	// ModeNAT routes between the WAN port and the LAN segment (the LAN
	// ports and the host port, bridged among themselves), masquerading
	// the LAN behind the WAN address (package nat).
	ModeNAT Mode = "nat"
)

// Role is a data port's side in NAT mode.
type Role string

// The roles.
const (
	RoleLAN Role = "lan"
	RoleWAN Role = "wan"
)

// MaxPorts bounds the number of ports (data ports plus the host port).
const MaxPorts = 32

// Defaults.
const (
	DefaultHostPortName = "host"
	DefaultTxFrames     = 512 // per (worker, out port) TX-only socket
	DefaultReplyFrames  = 64  // the ingress socket's own TX ring (rejects)
)

// Config is the dataplane's configuration. An Engine keeps it as an
// immutable snapshot behind an atomic pointer: workers read it once per
// batch, and Apply replaces it without stopping them. Treat a Config as
// read-only once it was handed to New or Apply.
type Config struct {
	Mode Mode `json:"mode"`
	// Ports are the data ports; their ids (rules.Key.InPort/OutPort, FDB
	// ports) are 1..len(Ports) in this order, the host port's is
	// len(Ports)+1.
	Ports []Port `json:"ports"`
	// HostPort, if set, attaches the box's own stack to the bridge.
	HostPort *HostPort `json:"hostPort,omitempty"`
	Bridge   Bridge    `json:"bridge,omitzero"`
	// Rules is the filter; nil accepts everything.
	Rules *rules.Ruleset `json:"rules,omitempty"`
	// CPU is the plan that pins workers (tuning.CPUPlan.WorkerCPU by
	// interface name); ports it does not name run unpinned.
	CPU  tuning.CPUPlan `json:"cpu,omitzero"`
	Ring Ring           `json:"ring,omitzero"`
	// NAT configures the router of NAT mode (required there, ignored in
	// bridge mode).
	NAT *NAT `json:"nat,omitempty"`
}

// NAT is the router's configuration in NAT mode. The WAN port is the
// port with RoleWAN, the LAN segment the ports with RoleLAN plus the host
// port. See package nat for the meaning of each setting.
type NAT struct {
	// LANAddr is the router's address on the LAN (the LAN hosts'
	// gateway) with the LAN prefix, e.g. 192.168.1.1/24.
	LANAddr netip.Prefix `json:"lanAddr"`
	// WANAddr is the WAN address (the masquerade address) with the WAN
	// prefix; Gateway the next hop of everything off the WAN subnet.
	WANAddr netip.Prefix `json:"wanAddr"`
	Gateway netip.Addr   `json:"gateway"`
	// LANMAC and WANMAC are the router's Ethernet addresses; empty: the
	// MAC of the first LAN port's interface and of the WAN interface.
	LANMAC string `json:"lanMAC,omitempty"`
	WANMAC string `json:"wanMAC,omitempty"`
	// PortMin and PortMax bound the masquerade ports (0: 1024-65535).
	PortMin uint16 `json:"portMin,omitempty"`
	PortMax uint16 `json:"portMax,omitempty"`
	// MaxConns is the connection table's capacity (0: 65536). Changing
	// it needs a restart, which drops the connections.
	MaxConns int `json:"maxConns,omitempty"`
	// Timeouts in seconds; zero fields take nat.DefaultTimeouts.
	Timeouts nat.Timeouts `json:"timeouts,omitzero"`
	// MSSClamp: 0 clamps TCP SYNs to the smaller MTU minus 40, negative
	// turns clamping off, positive is the MSS.
	MSSClamp int `json:"mssClamp,omitempty"`
	// Forwards are the port forwards (DNAT) to LAN hosts.
	Forwards []nat.PortForward `json:"forwards,omitempty"`
}

// Port is one data port.
type Port struct {
	// Name is the port's name in rules (iif/oif) and the dashboard;
	// default: the interface name.
	Name string `json:"name,omitempty"`
	// Interface is the kernel interface, e.g. "eth1".
	Interface string `json:"interface"`
	// MTU is the largest L2 payload forwarded to or accepted from the
	// port; 0 uses the interface MTU.
	MTU int `json:"mtu,omitempty"`
	// Workers is the number of RX rings (PACKET_FANOUT_HASH members, each
	// with its own worker); 0 means 1.
	Workers int `json:"workers,omitempty"`
	// NoLearn stops learning source addresses on the port; NoFlood stops
	// flooding (broadcast, multicast, unknown unicast) to it.
	NoLearn bool `json:"noLearn,omitempty"`
	NoFlood bool `json:"noFlood,omitempty"`
	// Role is the port's side in NAT mode: exactly one RoleWAN port, at
	// least one RoleLAN port. Bridge mode ignores it.
	Role Role `json:"role,omitempty"`
	// VLANs makes the port VLAN-aware (bridge mode); nil: VLAN-unaware,
	// frames pass with their tags (or none) unchanged.
	VLANs *VLANs `json:"vlans,omitempty"`
}

// VLANs is a VLAN-aware port's 802.1Q membership. A frame entering the
// port belongs to its tag's VLAN if that is Native or Allowed, untagged
// (or priority-tagged) frames to Native (dropped when Native is 0);
// anything else is dropped (DropVLAN). Frames leave the port untagged in
// Native, tagged in an Allowed VLAN, and not at all in other VLANs.
// VLAN-unaware ports carry every frame as it is: untagged frames are
// VLAN 0 there, so they reach no VLAN-aware port.
type VLANs struct {
	Native  uint16   `json:"native,omitempty"`  // 1..4094, 0: none
	Allowed []uint16 `json:"allowed,omitempty"` // 1..4094
}

// HostPort is the TAP port that holds the box's own addresses.
type HostPort struct {
	// Name is the port's name in rules; default DefaultHostPortName.
	Name string `json:"name,omitempty"`
	// Interface is the TAP device name; default hostport.DefaultName.
	Interface string `json:"interface,omitempty"`
	MTU       int    `json:"mtu,omitempty"`
	// MAC of the kernel side; empty: random.
	MAC       string         `json:"mac,omitempty"`
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// Bridge are the learning bridge's options.
type Bridge struct {
	// AgingTime of learned entries; 0 means bridge.DefaultAgingTime,
	// negative disables aging.
	AgingTime Duration `json:"agingTime,omitempty"`
	// FDBSize is the FDB capacity; 0 means bridge.DefaultCapacity.
	FDBSize int `json:"fdbSize,omitempty"`
	// Refuse, when the FDB is full, keeps old entries instead of evicting
	// the oldest (see bridge.FullPolicy).
	Refuse bool `json:"refuseWhenFull,omitempty"`
	// SharedVLAN keys the FDB by MAC only.
	SharedVLAN bool `json:"sharedVLAN,omitempty"`
	// Static entries.
	Static []StaticEntry `json:"static,omitempty"`
}

// StaticEntry pins a MAC (in a VLAN, 0 for untagged) to a port by name.
type StaticEntry struct {
	MAC  bridge.MAC `json:"mac"`
	VLAN uint16     `json:"vlan,omitempty"`
	Port string     `json:"port"`
}

// Ring tunes the AF_PACKET rings; zero fields use afpacket's defaults
// (and DefaultTxFrames for the per-pair TX sockets).
type Ring struct {
	// BlockSize and BlockCount size each RX ring; both 0 picks
	// DefaultRxBlockSize × DefaultRxBlocks.
	BlockSize    int      `json:"blockSize,omitempty"`
	BlockCount   int      `json:"blockCount,omitempty"`
	BlockTimeout Duration `json:"blockTimeout,omitempty"`
	TxFrames     int      `json:"txFrames,omitempty"`
}

// Duration is a time.Duration written as text ("300s", "2m") in JSON.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func modeOf(c *Config) Mode {
	if c.Mode == "" {
		return ModeBridge
	}
	return c.Mode
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// portName returns the port's rule name.
func (p *Port) portName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Interface
}

func (h *HostPort) portName() string {
	if h.Name != "" {
		return h.Name
	}
	return DefaultHostPortName
}

// PortNames maps each port's name to its id, as rules.Compile wants it.
func (c *Config) PortNames() map[string]uint16 {
	m := make(map[string]uint16, len(c.Ports)+1)
	for i := range c.Ports {
		m[c.Ports[i].portName()] = uint16(i + 1)
	}
	if c.HostPort != nil {
		m[c.HostPort.portName()] = uint16(len(c.Ports) + 1)
	}
	return m
}

// Validate checks the configuration without touching the system; errors
// name the field.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Mode {
	case ModeBridge, "":
	case ModeNAT:
		errs = append(errs, c.validateNAT()...)
	default:
		add("mode: %q is not supported (want %q or %q)", c.Mode, ModeBridge, ModeNAT)
	}
	n := len(c.Ports)
	if c.HostPort != nil {
		n++
	}
	if len(c.Ports) == 0 {
		add("ports: no data ports")
	}
	if n > MaxPorts {
		add("ports: %d ports, at most %d", n, MaxPorts)
	}
	names := map[string]string{}
	ifaces := map[string]string{}
	seen := func(at, name, iface string) {
		if prev, ok := names[name]; ok {
			add("%s.name: %q already names %s", at, name, prev)
		}
		names[name] = at
		if prev, ok := ifaces[iface]; ok {
			add("%s.interface: %q already used by %s", at, iface, prev)
		}
		ifaces[iface] = at
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		at := fmt.Sprintf("ports[%d]", i)
		if p.Interface == "" || len(p.Interface) > 15 || strings.ContainsAny(p.Interface, "/ \t") {
			add("%s.interface: %q is not an interface name", at, p.Interface)
		}
		if p.MTU != 0 && (p.MTU < 68 || p.MTU > 65535) {
			add("%s.mtu: %d outside 68..65535", at, p.MTU)
		}
		if p.Workers < 0 || p.Workers > 16 {
			add("%s.workers: %d outside 0..16", at, p.Workers)
		}
		if v := p.VLANs; v != nil {
			if c.Mode == ModeNAT {
				add("%s.vlans: VLAN-aware ports are for bridge mode; the NAT router's ports are untagged", at)
			}
			if v.Native > 4094 {
				add("%s.vlans.native: VLAN %d outside 1..4094 (0: none)", at, v.Native)
			}
			for j, id := range v.Allowed {
				if id < 1 || id > 4094 {
					add("%s.vlans.allowed[%d]: VLAN %d outside 1..4094", at, j, id)
				}
			}
		}
		seen(at, p.portName(), p.Interface)
	}
	if h := c.HostPort; h != nil {
		iface := h.Interface
		if iface == "" {
			iface = "e1khost0"
		}
		if len(iface) > 15 || strings.ContainsAny(iface, "/ \t") {
			add("hostPort.interface: %q is not an interface name", iface)
		}
		if h.MTU != 0 && (h.MTU < 68 || h.MTU > 65535) {
			add("hostPort.mtu: %d outside 68..65535", h.MTU)
		}
		if h.MAC != "" {
			if m, err := bridge.ParseMAC(h.MAC); err != nil {
				add("hostPort.mac: %v", err)
			} else if bridge.IsGroup((*[6]byte)(&m)) || bridge.IsZero((*[6]byte)(&m)) {
				add("hostPort.mac: %s is not a unicast address", h.MAC)
			}
		}
		for j, a := range h.Addresses {
			if !a.IsValid() {
				add("hostPort.addresses[%d]: invalid prefix", j)
			}
		}
		seen("hostPort", h.portName(), iface)
	}
	if c.Bridge.FDBSize < 0 || c.Bridge.FDBSize > bridge.MaxCapacity {
		add("bridge.fdbSize: %d outside 0..%d", c.Bridge.FDBSize, bridge.MaxCapacity)
	}
	ids := c.PortNames()
	for j, s := range c.Bridge.Static {
		at := fmt.Sprintf("bridge.static[%d]", j)
		m := [6]byte(s.MAC)
		if bridge.IsGroup(&m) || bridge.IsZero(&m) {
			add("%s.mac: %s is not a unicast address", at, s.MAC)
		}
		if s.VLAN > 4094 {
			add("%s.vlan: %d outside 0..4094", at, s.VLAN)
		}
		if _, ok := ids[s.Port]; !ok {
			add("%s.port: unknown port %q", at, s.Port)
		}
	}
	if c.Ring.TxFrames < 0 || c.Ring.BlockSize < 0 || c.Ring.BlockCount < 0 || c.Ring.BlockTimeout < 0 {
		add("ring: negative size or timeout")
	}
	if c.Rules != nil {
		if _, err := rules.Compile(c.Rules, rules.Options{Ports: ids}); err != nil {
			add("rules: %w", err)
		}
	}
	return errors.Join(errs...)
}

// validateNAT checks the roles and the router's configuration of NAT mode.
func (c *Config) validateNAT() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	wan, lan := 0, 0
	for i := range c.Ports {
		switch c.Ports[i].Role {
		case RoleWAN:
			wan++
		case RoleLAN:
			lan++
		default:
			add("ports[%d].role: %q, want %q or %q in NAT mode", i, c.Ports[i].Role, RoleLAN, RoleWAN)
		}
	}
	if wan != 1 {
		add("ports: NAT mode needs exactly one port with role wan, found %d", wan)
	}
	if lan == 0 {
		add("ports: NAT mode needs at least one port with role lan")
	}
	if c.NAT == nil {
		add("nat: missing in NAT mode")
		return errs
	}
	for _, m := range []struct{ at, v string }{{"nat.lanMAC", c.NAT.LANMAC}, {"nat.wanMAC", c.NAT.WANMAC}} {
		if m.v == "" {
			continue
		}
		if mac, err := bridge.ParseMAC(m.v); err != nil {
			add("%s: %v", m.at, err)
		} else if bridge.IsGroup((*[6]byte)(&mac)) || bridge.IsZero((*[6]byte)(&mac)) {
			add("%s: %s is not a unicast address", m.at, m.v)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// The router's own checks, with stand-ins for what only the system
	// knows (MACs and MTUs of the interfaces).
	nc := c.natConfig(natPorts{wanID: 1, lanID: 2, wanMAC: [6]byte{2, 0, 0, 0, 0, 1}, lanMAC: [6]byte{2, 0, 0, 0, 0, 2}, wanMTU: 1500, lanMTU: 1500})
	if err := nc.Validate(); err != nil {
		add("%w", err)
	}
	return errs
}

// natPorts is what the engine knows of the router's ports when it opens
// them: ids, MACs (LANMAC/WANMAC or the interfaces') and MTUs.
type natPorts struct {
	wanID, lanID   int
	wanMAC, lanMAC [6]byte
	wanMTU, lanMTU int
}

// maxNATMTU is the largest MTU the nat package handles; larger ports are
// treated as having it (bigger packets get fragmentation needed).
const maxNATMTU = 9000

// natConfig returns the nat package's configuration for c and its ports.
func (c *Config) natConfig(p natPorts) nat.Config {
	n := c.NAT
	return nat.Config{
		LAN:      nat.Port{ID: p.lanID, MAC: p.lanMAC[:], Addr: n.LANAddr, MTU: min(p.lanMTU, maxNATMTU)},
		WAN:      nat.Port{ID: p.wanID, MAC: p.wanMAC[:], Addr: n.WANAddr, MTU: min(p.wanMTU, maxNATMTU)},
		Gateway:  n.Gateway,
		PortMin:  n.PortMin,
		PortMax:  n.PortMax,
		MaxConns: n.MaxConns,
		Timeouts: n.Timeouts,
		MSSClamp: n.MSSClamp,
		Forwards: n.Forwards,
	}
}

// sameTopology reports whether b can replace a without reopening sockets:
// same ports in the same order with the same interfaces, MTUs and worker
// counts, the same host port and ring sizes.
func sameTopology(a, b *Config) bool {
	if len(a.Ports) != len(b.Ports) || (a.HostPort == nil) != (b.HostPort == nil) || a.Ring != b.Ring || modeOf(a) != modeOf(b) {
		return false
	}
	for i := range a.Ports {
		p, q := &a.Ports[i], &b.Ports[i]
		if p.portName() != q.portName() || p.Interface != q.Interface || p.MTU != q.MTU || max(p.Workers, 1) != max(q.Workers, 1) {
			return false
		}
		if modeOf(a) == ModeNAT && p.Role != q.Role {
			return false
		}
	}
	if modeOf(a) == ModeNAT {
		// The table is allocated once; the MACs are the router's identity.
		m, n := a.NAT, b.NAT
		if m.LANMAC != n.LANMAC || m.WANMAC != n.WANMAC || orDefault(m.MaxConns, 65536) != orDefault(n.MaxConns, 65536) {
			return false
		}
	}
	if a.HostPort != nil {
		h, k := a.HostPort, b.HostPort
		if h.portName() != k.portName() || h.Interface != k.Interface || h.MTU != k.MTU || h.MAC != k.MAC ||
			fmt.Sprint(h.Addresses) != fmt.Sprint(k.Addresses) {
			return false
		}
	}
	if a.Bridge.FDBSize != b.Bridge.FDBSize || a.Bridge.Refuse != b.Bridge.Refuse || a.Bridge.SharedVLAN != b.Bridge.SharedVLAN {
		return false
	}
	return fmt.Sprint(a.CPU.Ports) == fmt.Sprint(b.CPU.Ports)
}

// The default RX ring: many small blocks. At low rates the kernel retires
// a block after the block timeout with only a few frames in it, so the
// ring holds about blocks × timeout of traffic (128 × 2 ms = 256 ms here;
// 16 × 2 ms = 32 ms with afpacket's own default, which a worker stalled by
// a busy CPU overran in tests); at high rates it holds 8 MiB of frames.
const (
	DefaultRxBlockSize = 64 << 10
	DefaultRxBlocks    = 128
)
