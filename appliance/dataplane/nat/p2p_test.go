package nat

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// A PPPoE session's addresses: IPCP's local address and the peer's.
var (
	pppAddr = ap("100.64.0.5")
	pppPeer = ap("10.255.0.1")
	acMAC   = mac(0xac)
)

// p2pConfig makes the WAN the point-to-point link of a PPPoE session with
// a 1492-byte MTU.
func p2pConfig(c *Config) {
	c.WAN.Addr = netip.PrefixFrom(pppAddr, 32)
	c.WAN.MTU = 1492
	c.Gateway = pppPeer
	c.WANPeerMAC = hw(acMAC)
}

// newP2PEnv is newEnv with a point-to-point WAN, whose peer needs no ARP.
func newP2PEnv(t *testing.T) *env {
	t.Helper()
	cfg := testConfig()
	p2pConfig(&cfg)
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &env{t: t, r: r, lan: r.NewWorker(nil), wan: r.NewWorker(nil), now: t0}
	e.learn(LAN, hostA, ipA)
	return e
}

func TestPointToPointWAN(t *testing.T) {
	e := newP2PEnv(t)
	mss := []byte{2, 4, 0x05, 0xb4} // 1460
	syn := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 4000, DstPort: 80, Flags: frame.TCPSyn, Opts: mss}, nil))
	b, f := e.forward(LAN, syn, wanPort)
	if [6]byte(b[0:6]) != acMAC || [6]byte(b[6:12]) != wanMAC {
		t.Errorf("to the WAN from %x to %x, want from the WAN MAC to the peer's %x", b[6:12], b[0:6], acMAC)
	}
	if f.IPv4.Src != a4(pppAddr) {
		t.Errorf("masqueraded on %v, want IPCP's %v", netip.AddrFrom4(f.IPv4.Src), pppAddr)
	}
	opts := b[f.L4Off+20 : f.PayloadOff]
	if i := strings.Index(string(opts), "\x02\x04"); i < 0 || binary.BigEndian.Uint16(opts[i+2:]) != 1452 {
		t.Errorf("MSS option % x, want 1452 (the session's 1492 minus 40)", opts)
	}
	if port, out, ok := e.wan.Output(); ok {
		t.Errorf("the WAN worker has output (port %d, % x): want no ARP on a point-to-point WAN", port, out)
	}
	if port, out, ok := e.lan.Output(); ok {
		t.Errorf("the LAN worker has output (port %d, % x): want no ARP on a point-to-point WAN", port, out)
	}
	natPort := f.TCP.SrcPort

	// The answer, from the peer's MAC, to the LAN host.
	synAck := frametest.Pad(frametest.Frame(wanMAC, acMAC, frame.EtherTypeIPv4,
		frametest.IPv4{Src: a4(remote), Dst: a4(pppAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: natPort, Flags: frame.TCPSyn | frame.TCPAck}, nil)))
	res := e.send(WAN, synAck)
	if res.Action != routing.Forward || res.Port != lanPort {
		t.Fatalf("SYN-ACK: %v %v on port %d, want forward to the LAN", res.Action, res.Reason, res.Port)
	}
	_, f = checkFrame(t, res.Frame)
	if f.IPv4.Dst != a4(ipA) || f.TCP.DstPort != 4000 {
		t.Errorf("SYN-ACK to %v:%d, want %v:4000", netip.AddrFrom4(f.IPv4.Dst), f.TCP.DstPort, ipA)
	}

	// Too big for the session with DF: fragmentation needed with its MTU.
	big := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), DF: true}.UDPPacket(1000, 2000, make([]byte, 1472)))
	res = e.send(LAN, big)
	if res.Action != routing.Reply {
		t.Fatalf("DF 1500 bytes: %v %v, want an ICMP error", res.Action, res.Reason)
	}
	rb, rf := checkFrame(t, res.Frame)
	if rf.ICMP.Type != 3 || rf.ICMP.Code != 4 || binary.BigEndian.Uint32(rb[rf.L4Off+4:]) != 1492 {
		t.Errorf("type %d code %d MTU %d, want 3/4 with 1492", rf.ICMP.Type, rf.ICMP.Code, binary.BigEndian.Uint32(rb[rf.L4Off+4:]))
	}

	// ARP on the WAN teaches nothing and gets no answer.
	if res := e.send(WAN, frametest.ARPFrame(bcast, gwMAC, 1, gwMAC, a4(pppPeer), [6]byte{}, a4(pppAddr))); res.Action == routing.Reply {
		t.Errorf("ARP on a point-to-point WAN answered")
	}
	if !e.r.NeighbourFresh(WAN, a4(pppPeer), acMAC, e.now, true) || e.r.NeighbourFresh(WAN, a4(pppPeer), gwMAC, e.now, true) {
		t.Errorf("NeighbourFresh: want the peer's MAC fresh, another not")
	}
}

// TestPointToPointAddressChange: a new session's address flushes the
// connections of the old one, as a DHCP address change does.
func TestPointToPointAddressChange(t *testing.T) {
	e := newP2PEnv(t)
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(5000, 53, nil)), wanPort)
	if n := e.r.Stats().Conns; n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
	if err := e.r.SetWAN(netip.MustParsePrefix("100.64.9.9/32"), pppPeer); err != nil {
		t.Fatalf("SetWAN: %v", err)
	}
	if n := e.r.Stats().Conns; n != 0 {
		t.Errorf("%d connections after the address changed, want 0", n)
	}
	_, f := e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(5000, 53, nil)), wanPort)
	if f.IPv4.Src != [4]byte{100, 64, 9, 9} {
		t.Errorf("masqueraded on %v, want 100.64.9.9", netip.AddrFrom4(f.IPv4.Src))
	}
	if err := e.r.SetWAN(netip.Prefix{}, netip.Addr{}); err != nil {
		t.Fatalf("SetWAN down: %v", err)
	}
	if res := e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(5001, 53, nil))); res.Action != routing.Drop || res.Reason != ReasonNoRoute {
		t.Errorf("with the session down: %v %v, want drop no_route", res.Action, res.Reason)
	}
}

func TestPointToPointConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		err  string // "" valid
	}{
		{"session", p2pConfig, ""},
		{"no session yet", func(c *Config) { p2pConfig(c); c.WAN.Addr, c.Gateway = netip.Prefix{}, netip.Addr{} }, ""},
		{"/32 without a peer", func(c *Config) { p2pConfig(c); c.WANPeerMAC = nil }, "prefix length"},
		{"group peer MAC", func(c *Config) { p2pConfig(c); c.WANPeerMAC = hw(bcast) }, "peer MAC"},
		{"short peer MAC", func(c *Config) { p2pConfig(c); c.WANPeerMAC = c.WANPeerMAC[:5] }, "peer MAC"},
		{"peer is us", func(c *Config) { p2pConfig(c); c.Gateway = pppAddr }, "point-to-point"},
		{"peer on the LAN", func(c *Config) { p2pConfig(c); c.Gateway = ipB }, "point-to-point"},
		{"multicast /32", func(c *Config) { p2pConfig(c); c.WAN.Addr = netip.MustParsePrefix("224.0.0.1/32") }, "unicast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.err)
			}
		})
	}
}
