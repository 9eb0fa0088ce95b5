package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
)

// tcpAck matches an IPv4 TCP segment from src to dst and returns its
// source port and acknowledgment number.
func tcpAck(p []byte, src, dst [4]byte) (sport uint16, ack uint32, ok bool) {
	if len(p) < 14+20+20 || binary.BigEndian.Uint16(p[12:]) != 0x0800 || p[14+9] != 6 ||
		[4]byte(p[14+12:]) != src || [4]byte(p[14+16:]) != dst {
		return 0, 0, false
	}
	l4 := p[14+int(p[14]&0xf)*4:]
	if len(l4) < 20 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(l4), binary.BigEndian.Uint32(l4[8:]), true
}

// TestNATBlindRST: a live connection from the LAN host to the internet
// server's echo port survives 200 spoofed RSTs from the WAN with
// sequence numbers outside the client's window (dropped by the box: none
// reaches the LAN); a RST inside the window but not at RCV.NXT is passed
// on, and the client's challenge ACK keeps the connection; a RST at
// RCV.NXT ends it, in the box and at the client (RFC 5961, as Linux
// does). The attacker sits on the WAN side; the client's RCV.NXT is read
// off its ACKs as they leave the box.
func TestNATBlindRST(t *testing.T) {
	c := newRSTConn(t, newNATLab(t, 4096))
	l := c.l
	port, next := c.rcvNxt(t)
	s0 := l.stats(t)
	rng := rand.New(rand.NewPCG(18, 3))
	var blind [][]byte
	for range 200 {
		// At least 2^30 past RCV.NXT (more than any window) or behind it.
		blind = append(blind, c.rst(port, next+1<<30+rng.Uint32N(3<<30)))
	}
	n := c.rstsAtLAN(t, blind...)
	dropped := l.stats(t).Drops[dataplane.NATDrop(nat.ReasonRST)] - s0.Drops[dataplane.NATDrop(nat.ReasonRST)]
	st := c.state(t)
	t.Logf("attack: name=blind_rst sent=200 dropped_rst_out_of_window=%d reached_lan=%d state_after=%s", dropped, n, st)
	if n != 0 || dropped != 200 {
		t.Errorf("200 out-of-window RSTs: %d reached the LAN host, the box dropped %d as rst_out_of_window; want 0 and 200", n, dropped)
	}
	if st != "established" {
		t.Errorf("after 200 out-of-window RSTs the box has the connection %s, want established", st)
	}
	if s := c.echo(t); s != "ok" {
		t.Fatalf("the connection after 200 out-of-window RSTs: %s", s)
	}

	port, next = c.rcvNxt(t)
	n = c.rstsAtLAN(t, c.rst(port, next+1000))
	st = c.state(t)
	echoed := c.echo(t)
	t.Logf("attack: name=in_window_rst reached_lan=%d state_after=%s echo=%s", n, st, echoed)
	if n != 1 || st != "established" || echoed != "ok" {
		t.Errorf("a RST in the window, 1000 past RCV.NXT: %d reached the LAN host (want 1: the client answers it), the box has the connection %s (want established), echo %s (want ok)", n, st, echoed)
	}

	port, next = c.rcvNxt(t)
	n = c.rstsAtLAN(t, c.rst(port, next))
	st = c.state(t)
	echoed = c.echo(t)
	t.Logf("attack: name=exact_rst reached_lan=%d state_after=%s echo=%s", n, st, echoed)
	if n != 1 || (st != "close" && st != "gone") || !strings.Contains(echoed, "reset") {
		t.Errorf("a RST at RCV.NXT: %d reached the LAN host (want 1), the box has the connection %s (want close), echo %q (want a reset)", n, st, echoed)
	}
}

// rstConn is TestNATBlindRST's connection: the LAN host's echo
// connection to the internet server (helperConn) and the MACs a spoofer
// on the WAN puts on its RSTs.
type rstConn struct {
	l             *lab
	in            io.Writer
	out           *helperOutput
	boxMAC, gwMAC [6]byte
}

func newRSTConn(t *testing.T, l *lab) *rstConn {
	l.serve(t, nsInet, "inet")
	_, in, out := l.helper(t, nsLAN, "conn", natServer+":7")
	if s := line(t, out, 10*time.Second); !strings.HasPrefix(s, "local ") {
		t.Fatalf("conn helper: %q", s)
	}
	return &rstConn{l: l, in: in, out: out, boxMAC: macOf(t, l.box, "p2"), gwMAC: macOf(t, l.hosts[nsGW-1], "eth0")}
}

// echo echoes a line over the connection: "ok" or the client's error.
func (c *rstConn) echo(t *testing.T) string {
	fmt.Fprintln(c.in, "echo")
	return line(t, c.out, 10*time.Second)
}

// state is the box's state of the connection ("gone" when it has none).
func (c *rstConn) state(t *testing.T) string {
	p := c.l.conntrack(t, "proto=tcp&port=7&addr="+natServer)
	if p.Total == 0 {
		return "gone"
	}
	return p.Conns[0].State
}

// rcvNxt echoes once and returns the client's NAT port and RCV.NXT: the
// highest acknowledgment it sent (its ACK of the echo), as seen on the
// WAN.
func (c *rstConn) rcvNxt(t *testing.T) (uint16, uint32) {
	t.Helper()
	gwCap := c.l.capture(t, nsGW)
	if s := c.echo(t); s != "ok" {
		t.Fatalf("echo: %s", s)
	}
	var port uint16
	var next uint32
	gwCap(500*time.Millisecond, func(p afpacket.Packet) bool {
		sp, ack, ok := tcpAck(p.Data, ip4(natWANAddr), ip4(natServer))
		if ok && (port == 0 || int32(ack-next) > 0) {
			port, next = sp, ack
		}
		return ok
	})
	if port == 0 {
		t.Fatal("no segment of the connection seen on the WAN")
	}
	return port, next
}

// rst is a RST from the server to the client's NAT port with seq.
func (c *rstConn) rst(port uint16, seq uint32) []byte {
	seg := frametest.TCP{SrcPort: 7, DstPort: port, Seq: seq, Flags: 0x04}
	return frametest.Pad(frametest.Frame(c.boxMAC, c.gwMAC, frametest.EtherTypeIPv4,
		frametest.IPv4{Src: ip4(natServer), Dst: ip4(natWANAddr)}.TCPPacket(seg, nil)))
}

// rstsAtLAN sends frames from the gateway and counts the RSTs from the
// server that reach the LAN host.
func (c *rstConn) rstsAtLAN(t *testing.T, frames ...[]byte) int {
	lanCap := c.l.capture(t, nsLAN)
	c.l.send(t, nsGW, frames...)
	return lanCap(500*time.Millisecond, isRSTFrom(net.ParseIP(natServer)))
}

// arpAttack returns one round of an ARP spoofing host's frames: claims
// that the gateway's address is at mac (unsolicited replies to the box,
// gratuitous replies and requests, requests to the box with the gateway
// as sender), 80 in all, and a spray of requests to the box from every
// other address of the WAN subnet with random MACs.
func arpAttack(rng *rand.Rand, mac, boxMAC [6]byte) (frames [][]byte, claims int) {
	gw, box, none := ip4(natGateway), ip4(natWANAddr), [6]byte{}
	for range 20 {
		frames = append(frames,
			frametest.ARPFrame(boxMAC, mac, 2, mac, gw, boxMAC, box),
			frametest.ARPFrame(bcast, mac, 2, mac, gw, bcast, gw),
			frametest.ARPFrame(bcast, mac, 1, mac, gw, none, gw),
			frametest.ARPFrame(bcast, mac, 1, mac, gw, none, box))
	}
	claims = len(frames)
	for host := byte(3); host < 255; host++ {
		if host == ip4(natAttacker)[3] {
			continue
		}
		m := [6]byte{0x02, 0x66, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), host}
		frames = append(frames, frametest.ARPFrame(bcast, m, 1, m, [4]byte{10, 61, 0, host}, none, box))
	}
	return frames, claims
}

// TestNATARPSpoof: a host on the WAN segment (a Linux bridge joining the
// box, the gateway and the attacker) claims the gateway's address for
// its own MAC in every way ARP allows and sprays requests from the rest
// of the subnet, for 4 s, while the LAN host pings the internet server
// every 10 ms and opens 10 connections to it. Nothing meant for the
// gateway may reach the attacker, the traffic keeps going through the
// real gateway and the box keeps the gateway's MAC.
func TestNATARPSpoof(t *testing.T) {
	l := natLab{config: natConfigJSON(4096), wanSegment: true}.build(t)
	l.serve(t, nsInet, "inet")
	l.mustHost(t, nsLAN, "ping", "-c", "2", "-i", "0.2", "-W", "2", natServer)
	gwMAC, atkMAC, boxMAC := macOf(t, l.hosts[nsGW-1], "eth0"), macOf(t, l.hosts[nsAtk-1], "eth0"), macOf(t, l.box, "p2")
	if n, ok := l.neighbour(t, natGateway); !ok || n.MAC != net.HardwareAddr(gwMAC[:]).String() {
		t.Fatalf("before the attack the gateway's entry is %+v (%v), want %v", n, ok, net.HardwareAddr(gwMAC[:]))
	}

	atkCap := l.capture(t, nsAtk)
	diverted, toAttacker := 0, 0
	var divertedSample []string
	captured, _ := background(t, func(<-chan struct{}) int {
		return atkCap(6*time.Second, func(p afpacket.Packet) bool {
			// Unicast IPv4 only: multicast (the hosts' IGMP reports)
			// goes to every port of the segment.
			if len(p.Data) < 34 || p.Data[0]&1 != 0 || binary.BigEndian.Uint16(p.Data[12:]) != 0x0800 {
				return false
			}
			if [4]byte(p.Data[30:34]) != ip4(natAttacker) {
				diverted++ // an IPv4 packet for someone else
				if len(divertedSample) < 3 {
					divertedSample = append(divertedSample, fmt.Sprintf("%v→%v %v→%v proto %d",
						net.HardwareAddr(p.Data[6:12]), net.HardwareAddr(p.Data[0:6]), net.IP(p.Data[26:30]), net.IP(p.Data[30:34]), p.Data[23]))
				}
			} else {
				toAttacker++
			}
			return true
		})
	})
	s0 := l.stats(t)
	gwRx := l.rxPackets(t, nsGW)
	type pingResult struct {
		out string
		err error
	}
	pinged, _ := background(t, func(<-chan struct{}) pingResult {
		out, err := l.host(nsLAN, "ping", "-q", "-c", "500", "-i", "0.01", "-W", "2", natServer)
		return pingResult{out, err}
	})
	dialed := l.paced(t, nsLAN, natServer+":8080", 10, 4*time.Second)
	rng := rand.New(rand.NewPCG(18, 6))
	claims := 0
	for range 10 {
		frames, n := arpAttack(rng, atkMAC, boxMAC)
		l.send(t, nsAtk, frames...)
		claims += n
		time.Sleep(400 * time.Millisecond)
	}
	conns := dialed()
	pr := pinged()
	captured()
	s1 := l.stats(t)
	gwGot := l.rxPackets(t, nsGW) - gwRx
	conflicts := s1.Drops[dataplane.NATDrop(nat.ReasonARPConflict)] - s0.Drops[dataplane.NATDrop(nat.ReasonARPConflict)]
	n, _ := l.neighbour(t, natGateway)
	var sent, received int
	if i := strings.Index(pr.out, " packets transmitted"); i >= 0 {
		fmt.Sscanf(pr.out[strings.LastIndexByte(pr.out[:i], '\n')+1:], "%d packets transmitted, %d received", &sent, &received)
	}
	t.Logf("attack: name=arp_spoof claims=%d spray=%d conflicts_counted=%d gateway_mac=%s lan_conns=%d/10 pings=%d/%d gw_rx=%d attacker_diverted=%d attacker_own=%d arp_requests_sent=%d",
		claims, 10*251, conflicts, n.MAC, conns.OK, received, sent, gwGot, diverted, toAttacker, s1.NAT.ARPRequests-s0.NAT.ARPRequests)

	if diverted != 0 {
		t.Errorf("%d IPv4 packets for others reached the attacker: %v", diverted, divertedSample)
	}
	if n.MAC != net.HardwareAddr(gwMAC[:]).String() {
		t.Errorf("after the attack the box has the gateway at %s, want %v (the attacker is %v)", n.MAC, net.HardwareAddr(gwMAC[:]), net.HardwareAddr(atkMAC[:]))
	}
	if conns.OK != 10 {
		t.Errorf("%d of 10 LAN connections during the attack: %v", conns.OK, conns.Errors)
	}
	if sent != 500 || received < 475 || gwGot < uint64(sent) {
		t.Errorf("pings during the attack: %d of %d answered, the gateway received %d frames; want at least 95%% answered, all through the gateway\n%s %v",
			received, sent, gwGot, pr.out, pr.err)
	}
	if conflicts < uint64(claims) {
		t.Errorf("%d ARP conflicts counted for %d claims", conflicts, claims)
	}
}
