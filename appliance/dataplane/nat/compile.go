package nat

import (
	"errors"
	"fmt"

	"e1kbox/appliance/dataplane/frame"
)

// maxConns bounds MaxConns: entry indexes have 31 bits, and a bigger table
// would not fit a box's memory anyway.
const maxConns = 1 << 26

// compile validates cfg (with defaults applied) into a snapshot.
func compile(cfg *Config) (*snapshot, error) {
	var errs []error
	s := &snapshot{}
	if m := cfg.WANPeerMAC; m != nil {
		if len(m) != 6 || m[0]&1 != 0 || [6]byte(m) == [6]byte{} {
			errs = append(errs, fmt.Errorf("wan peer MAC %q is not a unicast Ethernet address", m))
		} else {
			s.p2p, s.peerMAC = true, [6]byte(m)
		}
	}
	for i, p := range []*Port{&cfg.LAN, &cfg.WAN} {
		errs = compilePort(errs, &s.side[i], Side(i), p, s.p2p && Side(i) == WAN)
	}
	errs = compileRouter(errs, s, cfg)
	switch {
	case cfg.Host < 0 || cfg.Host > 0xffff:
		errs = append(errs, fmt.Errorf("host port id %d out of range 0-65535", cfg.Host))
	case cfg.Host != 0 && (cfg.Host == cfg.LAN.ID || cfg.Host == cfg.WAN.ID):
		errs = append(errs, fmt.Errorf("host port id %d is the lan's or the wan's", cfg.Host))
	}
	s.host = cfg.Host
	for i, a := range cfg.HostAddrs {
		switch {
		case cfg.Host == 0:
			errs = append(errs, fmt.Errorf("host address %v without a host port", a))
		case !a.Is4() || !s.side[LAN].onLink(ip4(a)) || ip4(a) == s.side[LAN].addr || !unicast(ip4(a)):
			errs = append(errs, fmt.Errorf("host addresses[%d] %v is not another host address on the lan subnet", i, a))
		default:
			s.hostAddrs = append(s.hostAddrs, ip4(a))
		}
	}
	s.timeouts = cfg.Timeouts
	s.tcpTimeouts = cfg.Timeouts.byState()
	for i, f := range cfg.Forwards {
		errs = compileForward(errs, s, i, f)
	}
	errs = checkLimits(errs, cfg)
	s.reachable = int64(cfg.NeighReachable) * 1e9
	s.probes = uint32(cfg.NeighProbes)
	s.fragTTL = int64(cfg.FragTimeout) * 1e9
	s.sweep = cfg.SweepBatch
	s.limits = limits{inbound: int64(cfg.MaxInbound), perHost: int64(cfg.MaxPerHost), perRemote: int64(cfg.MaxPerRemote)}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nat config: %w", err)
	}
	return s, nil
}

// compilePort validates p, the port of side, into sp and appends what is
// wrong with it to errs. On a point-to-point port (p2p) the address may
// be a /32: then it has no subnet broadcast.
func compilePort(errs []error, sp *port, side Side, p *Port, p2p bool) []error {
	name := side.String()
	sp.id = p.ID
	if p.ID < 0 || p.ID > 0xffff {
		errs = append(errs, fmt.Errorf("%s: port id %d out of range 0-65535", name, p.ID))
	}
	if len(p.MAC) != 6 {
		errs = append(errs, fmt.Errorf("%s: MAC %q is not 6 bytes", name, p.MAC))
	} else {
		copy(sp.mac[:], p.MAC)
		if sp.mac[0]&1 != 0 || sp.mac == [6]byte{} {
			errs = append(errs, fmt.Errorf("%s: MAC %s is not a unicast address", name, p.MAC))
		}
	}
	if p.MTU < 576 || p.MTU > 9000 {
		errs = append(errs, fmt.Errorf("%s: MTU %d out of range 576-9000", name, p.MTU))
	}
	sp.mtu = p.MTU
	switch {
	case !p.Addr.IsValid() && side == WAN:
	case !p.Addr.IsValid() || !p.Addr.Addr().Is4():
		errs = append(errs, fmt.Errorf("%s: address %v is not an IPv4 prefix", name, p.Addr))
	case p2p && p.Addr.Bits() == 32:
		sp.addr, sp.net, sp.mask = ip4(p.Addr.Addr()), ip4(p.Addr.Addr()), ^uint32(0)
		if !unicast(sp.addr) {
			errs = append(errs, fmt.Errorf("%s: address %v is not a unicast address", name, p.Addr))
		}
	case p.Addr.Bits() < 8 || p.Addr.Bits() > 30:
		errs = append(errs, fmt.Errorf("%s: prefix length /%d out of range /8-/30", name, p.Addr.Bits()))
	default:
		a := ip4(p.Addr.Addr())
		sp.mask = ^uint32(0) << (32 - p.Addr.Bits())
		sp.net = a & sp.mask
		sp.bcast = sp.net | ^sp.mask
		if a == sp.net || a == sp.bcast || !unicast(a) {
			errs = append(errs, fmt.Errorf("%s: address %v is not a host address of its subnet", name, p.Addr))
		}
		sp.addr = a
	}
	return errs
}

// compileRouter validates what concerns both sides (distinct ports,
// subnets that do not overlap, the gateway), the NAT port range, the
// table size and the MSS clamp into s, whose sides are compiled.
func compileRouter(errs []error, s *snapshot, cfg *Config) []error {
	if cfg.LAN.ID == cfg.WAN.ID {
		errs = append(errs, fmt.Errorf("lan and wan have the same port id %d", cfg.LAN.ID))
	}
	lan, wan := &s.side[LAN], &s.side[WAN]
	if lan.addr != 0 && wan.addr != 0 && (lan.onLink(wan.net) || wan.onLink(lan.net)) {
		errs = append(errs, fmt.Errorf("lan %v and wan %v overlap", cfg.LAN.Addr, cfg.WAN.Addr))
	}
	if g := cfg.Gateway; g.IsValid() && s.p2p {
		// The peer of a point-to-point link: on no subnet of ours.
		if !g.Is4() || wan.addr == 0 || ip4(g) == wan.addr || !unicast(ip4(g)) || lan.onLink(ip4(g)) {
			errs = append(errs, fmt.Errorf("gateway %v is not a unicast peer of the point-to-point wan %v", g, cfg.WAN.Addr))
		} else {
			s.gateway = ip4(g)
		}
	} else if cfg.Gateway.IsValid() {
		if !cfg.Gateway.Is4() || wan.addr == 0 || !wan.onLink(ip4(cfg.Gateway)) || ip4(cfg.Gateway) == wan.addr {
			errs = append(errs, fmt.Errorf("gateway %v is not a host on the wan subnet %v", cfg.Gateway, cfg.WAN.Addr))
		} else {
			s.gateway = ip4(cfg.Gateway)
		}
	}
	if cfg.PortMin == 0 || cfg.PortMin > cfg.PortMax {
		errs = append(errs, fmt.Errorf("port range %d-%d is empty or starts at 0", cfg.PortMin, cfg.PortMax))
	}
	s.portMin, s.portMax = cfg.PortMin, cfg.PortMax
	if cfg.MaxConns < 16 || cfg.MaxConns > maxConns {
		errs = append(errs, fmt.Errorf("max conns %d out of range 16-%d", cfg.MaxConns, maxConns))
	}
	switch {
	case cfg.MSSClamp < 0:
	case cfg.MSSClamp == 0:
		s.mss = min(lan.mtu, wan.mtu) - 40
	case cfg.MSSClamp < 88 || cfg.MSSClamp > 65495:
		errs = append(errs, fmt.Errorf("mss clamp %d out of range 88-65495", cfg.MSSClamp))
	default:
		s.mss = cfg.MSSClamp
	}
	return errs
}

// compileForward validates f, forwards[i], against the LAN side and the
// forwards before it and appends it to s.forwards.
func compileForward(errs []error, s *snapshot, i int, f PortForward) []error {
	lan := &s.side[LAN]
	v := fwd{proto: f.Proto, lo: f.Port, hi: f.PortEnd}
	if v.hi == 0 {
		v.hi = v.lo
	}
	if f.Proto != frame.ProtoTCP && f.Proto != frame.ProtoUDP {
		errs = append(errs, fmt.Errorf("forwards[%d]: protocol %d is not tcp (6) or udp (17)", i, f.Proto))
	}
	if v.lo == 0 || v.hi < v.lo {
		errs = append(errs, fmt.Errorf("forwards[%d]: port range %d-%d is empty or starts at 0", i, f.Port, f.PortEnd))
	}
	if !f.To.IsValid() || !f.To.Addr().Is4() || f.To.Port() == 0 {
		errs = append(errs, fmt.Errorf("forwards[%d]: target %v is not an IPv4 address and port", i, f.To))
	} else {
		v.toAddr, v.toPort = ip4(f.To.Addr()), f.To.Port()
		if !lan.onLink(v.toAddr) || v.toAddr == lan.addr || v.toAddr == lan.bcast || v.toAddr == lan.net {
			errs = append(errs, fmt.Errorf("forwards[%d]: target %v is not a host on the lan subnet", i, f.To))
		}
		if int(v.toPort)+int(v.hi-v.lo) > 0xffff {
			errs = append(errs, fmt.Errorf("forwards[%d]: target ports %d+%d run past 65535", i, v.toPort, v.hi-v.lo))
		}
	}
	for j, g := range s.forwards {
		if g.proto == v.proto && v.lo <= g.hi && g.lo <= v.hi {
			errs = append(errs, fmt.Errorf("forwards[%d]: ports %d-%d overlap forwards[%d]", i, v.lo, v.hi, j))
		}
	}
	s.forwards = append(s.forwards, v)
	return errs
}

// checkLimits checks the sizes, rates and timeouts of cfg.
func checkLimits(errs []error, cfg *Config) []error {
	if cfg.MaxNeighbours < 4 || cfg.MaxNeighbours > 1<<20 {
		errs = append(errs, fmt.Errorf("max neighbours %d out of range 4-%d", cfg.MaxNeighbours, 1<<20))
	}
	for _, c := range []struct {
		name  string
		v, lo int
		hi    int
	}{
		{"max inbound", cfg.MaxInbound, 1, maxConns},
		{"max per host", cfg.MaxPerHost, 1, maxConns},
		{"max per remote", cfg.MaxPerRemote, 1, maxConns},
		{"pending frames", cfg.PendingFrames, 1, 4096},
		{"outbox frames", cfg.OutboxFrames, 8, 4096},
		{"frag entries", cfg.FragEntries, 1, 65536},
		{"frag timeout", cfg.FragTimeout, 1, 120},
		{"neigh reachable", cfg.NeighReachable, 1, 3600},
		{"neigh probes", cfg.NeighProbes, 1, 10},
		{"icmp rate", cfg.ICMPRate, 1, 1 << 20},
		{"arp rate", cfg.ARPRate, 1, 1 << 20},
		{"sweep batch", cfg.SweepBatch, 1, 1 << 20},
	} {
		if c.v < c.lo || c.v > c.hi {
			errs = append(errs, fmt.Errorf("%s %d out of range %d-%d", c.name, c.v, c.lo, c.hi))
		}
	}
	t := &cfg.Timeouts
	for _, v := range []int{t.TCPSynSent, t.TCPSynRecv, t.TCPEstablished, t.TCPFinWait, t.TCPCloseWait,
		t.TCPLastAck, t.TCPTimeWait, t.TCPClose, t.UDPUnreplied, t.UDPAssured, t.ICMP, t.Generic} {
		if v < 1 || v > 1<<30 {
			errs = append(errs, fmt.Errorf("timeout %d s out of range 1-%d", v, 1<<30))
			break
		}
	}
	return errs
}
