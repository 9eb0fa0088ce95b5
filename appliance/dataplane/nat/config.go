package nat

import (
	"crypto/rand"
	"e1kbox/appliance/dataplane/frame"
	"encoding/binary"
	"net"
	"net/netip"

	"e1kbox/appliance/dataplane/route6"
)

// Port describes one side of the router.
type Port struct {
	// ID is the engine's port id. Results name ports by it and it is what
	// rules see in Key.InPort/OutPort.
	ID int
	// MAC is the port's Ethernet address (6 bytes).
	MAC net.HardwareAddr
	// Addr is the box's address on the port and its on-link subnet, e.g.
	// 192.168.1.1/24. On the WAN it may be the zero Prefix until a DHCP
	// client supplies one (Router.SetWAN); until then the WAN forwards
	// nothing and only DHCP replies and broadcasts reach the host.
	Addr netip.Prefix
	// MTU is the largest IP packet the port sends (default 1500).
	MTU int
}

// PortForward is a port forward (DNAT): TCP or UDP connections from the WAN to
// the WAN address and a port in [Port, PortEnd] go to To.Addr() at port
// To.Port() + (port - Port).
type PortForward struct {
	Proto   uint8  // frame.ProtoTCP or frame.ProtoUDP
	Port    uint16 // first WAN port
	PortEnd uint16 // last WAN port; 0 means Port
	To      netip.AddrPort
}

// Timeouts are connection tracking timeouts. Zero fields take the
// defaults, which follow Linux (nf_conntrack_*_timeout_*) except UDP
// assured, which is 180 s.
type Timeouts struct {
	TCPSynSent, TCPSynRecv, TCPEstablished, TCPFinWait, TCPCloseWait,
	TCPLastAck, TCPTimeWait, TCPClose int // seconds
	UDPUnreplied, UDPAssured int // seconds
	ICMP                     int // seconds, echo request/reply
	Generic                  int // seconds, other IP protocols (GRE, ESP, ...)
}

// DefaultTimeouts are the timeouts zero fields of Timeouts mean.
var DefaultTimeouts = Timeouts{
	TCPSynSent: 120, TCPSynRecv: 60, TCPEstablished: 432000, TCPFinWait: 120,
	TCPCloseWait: 60, TCPLastAck: 30, TCPTimeWait: 120, TCPClose: 10,
	UDPUnreplied: 30, UDPAssured: 180, ICMP: 30, Generic: 600,
}

// Config configures a Router. Zero values mean the documented defaults.
type Config struct {
	LAN, WAN Port
	// Host is the engine's port id of the box's own network stack on the
	// LAN segment (the host port), whose address is the LAN address: 0
	// means none. Frames from it are LAN frames that may come from the LAN
	// address (the box's own connections, masqueraded like a LAN host's);
	// TCP and UDP to the LAN address are delivered to it (Deliver), and so
	// are the replies to its connections.
	Host int
	// HostAddrs are more addresses of the box's stack on the LAN subnet
	// (the host port's own besides the LAN address): everything for them
	// is delivered to it.
	HostAddrs []netip.Addr
	// Gateway is the default router on the WAN subnet. It may be invalid
	// while the WAN address is unset.
	Gateway netip.Addr
	// WANPeerMAC, when set (6 bytes), makes the WAN a point-to-point link
	// (a PPPoE session, whose framing the caller adds): every frame to the
	// WAN goes to this MAC and the router never resolves a WAN neighbour
	// (no ARP there). WAN.Addr may then be a /32 (IPCP's address) and
	// Gateway is the peer's address, on no subnet of ours.
	WANPeerMAC net.HardwareAddr
	// PortMin and PortMax bound the NAT ports (and ICMP identifiers)
	// allocated when a LAN host's own source port is taken (default
	// 1024-65535).
	PortMin, PortMax uint16
	// MaxConns is the connection table's fixed capacity (default 65536).
	MaxConns int
	Timeouts Timeouts
	// MSSClamp: 0 clamps the MSS option of forwarded TCP SYNs to the
	// smaller port MTU minus 40 (the default), a negative value turns
	// clamping off, a positive value is the MSS to clamp to.
	MSSClamp int
	// Forwards are the port forwards.
	Forwards []PortForward
	// MaxInbound bounds the connections from the WAN (through port
	// forwards) that are not assured yet — what a SYN or UDP flood makes;
	// past it a new one takes the place of the oldest such (default
	// MaxConns/4). MaxPerHost bounds one LAN host's unassured connections
	// (default MaxConns/4), MaxPerRemote one WAN address's (default 256):
	// new connections past them are refused (ReasonSourceLimit).
	MaxInbound, MaxPerHost, MaxPerRemote int
	// MaxNeighbours is the capacity of the ARP neighbour table (default 1024).
	MaxNeighbours int
	// NeighReachable is how long (seconds) a confirmed neighbour is used
	// without probing (default 30); NeighProbes is how many unanswered ARP
	// requests, one per second, make resolution fail (default 3).
	NeighReachable int
	NeighProbes    int
	// PendingFrames is per worker how many frames may wait for ARP
	// resolution (default 64); OutboxFrames how many frames a worker may
	// have for Output at once (default 64).
	PendingFrames, OutboxFrames int
	// FragEntries is the per-worker fragment table size (default 64);
	// FragTimeout how long (seconds) later fragments of a datagram are
	// accepted after its first (default 30).
	FragEntries, FragTimeout int
	// ICMPRate and ARPRate limit the ICMP errors and ARP requests the box
	// sends, per second over all workers (defaults 1000 and 100).
	ICMPRate, ARPRate int
	// SweepBatch is how many table slots one Tick examines for expiry
	// (default 256).
	SweepBatch int
	// Seed keys the table hashes; 0 picks a random seed.
	Seed uint64
	// IPv6 routes IPv6 (see package route6); nil drops it (ReasonIPv6).
	// It cannot change in Update: its own SetConfig changes its prefixes.
	IPv6 *route6.Router
}

// Side names the two sides of the router.
type Side uint8

// The sides.
const (
	LAN Side = iota
	WAN
)

func (s Side) String() string {
	if s == LAN {
		return "lan"
	}
	return "wan"
}

// port is a validated Port.
type port struct {
	id    int
	mac   [6]byte
	addr  uint32 // 0 when unset
	net   uint32 // subnet address
	mask  uint32
	bcast uint32 // subnet broadcast
	mtu   int
}

func (p *port) onLink(ip uint32) bool { return p.addr != 0 && ip&p.mask == p.net }

// fwd is a validated Forward.
type fwd struct {
	proto  uint8
	lo, hi uint16
	toAddr uint32
	toPort uint16
}

// snapshot is the immutable configuration the workers read.
type snapshot struct {
	side      [2]port
	host      int      // Config.Host
	hostAddrs []uint32 // Config.HostAddrs
	gateway   uint32
	p2p       bool    // the WAN is point-to-point (Config.WANPeerMAC)
	peerMAC   [6]byte // its peer's MAC
	portMin   uint16
	portMax   uint16
	mss       int // 0 off
	timeouts  Timeouts
	// tcpTimeouts are the TCP timeouts by state (Timeouts.byState).
	tcpTimeouts [stateMask + 1]uint32
	forwards    []fwd
	reachable   int64 // ns
	probes      uint32
	fragTTL     int64 // ns
	sweep       int
	limits      limits
}

// limits are the caps on unassured connections (Config.MaxInbound, ...).
type limits struct {
	inbound, perHost, perRemote int64
}

// neighPin is the neighbour entry never evicted: the WAN gateway's.
func (s *snapshot) neighPin() uint64 {
	if s.gateway == 0 || s.p2p {
		return 0
	}
	return neighKey(WAN, s.gateway)
}

// peer returns the MAC of the point-to-point WAN's peer: false unless
// side is the WAN and it is point-to-point.
func (s *snapshot) peer(side Side) ([6]byte, bool) {
	return s.peerMAC, side == WAN && s.p2p
}

// boxAddr reports whether a is one of Config.HostAddrs.
func (s *snapshot) boxAddr(a uint32) bool {
	for _, h := range s.hostAddrs {
		if h == a {
			return true
		}
	}
	return false
}

// forward returns the port forward for a WAN port, if any.
func (s *snapshot) forward(proto uint8, p uint16) (addr uint32, port uint16, ok bool) {
	for i := range s.forwards {
		f := &s.forwards[i]
		if f.proto == proto && p >= f.lo && p <= f.hi {
			return f.toAddr, f.toPort + (p - f.lo), true
		}
	}
	return 0, 0, false
}

func ip4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func orInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// withDefaults returns cfg with zero fields replaced by their defaults.
func withDefaults(cfg Config) Config {
	cfg.LAN.MTU = orInt(cfg.LAN.MTU, 1500)
	cfg.WAN.MTU = orInt(cfg.WAN.MTU, 1500)
	if cfg.PortMin == 0 && cfg.PortMax == 0 {
		cfg.PortMin, cfg.PortMax = 1024, 65535
	}
	cfg.MaxConns = orInt(cfg.MaxConns, DefaultMaxConns)
	t, d := &cfg.Timeouts, DefaultTimeouts
	for _, p := range []struct {
		v *int
		d int
	}{
		{&t.TCPSynSent, d.TCPSynSent}, {&t.TCPSynRecv, d.TCPSynRecv},
		{&t.TCPEstablished, d.TCPEstablished}, {&t.TCPFinWait, d.TCPFinWait},
		{&t.TCPCloseWait, d.TCPCloseWait}, {&t.TCPLastAck, d.TCPLastAck},
		{&t.TCPTimeWait, d.TCPTimeWait}, {&t.TCPClose, d.TCPClose},
		{&t.UDPUnreplied, d.UDPUnreplied}, {&t.UDPAssured, d.UDPAssured},
		{&t.ICMP, d.ICMP}, {&t.Generic, d.Generic},
	} {
		*p.v = orInt(*p.v, p.d)
	}
	cfg.MaxInbound = orInt(cfg.MaxInbound, max(cfg.MaxConns/4, 16))
	cfg.MaxPerHost = orInt(cfg.MaxPerHost, max(cfg.MaxConns/4, 16))
	cfg.MaxPerRemote = orInt(cfg.MaxPerRemote, 256)
	cfg.MaxNeighbours = orInt(cfg.MaxNeighbours, 1024)
	cfg.NeighReachable = orInt(cfg.NeighReachable, 30)
	cfg.NeighProbes = orInt(cfg.NeighProbes, 3)
	cfg.PendingFrames = orInt(cfg.PendingFrames, 64)
	cfg.OutboxFrames = orInt(cfg.OutboxFrames, 64)
	cfg.FragEntries = orInt(cfg.FragEntries, 64)
	cfg.FragTimeout = orInt(cfg.FragTimeout, 30)
	cfg.ICMPRate = orInt(cfg.ICMPRate, 1000)
	cfg.ARPRate = orInt(cfg.ARPRate, 100)
	cfg.SweepBatch = orInt(cfg.SweepBatch, 256)
	if cfg.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	return cfg
}

// Validate checks cfg as New does, without allocating the tables: the
// engine checks a configuration before it opens anything.
func (c Config) Validate() error {
	c = withDefaults(c)
	_, err := compile(&c)
	return err
}

// unicast reports whether a is usable as a host address (frame.IsUnicastIPv4).
func unicast(a uint32) bool { return frame.IsUnicastIPv4(put32(a)) }
