package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
	"e1kbox/tuning"
)

// Config is the dataplane's configuration: plain typed values that the
// appliance derives from its runtime config, which is where a user's
// config is validated (package appliance/config). The engine keeps it as
// an immutable snapshot behind an atomic pointer: workers read it once per
// batch, and Apply replaces it without stopping them. Treat a Config as
// read-only once it was handed to New or Apply. Zero fields mean the
// documented defaults.
type Config struct {
	Mode Mode
	// Ports are the data ports; their ids (rules.Key.InPort/OutPort, FDB
	// ports) are 1..len(Ports) in this order, the host port's is
	// len(Ports)+1.
	Ports []Port
	// HostPort, if set, attaches the box's own stack to the bridge.
	HostPort *HostPort
	Bridge   Bridge
	// Rules is the filter; nil accepts everything.
	Rules *rules.Ruleset
	// CPU is the plan that pins workers (tuning.CPUPlan.WorkerCPU by
	// interface name); ports it does not name run unpinned.
	CPU  tuning.CPUPlan
	Ring Ring
	// NAT configures the router of NAT mode (required there, ignored in
	// bridge mode).
	NAT *NAT
	// FastPath selects the in-kernel fast path for established flows
	// (see fastpath_linux.go); "" is FastPathAuto.
	FastPath FastPathMode
}

// FastPathMode selects the fast path's hook, or none.
type FastPathMode string

// The fast path modes.
const (
	// FastPathAuto runs the fast path in its default hook (tcx ingress
	// with a socket filter on the rings) wherever it loads; where it does
	// not, the rings carry everything and the snapshot says why.
	FastPathAuto FastPathMode = "auto"
	FastPathTCX  FastPathMode = "tcx" // tcx ingress, the rings bound behind it
	FastPathXDP  FastPathMode = "xdp" // generic XDP (no VLAN-tagged traffic)
	// FastPathOff forwards everything on the rings.
	FastPathOff FastPathMode = "off"
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
type Role uint8

// The roles.
const (
	RoleLAN Role = iota
	RoleWAN
)

// MaxPorts bounds the number of ports (data ports plus the host port).
const MaxPorts = 32

// Defaults.
const (
	DefaultHostPortName = "host"
	DefaultTxFrames     = 512 // per (worker, out port) TX-only socket
	DefaultReplyFrames  = 64  // the ingress socket's own TX ring (rejects)
)

// The default RX ring: many small blocks, so that at low rates, where the
// kernel retires a block after the block timeout with only a few frames in
// it, the ring still holds a few hundred milliseconds of traffic (see
// docs/dataplane.md).
const (
	DefaultRxBlockSize = 64 << 10
	DefaultRxBlocks    = 128
)

// NAT is the router's configuration in NAT mode. The WAN port is the
// port with RoleWAN, the LAN segment the ports with RoleLAN plus the host
// port. See package nat for the meaning of each setting.
type NAT struct {
	// LANAddr is the router's address on the LAN (the LAN hosts'
	// gateway) with the LAN prefix, e.g. 192.168.1.1/24.
	LANAddr netip.Prefix
	// WANAddr is the WAN address (the masquerade address) with the WAN
	// prefix; Gateway the next hop of everything off the WAN subnet.
	WANAddr netip.Prefix
	Gateway netip.Addr
	// WANMTU, when not 0, lowers the WAN's MTU below the port's (a DHCP
	// lease's option 26, PPPoE's 1492); it is applied live.
	WANMTU int
	// LANMAC and WANMAC are the router's Ethernet addresses; zero: the
	// MAC of the first LAN port's interface and of the WAN interface.
	LANMAC, WANMAC bridge.MAC
	// PortMin and PortMax bound the masquerade ports (0: 1024-65535).
	PortMin, PortMax uint16
	// MaxConns is the connection table's capacity (0: 65536). It is
	// allocated once: a new size needs a new engine.
	MaxConns int
	// Timeouts in seconds; zero fields take nat.DefaultTimeouts.
	Timeouts nat.Timeouts
	// MSSClamp: 0 clamps TCP SYNs to the smaller MTU minus 40, negative
	// turns clamping off, positive is the MSS.
	MSSClamp int
	// Forwards are the port forwards (DNAT) to LAN hosts.
	Forwards []nat.PortForward
	// IPv6 routes IPv6 through package route6 instead of dropping it: the
	// engine gives it the ports' link-local addresses (modified EUI-64 of
	// LANMAC and WANMAC); the prefixes come later through
	// Engine.IPv6().SetPrefixes. It needs a new engine to change.
	IPv6 bool
	// IPv6Gateway is the IPv6 router's WAN next hop (route6.Config.Gateway),
	// link-local or global; invalid: learnt from the WAN's router
	// advertisements. It is applied live.
	IPv6Gateway netip.Addr
	// WANVLAN makes the WAN port a tagged link (wanlink.go): it takes
	// only frames of that VLAN, and the router's frames leave tagged.
	// Zero: untagged. It is applied live.
	WANVLAN WANVLAN
	// WANPPPoE makes the WAN a PPPoE link (wanlink_pppoe.go): the router's
	// IPv4 and IPv6 travel in PPPoESession, the session the PPPoE client
	// (Engine.PPPoE) negotiated; while it is zero the router's frames to
	// the WAN are dropped. With a session, WANAddr is IPCP's address (a
	// /32), Gateway the peer's and WANMTU the session's MTU. Turning it
	// on or off restarts the WAN port; the session applies live.
	WANPPPoE     bool
	PPPoESession PPPoESession
}

// Port is one data port.
type Port struct {
	// Name is the port's name in rules (iif/oif) and the dashboard;
	// default: the interface name.
	Name string
	// Interface is the kernel interface, e.g. "eth1".
	Interface string
	// MTU is the largest L2 payload forwarded to or accepted from the
	// port; 0 uses the interface MTU.
	MTU int
	// Workers is the number of RX rings (PACKET_FANOUT_HASH members, each
	// with its own worker); 0 means 1.
	Workers int
	// NoLearn stops learning source addresses on the port; NoFlood stops
	// flooding (broadcast, multicast, unknown unicast) to it.
	NoLearn, NoFlood bool
	// Role is the port's side in NAT mode: exactly one RoleWAN port, at
	// least one RoleLAN port. Bridge mode ignores it.
	Role Role
	// VLANs makes the port VLAN-aware (bridge mode); nil: VLAN-unaware,
	// frames pass with their tags (or none) unchanged.
	VLANs *VLANs
}

// VLANs is a VLAN-aware port's 802.1Q membership. A frame entering the
// port belongs to its tag's VLAN if that is Native or Allowed, untagged
// (or priority-tagged) frames to Native (dropped when Native is 0);
// anything else is dropped (DropVLAN). Frames leave the port untagged in
// Native, tagged in an Allowed VLAN, and not at all in other VLANs.
// VLAN-unaware ports carry every frame as it is: untagged frames are
// VLAN 0 there, so they reach no VLAN-aware port.
type VLANs struct {
	Native  uint16   // 1..4094, 0: none
	Allowed []uint16 // 1..4094
}

// HostPort is the TAP port that holds the box's own addresses.
type HostPort struct {
	// Name is the port's name in rules; default DefaultHostPortName.
	Name string
	// Interface is the TAP device name; default hostport.DefaultName.
	Interface string
	MTU       int
	// MAC of the kernel side; zero: random.
	MAC       bridge.MAC
	Addresses []netip.Prefix
}

// Bridge are the learning bridge's options.
type Bridge struct {
	// AgingTime of learned entries; 0 means bridge.DefaultAgingTime,
	// negative disables aging.
	AgingTime time.Duration
	// FDBSize is the FDB capacity; 0 means bridge.DefaultCapacity.
	FDBSize int
	// Refuse, when the FDB is full, keeps old entries instead of evicting
	// the oldest (see bridge.FullPolicy).
	Refuse bool
	// SharedVLAN keys the FDB by MAC only.
	SharedVLAN bool
	// NoLoopProtect turns loop protection off (loop.go): no probes, no
	// port blocked.
	NoLoopProtect bool
	// Static entries.
	Static []StaticEntry
}

// StaticEntry pins a MAC (in a VLAN, 0 for untagged) to a port by name.
type StaticEntry struct {
	MAC  bridge.MAC
	VLAN uint16
	Port string
}

// Ring tunes the AF_PACKET rings; zero fields use afpacket's defaults
// (and DefaultTxFrames for the per-pair TX sockets).
type Ring struct {
	// Kind is the RX ring: RingFrames (TPACKET_V2: a frame reaches its
	// worker as soon as the kernel wrote it) or RingBlocks (TPACKET_V3:
	// frames wait until their block is full or retired by the block
	// timeout); "" is DefaultRingKind, or RingBlocks when BlockSize or
	// BlockCount is set.
	Kind RingKind
	// Frames sizes a RingFrames ring (0: DefaultRxFrames).
	Frames int
	// BlockSize and BlockCount size a RingBlocks ring; both 0 picks
	// DefaultRxBlockSize × DefaultRxBlocks.
	BlockSize, BlockCount int
	BlockTimeout          time.Duration
	TxFrames              int
}

// RingKind is the layout of the RX rings.
type RingKind string

// The ring kinds.
const (
	RingFrames RingKind = "frames"
	RingBlocks RingKind = "blocks"
	// DefaultRingKind is frames: the block retire timeout (2 ms, rounded
	// up to the kernel's timer tick) held every frame of a quiet flow
	// that long (docs/dataplane.md, Measured).
	DefaultRingKind = RingFrames
	// DefaultRxFrames is a frame ring's size per worker.
	DefaultRxFrames = 8192
)

func modeOf(c *Config) Mode {
	if c.Mode == "" {
		return ModeBridge
	}
	return c.Mode
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

// Check reports whether the engine can run c: the invariants New and
// Apply rely on (a port set it can number, a router configuration package
// nat accepts, rules that compile). It is not a user-facing validator: the
// appliance validates a user's config (with JSON paths) before it derives
// a Config, and its tests show that every config it accepts passes Check.
func (c *Config) Check() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	n := len(c.Ports)
	if c.HostPort != nil {
		n++
	}
	switch {
	case len(c.Ports) == 0:
		add("no data ports")
	case n > MaxPorts:
		add("%d ports, at most %d", n, MaxPorts)
	}
	if m := modeOf(c); m != ModeBridge && m != ModeNAT {
		add("mode %q", m)
	}
	switch c.FastPath {
	case "", FastPathAuto, FastPathTCX, FastPathXDP, FastPathOff:
	default:
		add("fast path %q", c.FastPath)
	}
	switch c.Ring.Kind {
	case "", RingFrames, RingBlocks:
	default:
		add("ring kind %q", c.Ring.Kind)
	}
	ids := c.PortNames()
	if len(ids) != n {
		add("port names are not unique: %v", ids)
	}
	for _, s := range c.Bridge.Static {
		if _, ok := ids[s.Port]; !ok {
			add("static FDB entry %s: unknown port %q", s.MAC, s.Port)
		}
	}
	if modeOf(c) == ModeNAT {
		if err := c.checkNAT(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Rules != nil {
		if _, err := rules.Compile(c.Rules, rules.Options{Ports: ids}); err != nil {
			add("rules: %w", err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: config: %w", err)
	}
	return nil
}

// routedOnly reports whether port i only routes, so that the frames its
// demote marks (other EtherTypes, tagged frames) are the router's to drop
// and a small ring takes them: in NAT mode an untagged WAN port without
// PPPoE (on a tagged one, NAT.WANVLAN, every frame of the router is
// tagged; on a PPPoE one, NAT.WANPPPoE, every frame is PPPoE), and a
// LAN port that is the LAN segment's only data port (it bridges to
// nothing but the host port, whose stack speaks IPv4, IPv6 and ARP).
func (c *Config) routedOnly(i int) bool {
	if modeOf(c) != ModeNAT {
		return false
	}
	if c.Ports[i].Role == RoleWAN {
		return c.NAT == nil || c.NAT.WANVLAN.ID == 0 && !c.NAT.WANPPPoE
	}
	lan := 0
	for j := range c.Ports {
		if c.Ports[j].Role == RoleLAN {
			lan++
		}
	}
	return lan == 1
}

// checkNAT checks the roles and, with stand-ins for what only the system
// knows (MACs and MTUs of the interfaces), the router's configuration.
func (c *Config) checkNAT() error {
	wan, lan := 0, 0
	for i := range c.Ports {
		if c.Ports[i].Role == RoleWAN {
			wan++
		} else {
			lan++
		}
	}
	switch {
	case wan != 1 || lan == 0:
		return fmt.Errorf("NAT mode needs one WAN port and LAN ports, has %d and %d", wan, lan)
	case c.NAT == nil:
		return errors.New("NAT mode without a router configuration")
	}
	p := natPorts{wanID: 1, lanID: 2, wanMAC: [6]byte{2, 0, 0, 0, 0, 1}, lanMAC: [6]byte{2, 0, 0, 0, 0, 2}, wanMTU: 1500, lanMTU: 1500}
	if c.HostPort != nil {
		p.hostID = len(c.Ports) + 1
	}
	if c.NAT.WANMAC != ([6]byte{}) {
		p.wanMAC = c.NAT.WANMAC
	}
	if c.NAT.LANMAC != ([6]byte{}) {
		p.lanMAC = c.NAT.LANMAC
	}
	for _, port := range c.Ports {
		if port.MTU == 0 {
			continue
		}
		if port.Role == RoleWAN {
			p.wanMTU = port.MTU
		} else {
			p.lanMTU = min(p.lanMTU, port.MTU)
		}
	}
	if err := c.NAT.WANVLAN.check(); err != nil {
		return err
	}
	if err := c.NAT.PPPoESession.check(); err != nil {
		return err
	}
	if g := c.NAT.IPv6Gateway; g.IsValid() && (!g.Is6() || g.Is4In6() || !(g.IsLinkLocalUnicast() || g.IsGlobalUnicast())) {
		return fmt.Errorf("IPv6 gateway %v is not a unicast IPv6 address", g)
	}
	return c.natConfig(p).Validate()
}

// natPorts is what the engine knows of the router's ports when it opens
// them: ids, MACs (LANMAC/WANMAC or the interfaces') and MTUs.
type natPorts struct {
	wanID, lanID   int
	hostID         int // the host port (the box's own stack), 0 without
	wanMAC, lanMAC [6]byte
	wanMTU, lanMTU int
	v6             *route6.Router // NAT.IPv6
}

// maxNATMTU is the largest MTU the nat package handles; larger ports are
// treated as having it (bigger packets get fragmentation needed).
const maxNATMTU = 9000

// hostAddrs are the host port's IPv4 addresses besides the LAN address
// (nat.Config.HostAddrs) when it is the box's stack.
func hostAddrs(c *Config, p natPorts) []netip.Addr {
	if p.hostID == 0 || c.HostPort == nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range c.HostPort.Addresses {
		if a.Addr().Is4() && a.Addr() != c.NAT.LANAddr.Addr() {
			out = append(out, a.Addr())
		}
	}
	return out
}

// linkMTU is the largest IP packet the WAN link carries on a port of
// MTU port: on a PPPoE WAN the session header takes 8 bytes of it (an
// 802.1Q tag is outside the port's MTU).
func (n *NAT) linkMTU(port int) int {
	if n.WANPPPoE {
		return port - pppoeHeaderLen
	}
	return port
}

// wanMTU is the router's WAN MTU: the port's, lowered by NAT.WANMTU.
func wanMTU(port, lease int) int {
	if lease > 0 {
		port = min(port, lease)
	}
	return min(port, maxNATMTU)
}

// natConfig returns the nat package's configuration for c and its ports.
func (c *Config) natConfig(p natPorts) nat.Config {
	n := c.NAT
	var peer net.HardwareAddr
	if n.WANPPPoE && n.PPPoESession != (PPPoESession{}) {
		// A point-to-point WAN: the router sends everything to the AC.
		peer = net.HardwareAddr(n.PPPoESession.ACMAC[:])
	}
	return nat.Config{
		WANPeerMAC: peer,
		LAN:        nat.Port{ID: p.lanID, MAC: p.lanMAC[:], Addr: n.LANAddr, MTU: min(p.lanMTU, maxNATMTU)},
		WAN:        nat.Port{ID: p.wanID, MAC: p.wanMAC[:], Addr: n.WANAddr, MTU: wanMTU(n.linkMTU(p.wanMTU), n.WANMTU)},
		Host:       p.hostID,
		HostAddrs:  hostAddrs(c, p),
		Gateway:    n.Gateway,
		PortMin:    n.PortMin,
		PortMax:    n.PortMax,
		MaxConns:   n.MaxConns,
		Timeouts:   n.Timeouts,
		MSSClamp:   n.MSSClamp,
		Forwards:   n.Forwards,
		IPv6:       p.v6,
	}
}
