package nat

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// Test frames are built with package frametest, whose textbook RFC 1071
// checksum shares no code with the frame package, so they are an
// independent oracle for what the router writes.

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

// fromLAN and fromWAN wrap an IP packet in an Ethernet frame to the router.
func fromLAN(src [6]byte, ip []byte) []byte {
	return frametest.Pad(frametest.Frame(lanMAC, src, frame.EtherTypeIPv4, ip))
}

func fromWAN(ip []byte) []byte {
	return frametest.Pad(frametest.Frame(wanMAC, gwMAC, frame.EtherTypeIPv4, ip))
}

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
	res := w.Handle(e.now, port, frametest.ARPFrame(bcast, m, 1, m, a4(ip), [6]byte{}, a4(own)))
	if res.Action != routing.Reply {
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
	if res.Action != routing.Forward || res.Port != port {
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
	if s := frametest.Sum(hdr); s != 0xffff {
		t.Errorf("IPv4 header checksum %#04x wrong (sum %#x)", f.IPv4.Checksum, s)
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
		if s := frametest.Sum(frametest.Pseudo4(f.IPv4.Src, f.IPv4.Dst, f.Proto, len(seg)), seg); s != 0xffff {
			t.Errorf("transport checksum wrong (sum %#x)", s)
		}
	case frame.ProtoICMP:
		if s := frametest.Sum(seg); s != 0xffff {
			t.Errorf("ICMP checksum wrong (sum %#x)", s)
		}
		if f.ICMP.EmbeddedOff != 0 && f.ICMP.EmbeddedOff+20 <= f.L3End {
			q := b[f.ICMP.EmbeddedOff:]
			if ihl := int(q[0]&0xf) * 4; ihl >= 20 && ihl <= len(q) && frametest.Sum(q[:ihl]) != 0xffff {
				t.Errorf("quoted IPv4 header checksum wrong")
			}
		}
	}
	return b, f
}
