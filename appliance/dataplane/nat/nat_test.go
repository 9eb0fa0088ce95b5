package nat

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// wire is the fields of a forwarded IPv4 packet the tests compare.
type wire struct {
	EthSrc, EthDst [6]byte
	Src, Dst       netip.Addr
	Sport, Dport   uint16
	TTL            uint8
	Flags          uint8
	ID             uint16 // ICMP echo identifier
}

func wireOf(f *frame.Frame) wire {
	w := wire{EthSrc: f.Src, EthDst: f.Dst, Src: f.IPv4.SrcAddr(), Dst: f.IPv4.DstAddr(), TTL: f.IPv4.TTL}
	switch f.Proto {
	case frame.ProtoTCP:
		w.Sport, w.Dport, w.Flags = f.TCP.SrcPort, f.TCP.DstPort, f.TCP.Flags
	case frame.ProtoUDP:
		w.Sport, w.Dport = f.UDP.SrcPort, f.UDP.DstPort
	case frame.ProtoICMP:
		w.ID = f.ICMP.ID
	}
	return w
}

// connOf returns the only connection matching f.
func (e *env) conn(f Filter) Conn {
	e.t.Helper()
	cs, _ := e.r.Conns(f, 0, 0, e.now, nil)
	if len(cs) != 1 {
		e.t.Fatalf("%d connections match %+v, want 1: %+v", len(cs), f, cs)
	}
	return cs[0]
}

func TestTCPLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 64}
	in := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr), TTL: 50}
	const sp, dp = 40000, 443
	steps := []struct {
		name    string
		side    Side
		seg     frametest.TCP
		payload []byte
		want    wire
		state   State
	}{
		{"syn", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Flags: frame.TCPSyn}, nil,
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPSyn, 0}, StateSynSent},
		{"syn retransmit", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 100, Flags: frame.TCPSyn}, nil,
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPSyn, 0}, StateSynSent},
		{"syn-ack", WAN, frametest.TCP{SrcPort: dp, DstPort: sp, Seq: 900, Ack: 101, Flags: frame.TCPSyn | frame.TCPAck}, nil,
			wire{lanMAC, hostA, remote, ipA, dp, sp, 49, frame.TCPSyn | frame.TCPAck, 0}, StateSynRecv},
		{"ack", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 101, Ack: 901, Flags: frame.TCPAck}, nil,
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPAck, 0}, StateEstablished},
		{"data out", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 101, Ack: 901, Flags: frame.TCPAck | frame.TCPPsh}, []byte("GET / HTTP/1.1\r\n\r\n"),
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPAck | frame.TCPPsh, 0}, StateEstablished},
		{"data in", WAN, frametest.TCP{SrcPort: dp, DstPort: sp, Seq: 901, Ack: 119, Flags: frame.TCPAck}, make([]byte, 700),
			wire{lanMAC, hostA, remote, ipA, dp, sp, 49, frame.TCPAck, 0}, StateEstablished},
		{"fin out", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 119, Ack: 1601, Flags: frame.TCPFin | frame.TCPAck}, nil,
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPFin | frame.TCPAck, 0}, StateFinWait},
		{"fin in", WAN, frametest.TCP{SrcPort: dp, DstPort: sp, Seq: 1601, Ack: 120, Flags: frame.TCPFin | frame.TCPAck}, nil,
			wire{lanMAC, hostA, remote, ipA, dp, sp, 49, frame.TCPFin | frame.TCPAck, 0}, StateLastAck},
		{"last ack", LAN, frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 120, Ack: 1602, Flags: frame.TCPAck}, nil,
			wire{wanMAC, gwMAC, wanAddr, remote, sp, dp, 63, frame.TCPAck, 0}, StateTimeWait},
	}
	for _, st := range steps {
		var b []byte
		port := wanPort
		if st.side == LAN {
			b = fromLAN(hostA, out.TCPPacket(st.seg, st.payload))
		} else {
			b, port = fromWAN(in.TCPPacket(st.seg, st.payload)), lanPort
		}
		_, f := e.forward(st.side, b, port)
		if diff := cmp.Diff(st.want, wireOf(&f), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Errorf("%s: forwarded packet (-want +got):\n%s", st.name, diff)
		}
		if c := e.conn(Filter{Proto: frame.ProtoTCP}); c.State != st.state {
			t.Errorf("%s: state %v, want %v", st.name, c.State, st.state)
		}
		e.now += sec
	}
	c := e.conn(Filter{Proto: frame.ProtoTCP})
	want := Conn{
		ID: c.ID, Proto: frame.ProtoTCP, Kind: KindMasquerade, State: StateTimeWait,
		OrigSrc: addrPort(ipA, sp), OrigDst: addrPort(remote, dp), ReplySrc: addrPort(remote, dp), ReplyDst: addrPort(wanAddr, sp),
		Packets: [2]uint64{6, 3}, Bytes: [2]uint64{6*40 + 18, 3*40 + 700},
		Created: t0 / sec, ExpiresIn: 120 - 1,
	}
	if diff := cmp.Diff(want, c, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
		t.Errorf("connection (-want +got):\n%s", diff)
	}
	// A new SYN on the closed connection reopens it.
	e.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: dp, Seq: 5000, Flags: frame.TCPSyn}, nil)), wanPort)
	if c := e.conn(Filter{Proto: frame.ProtoTCP}); c.State != StateSynSent || c.Packets != [2]uint64{1, 0} {
		t.Errorf("after reopening SYN: state %v packets %v, want syn_sent [1 0]", c.State, c.Packets)
	}
	// RST closes.
	e.forward(WAN, fromWAN(in.TCPPacket(frametest.TCP{SrcPort: dp, DstPort: sp, Seq: 1, Ack: 5001, Flags: frame.TCPRst | frame.TCPAck}, nil)), lanPort)
	if c := e.conn(Filter{Proto: frame.ProtoTCP}); c.State != StateClose || c.ExpiresIn != 10 {
		t.Errorf("after RST: state %v expires in %d, want close 10", c.State, c.ExpiresIn)
	}
}

func TestTCPInvalid(t *testing.T) {
	e := newEnv(t, nil)
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	for _, tc := range []struct {
		name string
		side Side
		b    []byte
		want routing.Action
		why  Reason
	}{
		{"ack without connection", LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPAck}, nil)), routing.Drop, ReasonInvalid},
		{"syn-fin", LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn | frame.TCPFin}, nil)), routing.Drop, ReasonInvalid},
		{"unsolicited from wan", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn}, nil)), routing.ToHost, 0},
		{"ack to forward port", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 8080, Flags: frame.TCPAck}, nil)), routing.Drop, ReasonInvalid},
	} {
		res := e.send(tc.side, tc.b)
		if res.Action != tc.want || res.Reason != tc.why {
			t.Errorf("%s: got %v/%v, want %v/%v", tc.name, res.Action, res.Reason, tc.want, tc.why)
		}
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("%d connections, want 0", n)
	}
}

func TestUDP(t *testing.T) {
	e := newEnv(t, nil)
	for _, noCsum := range []bool{false, true} {
		sp := uint16(5353)
		if noCsum {
			sp = 5354
		}
		udp := frametest.IPv4.UDPPacket
		if noCsum {
			udp = frametest.IPv4.UDPPacketNoChecksum
		}
		b := fromLAN(hostA, udp(frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}, sp, 53, []byte("query")))
		_, f := e.forward(LAN, b, wanPort)
		if got, want := wireOf(&f), (wire{wanMAC, gwMAC, wanAddr, remote, sp, 53, 63, 0, 0}); got != want {
			t.Errorf("out: got %+v, want %+v", got, want)
		}
		if noCsum != (f.UDP.Checksum == 0) {
			t.Errorf("zero checksum %v: forwarded checksum %#04x", noCsum, f.UDP.Checksum)
		}
		c := e.conn(Filter{Proto: frame.ProtoUDP, Port: sp})
		if c.State != StateUnreplied || c.ExpiresIn != 30 {
			t.Errorf("unreplied: %v expires %d, want unreplied 30", c.State, c.ExpiresIn)
		}
		_, f = e.forward(WAN, fromWAN(udp(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}, 53, sp, []byte("answer!"))), lanPort)
		if got, want := wireOf(&f), (wire{lanMAC, hostA, remote, ipA, 53, sp, 63, 0, 0}); got != want {
			t.Errorf("in: got %+v, want %+v", got, want)
		}
		if noCsum != (f.UDP.Checksum == 0) {
			t.Errorf("zero checksum %v: reply checksum %#04x", noCsum, f.UDP.Checksum)
		}
		// One exchange keeps the short timeout (Linux's UDP rule); traffic
		// streamAfter seconds later makes it a stream, assured, with the
		// long one.
		c = e.conn(Filter{Proto: frame.ProtoUDP, Port: sp})
		if c.State != StateReplied || c.ExpiresIn != 30 {
			t.Errorf("replied once: %v expires %d, want replied 30", c.State, c.ExpiresIn)
		}
		e.now += streamAfter * sec
		e.forward(LAN, b, wanPort)
		c = e.conn(Filter{Proto: frame.ProtoUDP, Port: sp})
		if c.State != StateReplied || c.ExpiresIn != 180 {
			t.Errorf("a stream: %v expires %d, want replied 180", c.State, c.ExpiresIn)
		}
	}
}

func TestICMPEchoIDMapping(t *testing.T) {
	e := newEnv(t, nil)
	ping := func(src [6]byte, ip netip.Addr, id uint16) uint16 {
		_, f := e.forward(LAN, fromLAN(src, frametest.IPv4{Src: a4(ip), Dst: a4(remote)}.ICMPPacket(8, 0, uint32(id)<<16|1, []byte("abcdefgh"))), wanPort)
		if f.IPv4.SrcAddr() != wanAddr || f.IPv4.DstAddr() != remote {
			t.Errorf("echo request from %v: %v > %v", ip, f.IPv4.SrcAddr(), f.IPv4.DstAddr())
		}
		return f.ICMP.ID
	}
	idA := ping(hostA, ipA, 777)
	if idA != 777 {
		t.Errorf("host A identifier 777 became %d, want it kept", idA)
	}
	idB := ping(hostB, ipB, 777)
	if idB == 777 || idB < 20000 || idB > 20999 {
		t.Errorf("host B identifier 777 became %d, want one of 20000-20999", idB)
	}
	for _, tc := range []struct {
		id   uint16
		host netip.Addr
		mac  [6]byte
	}{{idA, ipA, hostA}, {idB, ipB, hostB}} {
		_, f := e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(0, 0, uint32(tc.id)<<16|1, []byte("abcdefgh"))), lanPort)
		if got, want := wireOf(&f), (wire{lanMAC, tc.mac, remote, tc.host, 0, 0, 63, 0, 777}); got != want {
			t.Errorf("echo reply for %d: got %+v, want %+v", tc.id, got, want)
		}
	}
	// A reply to an identifier nobody uses goes to the host.
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(0, 0, 4242<<16, nil))); res.Action != routing.ToHost {
		t.Errorf("unknown echo reply: %v, want to_host", res.Action)
	}
}

func TestPortCollisionAndEIM(t *testing.T) {
	e := newEnv(t, nil)
	udp := func(src [6]byte, ip, dst netip.Addr, sp uint16) uint16 {
		_, f := e.forward(LAN, fromLAN(src, frametest.IPv4{Src: a4(ip), Dst: a4(dst)}.UDPPacket(sp, 3478, []byte("x"))), wanPort)
		return f.UDP.SrcPort
	}
	a1 := udp(hostA, ipA, remote, 6000)
	if a1 != 6000 {
		t.Errorf("A:6000 mapped to %d, want kept", a1)
	}
	b1 := udp(hostB, ipB, remote, 6000)
	if b1 == 6000 || b1 < 20000 || b1 > 20999 {
		t.Errorf("B:6000 mapped to %d, want one of 20000-20999", b1)
	}
	if a2 := udp(hostA, ipA, remote2, 6000); a2 != a1 {
		t.Errorf("A:6000 to a second destination mapped to %d, want %d (endpoint-independent)", a2, a1)
	}
	if b2 := udp(hostB, ipB, remote2, 6000); b2 != b1 {
		t.Errorf("B:6000 to a second destination mapped to %d, want %d (endpoint-independent)", b2, b1)
	}
	// A forwarded port is never used as a NAT port.
	if p := udp(hostA, ipA, remote, 5005); p == 5005 {
		t.Errorf("source port 5005 (a forwarded port) was kept")
	}
	// Replies to B's mapping reach B.
	_, f := e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote2), Dst: a4(wanAddr)}.UDPPacket(3478, b1, []byte("y"))), lanPort)
	if f.IPv4.DstAddr() != ipB || f.UDP.DstPort != 6000 {
		t.Errorf("reply to %d went to %v:%d, want %v:6000", b1, f.IPv4.DstAddr(), f.UDP.DstPort, ipB)
	}
	if n := e.r.maps.active(frame.ProtoUDP); n != 3 {
		t.Errorf("%d UDP mappings, want 3", n)
	}
}

func TestPortForward(t *testing.T) {
	e := newEnv(t, nil)
	in := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	_, f := e.forward(WAN, fromWAN(in.TCPPacket(frametest.TCP{SrcPort: 33000, DstPort: 8080, Seq: 1, Flags: frame.TCPSyn}, nil)), lanPort)
	if got, want := wireOf(&f), (wire{lanMAC, hostA, remote, ipA, 33000, 80, 63, frame.TCPSyn, 0}); got != want {
		t.Errorf("forwarded SYN: got %+v, want %+v", got, want)
	}
	_, f = e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 33000, Seq: 7, Ack: 2, Flags: frame.TCPSyn | frame.TCPAck}, nil)), wanPort)
	if got, want := wireOf(&f), (wire{wanMAC, gwMAC, wanAddr, remote, 8080, 33000, 63, frame.TCPSyn | frame.TCPAck, 0}); got != want {
		t.Errorf("answer: got %+v, want %+v", got, want)
	}
	if c := e.conn(Filter{Kind: KindForward}); c.State != StateSynRecv || c.OrigDst != addrPort(wanAddr, 8080) || c.ReplySrc != addrPort(ipA, 80) {
		t.Errorf("forward connection: %+v", c)
	}
	// A UDP port range maps onto the target range.
	_, f = e.forward(WAN, fromWAN(in.UDPPacket(999, 5003, []byte("hi"))), lanPort)
	if f.IPv4.DstAddr() != ipB || f.UDP.DstPort != 6003 {
		t.Errorf("udp 5003 went to %v:%d, want %v:6003", f.IPv4.DstAddr(), f.UDP.DstPort, ipB)
	}
}

// TestUDPHairpin: host A talks to a server from UDP port 4000 and learns
// its mapping on the WAN address (as from STUN); host B sends to that
// mapping and reaches A, seeing the WAN address and B's own mapping as the
// source (RFC 4787 REQ-9); A's answer goes back the same way. A port with
// no mapping is the box's.
func TestUDPHairpin(t *testing.T) {
	e := newEnv(t, nil)
	_, f := e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(4000, 3478, []byte("stun"))), wanPort)
	mapA := f.UDP.SrcPort
	_, f = e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(wanAddr)}.UDPPacket(5555, mapA, []byte("hello A"))), lanPort)
	if f.Dst != hostA || f.IPv4.SrcAddr() != wanAddr || f.IPv4.DstAddr() != ipA || f.UDP.DstPort != 4000 {
		t.Fatalf("hairpinned to %x %v:%d from %v, want A %v:4000 from %v", f.Dst, f.IPv4.DstAddr(), f.UDP.DstPort, f.IPv4.SrcAddr(), ipA, wanAddr)
	}
	mapB := f.UDP.SrcPort
	_, f = e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(wanAddr)}.UDPPacket(4000, mapB, []byte("hello B"))), lanPort)
	if f.Dst != hostB || f.IPv4.DstAddr() != ipB || f.UDP.DstPort != 5555 || f.UDP.SrcPort != mapA {
		t.Errorf("A's answer to %x %v:%d from port %d, want B %v:5555 from %d", f.Dst, f.IPv4.DstAddr(), f.UDP.DstPort, f.UDP.SrcPort, ipB, mapA)
	}
	if res := e.send(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(wanAddr)}.UDPPacket(5555, 31999, nil))); res.Action != routing.ToHost {
		t.Errorf("to a port with no mapping: %v/%v, want to_host", res.Action, res.Reason)
	}
}

func TestHairpin(t *testing.T) {
	e := newEnv(t, nil)
	// Host B connects to the WAN address's forwarded port 8080 (host A:80).
	_, f := e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 41000, DstPort: 8080, Seq: 1, Flags: frame.TCPSyn}, nil)), lanPort)
	if got, want := wireOf(&f), (wire{lanMAC, hostA, wanAddr, ipA, 41000, 80, 63, frame.TCPSyn, 0}); got != want {
		t.Errorf("hairpin SYN: got %+v, want %+v", got, want)
	}
	natPort := f.TCP.SrcPort
	_, f = e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: natPort, Seq: 9, Ack: 2, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
	if got, want := wireOf(&f), (wire{lanMAC, hostB, wanAddr, ipB, 8080, 41000, 63, frame.TCPSyn | frame.TCPAck, 0}); got != want {
		t.Errorf("hairpin answer: got %+v, want %+v", got, want)
	}
	if c := e.conn(Filter{Kind: KindHairpin}); c.State != StateSynRecv {
		t.Errorf("hairpin state %v, want syn_recv", c.State)
	}
	// Pinging the WAN address from the LAN is answered by the box.
	res := e.send(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(wanAddr)}.ICMPPacket(8, 0, 5<<16|1, []byte("ping"))))
	if res.Action != routing.Reply || res.Port != lanPort {
		t.Fatalf("ping WAN address from LAN: %v on %d", res.Action, res.Port)
	}
	_, rf := checkFrame(t, res.Frame)
	if rf.IPv4.SrcAddr() != wanAddr || rf.IPv4.DstAddr() != ipB || rf.ICMP.Type != 0 || rf.ICMP.ID != 5 {
		t.Errorf("echo reply %v > %v type %d id %d", rf.IPv4.SrcAddr(), rf.IPv4.DstAddr(), rf.ICMP.Type, rf.ICMP.ID)
	}
}

func TestEstablishedChecksumsMatchRecompute(t *testing.T) {
	// Many random-ish flows: every forwarded packet's checksums must
	// equal a full recomputation (checkFrame) in both directions.
	e := newEnv(t, nil)
	for i := range 200 {
		sp := uint16(1024 + i*97)
		payload := make([]byte, i%61)
		for j := range payload {
			payload[j] = byte(i * j)
		}
		_, f := e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: uint16(i)}.UDPPacket(sp, uint16(i+1), payload)), wanPort)
		e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(uint16(i+1), f.UDP.SrcPort, payload)), lanPort)
		_, f = e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote2)}.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 443, Seq: uint32(i) * 7919, Flags: frame.TCPSyn}, payload)), wanPort)
		e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote2), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: f.TCP.SrcPort, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
	}
}
