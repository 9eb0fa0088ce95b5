package nat

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame"
)

// Test frames are built here with a textbook RFC 1071 checksum that
// shares no code with the frame package, so they are an independent
// oracle for what the router writes.

func refSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

func refCsum(chunks ...[]byte) uint16 { return ^uint16(refSum(slices.Concat(chunks...))) }

var (
	lanMAC  = mac(0x01)
	wanMAC  = mac(0x02)
	hostA   = mac(0xa1) // 192.168.1.10
	hostB   = mac(0xb1) // 192.168.1.20
	gwMAC   = mac(0x99) // 203.0.113.1
	bcast   = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	lanAddr = ap("192.168.1.1")
	wanAddr = ap("203.0.113.2")
	gwAddr  = ap("203.0.113.1")
	ipA     = ap("192.168.1.10")
	ipB     = ap("192.168.1.20")
	remote  = ap("198.51.100.7")
	remote2 = ap("198.51.100.8")
	router1 = ap("192.0.2.99") // some router on the path
)

const (
	lanPort = 1
	wanPort = 2
	t0      = int64(1_700_000_000) * 1e9
	sec     = int64(1e9)
)

func mac(b byte) [6]byte                             { return [6]byte{0x02, 0, 0, 0, 0, b} }
func ap(s string) netip.Addr                         { return netip.MustParseAddr(s) }
func a4(a netip.Addr) [4]byte                        { return a.As4() }
func hw(m [6]byte) net.HardwareAddr                  { return net.HardwareAddr(m[:]) }
func be16(v uint16) []byte                           { return binary.BigEndian.AppendUint16(nil, v) }
func be32b(v uint32) []byte                          { return binary.BigEndian.AppendUint32(nil, v) }
func addrPort(a netip.Addr, p uint16) netip.AddrPort { return netip.AddrPortFrom(a, p) }

func testConfig() Config {
	return Config{
		LAN:     Port{ID: lanPort, MAC: hw(lanMAC), Addr: netip.MustParsePrefix("192.168.1.1/24")},
		WAN:     Port{ID: wanPort, MAC: hw(wanMAC), Addr: netip.MustParsePrefix("203.0.113.2/24")},
		Gateway: gwAddr,
		Forwards: []PortForward{
			{Proto: frame.ProtoTCP, Port: 8080, To: addrPort(ipA, 80)},
			{Proto: frame.ProtoUDP, Port: 5000, PortEnd: 5010, To: addrPort(ipB, 6000)},
		},
		PortMin: 20000, PortMax: 20999,
		MaxConns: 1024,
		Seed:     42,
	}
}

// ipHdr describes an IPv4 header to build.
type ipHdr struct {
	src, dst netip.Addr
	proto    uint8
	ttl      uint8
	id       uint16
	df, mf   bool
	fragOff  uint16
	tos      uint8
	opts     []byte
}

func (h ipHdr) build(payload []byte) []byte {
	ttl := h.ttl
	if ttl == 0 {
		ttl = 64
	}
	fo := h.fragOff
	if h.df {
		fo |= 0x4000
	}
	if h.mf {
		fo |= 0x2000
	}
	b := []byte{0x40 | uint8(5+len(h.opts)/4), h.tos}
	b = append(b, be16(uint16(20+len(h.opts)+len(payload)))...)
	b = append(b, be16(h.id)...)
	b = append(b, be16(fo)...)
	b = append(b, ttl, h.proto, 0, 0)
	s, d := a4(h.src), a4(h.dst)
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	b = append(b, h.opts...)
	binary.BigEndian.PutUint16(b[10:], refCsum(b))
	return append(b, payload...)
}

func pseudo(src, dst netip.Addr, proto uint8, n int) []byte {
	s, d := a4(src), a4(dst)
	return slices.Concat(s[:], d[:], []byte{0, proto}, be16(uint16(n)))
}

func eth(dst, src [6]byte, et uint16, l3 []byte) []byte {
	b := slices.Concat(dst[:], src[:], be16(et), l3)
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

type tcpSeg struct {
	sport, dport uint16
	seq, ack     uint32
	flags        uint8
	opts         []byte
	payload      []byte
}

func (t tcpSeg) build(h ipHdr) []byte {
	h.proto = frame.ProtoTCP
	b := slices.Concat(be16(t.sport), be16(t.dport), be32b(t.seq), be32b(t.ack))
	b = append(b, uint8(5+len(t.opts)/4)<<4, t.flags, 0xff, 0xff, 0, 0, 0, 0)
	b = append(b, t.opts...)
	b = append(b, t.payload...)
	binary.BigEndian.PutUint16(b[16:], refCsum(pseudo(h.src, h.dst, frame.ProtoTCP, len(b)), b))
	return h.build(b)
}

func udpBuild(h ipHdr, sport, dport uint16, payload []byte, noCsum bool) []byte {
	h.proto = frame.ProtoUDP
	b := slices.Concat(be16(sport), be16(dport), be16(uint16(8+len(payload))), []byte{0, 0}, payload)
	if !noCsum {
		c := refCsum(pseudo(h.src, h.dst, frame.ProtoUDP, len(b)), b)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(b[6:], c)
	}
	return h.build(b)
}

func icmpBuild(h ipHdr, typ, code uint8, rest uint32, payload []byte) []byte {
	h.proto = frame.ProtoICMP
	b := slices.Concat([]byte{typ, code, 0, 0}, be32b(rest), payload)
	binary.BigEndian.PutUint16(b[2:], refCsum(b))
	return h.build(b)
}

func arpBuild(dst, src [6]byte, op uint16, sha [6]byte, spa netip.Addr, tha [6]byte, tpa netip.Addr) []byte {
	s, t := a4(spa), a4(tpa)
	b := slices.Concat([]byte{0, 1, 8, 0, 6, 4}, be16(op), sha[:], s[:], tha[:], t[:])
	return eth(dst, src, frame.EtherTypeARP, b)
}

// fromLAN and fromWAN wrap an IP packet in an Ethernet frame to the router.
func fromLAN(src [6]byte, ip []byte) []byte { return eth(lanMAC, src, frame.EtherTypeIPv4, ip) }
func fromWAN(ip []byte) []byte              { return eth(wanMAC, gwMAC, frame.EtherTypeIPv4, ip) }

// env is a router with a LAN and a WAN worker whose neighbours (hosts A,
// B and the gateway) are resolved.
type env struct {
	t        testing.TB
	r        *Router
	lan, wan *Worker
	now      int64
}

func newEnv(t testing.TB, mod func(*Config)) *env {
	t.Helper()
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &env{t: t, r: r, lan: r.NewWorker(nil), wan: r.NewWorker(nil), now: t0}
	e.learn(LAN, hostA, ipA)
	e.learn(LAN, hostB, ipB)
	e.learn(WAN, gwMAC, gwAddr)
	return e
}

// learn makes the router learn a neighbour: it asks for the router's address.
func (e *env) learn(side Side, m [6]byte, ip netip.Addr) {
	e.t.Helper()
	w, port, own := e.lan, lanPort, lanAddr
	if side == WAN {
		w, port, own = e.wan, wanPort, wanAddr
	}
	res := w.Handle(e.now, port, arpBuild(bcast, m, 1, m, ip, [6]byte{}, own))
	if res.Action != Reply {
		e.t.Fatalf("ARP request from %v: %v %v", ip, res.Action, res.Reason)
	}
}

// send feeds a frame (copied) into the worker of its side and returns the
// result.
func (e *env) send(side Side, b []byte) Result {
	e.t.Helper()
	b = slices.Clone(b)
	if side == LAN {
		return e.lan.Handle(e.now, lanPort, b)
	}
	return e.wan.Handle(e.now, wanPort, b)
}

// forward sends a frame and requires it to be forwarded on port, returning
// the parsed output after checking its checksums.
func (e *env) forward(side Side, b []byte, port int) (out []byte, f frame.Frame) {
	e.t.Helper()
	res := e.send(side, b)
	if res.Action != Forward || res.Port != port {
		e.t.Fatalf("got %v on port %d (reason %v), want forward on port %d", res.Action, res.Port, res.Reason, port)
	}
	if len(res.Frame) != len(b) {
		e.t.Fatalf("forwarded %d bytes, received %d", len(res.Frame), len(b))
	}
	return checkFrame(e.t, res.Frame)
}

// checkFrame parses b and verifies its checksums with the reference sum:
// IPv4 header, transport (unless a fragment; a zero UDP checksum passes),
// and for ICMP errors the quoted IP header.
func checkFrame(t testing.TB, b []byte) ([]byte, frame.Frame) {
	t.Helper()
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	if !f.IsIPv4() {
		return b, f
	}
	hdr := b[f.L3Off : f.L3Off+int(f.IPv4.IHL)*4]
	if refSum(hdr) != 0xffff {
		t.Errorf("IPv4 header checksum %#04x wrong (sum %#x)", f.IPv4.Checksum, refSum(hdr))
	}
	if f.Fragment || f.L4Off == 0 {
		return b, f
	}
	seg := b[f.L4Off:f.L3End]
	switch f.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		if f.Proto == frame.ProtoUDP && f.UDP.Checksum == 0 {
			break
		}
		if s := refSum(slices.Concat(pseudo(f.IPv4.SrcAddr(), f.IPv4.DstAddr(), f.Proto, len(seg)), seg)); s != 0xffff {
			t.Errorf("transport checksum wrong (sum %#x)", s)
		}
	case frame.ProtoICMP:
		if s := refSum(seg); s != 0xffff {
			t.Errorf("ICMP checksum wrong (sum %#x)", s)
		}
		if f.ICMP.EmbeddedOff != 0 && f.ICMP.EmbeddedOff+20 <= f.L3End {
			q := b[f.ICMP.EmbeddedOff:]
			if ihl := int(q[0]&0xf) * 4; ihl >= 20 && ihl <= len(q) && refSum(q[:ihl]) != 0xffff {
				t.Errorf("quoted IPv4 header checksum wrong")
			}
		}
	}
	return b, f
}
