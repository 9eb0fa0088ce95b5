package dataplane

import (
	"math/rand/v2"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/netnstest"
)

// convIP builds the IP packets of a conversation (frametest.IPv4 or
// frametest.IPv6).
type convIP interface {
	TCPPacket(t frametest.TCP, payload []byte) []byte
	UDPPacket(sport, dport uint16, payload []byte) []byte
	ICMPPacket(typ, code uint8, rest uint32, payload []byte) []byte
}

// conv is a fast path differential test's conversations: A's TCP, UDP
// and echo with the server, seen from both sides: A sends outIP's
// packets to the router's LAN MAC from h1, the server inIP's to its WAN
// MAC from h2. The IPv4 (NAT) and IPv6 (routed) tests differ only in
// these and in the exceptions they send.
type conv struct {
	t              *testing.T
	r              *rand.Rand
	lanMAC, wanMAC [6]byte
	h1, h2         *netnstest.Packets
	seqA, seqS     uint32

	etherType       uint16
	outIP, inIP     convIP
	echoReq, echoRe uint8 // the echo request and reply types
	pad             bool  // pad frames to the Ethernet minimum
}

func (c *conv) payload(max int) []byte {
	p := make([]byte, c.r.IntN(max))
	for i := range p {
		p[i] = byte(c.r.Uint32())
	}
	return p
}

// out is a frame from A to the server, in is one from the server to A
// (its mapped address under NAT: the router keeps A's ports).
func (c *conv) out(ip []byte) []byte { return c.frame(c.lanMAC, fpHostA, ip) }
func (c *conv) in(ip []byte) []byte  { return c.frame(c.wanMAC, fpGwMAC, ip) }

func (c *conv) frame(dst, src [6]byte, ip []byte) []byte {
	f := frametest.Frame(dst, src, c.etherType, ip)
	if c.pad {
		f = frametest.Pad(f)
	}
	return f
}

func (c *conv) tcpOut(flags uint8, payload []byte) []byte {
	f := c.out(c.outIP.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: c.seqA, Ack: c.seqS, Flags: flags, Window: 1000}, payload))
	c.seqA += uint32(len(payload))
	return f
}

func (c *conv) tcpIn(flags uint8, payload []byte) []byte {
	f := c.in(c.inIP.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: 40000, Seq: c.seqS, Ack: c.seqA, Flags: flags, Window: 1000}, payload))
	c.seqS += uint32(len(payload))
	return f
}

func (c *conv) udpOut(n int) []byte { return c.out(c.outIP.UDPPacket(5353, 53, c.payload(n))) }
func (c *conv) udpIn(n int) []byte  { return c.in(c.inIP.UDPPacket(53, 5353, c.payload(n))) }

func (c *conv) echoOut(seq uint32, n int) []byte {
	return c.out(c.outIP.ICMPPacket(c.echoReq, 0, 77<<16|seq, c.payload(n)))
}
func (c *conv) echoIn(seq uint32, n int) []byte {
	return c.in(c.inIP.ICMPPacket(c.echoRe, 0, 77<<16|seq, c.payload(n)))
}

// step sends frames from A and from the server and lets them through.
func (c *conv) step(fromA, fromS [][]byte) {
	c.h1.Send(c.t, fromA...)
	c.h2.Send(c.t, fromS...)
	time.Sleep(30 * time.Millisecond)
}

// open runs the TCP handshake and a first UDP and echo exchange.
func (c *conv) open() {
	c.seqA, c.seqS = 1000, 5000
	c.step([][]byte{c.tcpOut(frame.TCPSyn, nil)}, nil)
	c.seqA++
	c.step(nil, [][]byte{c.tcpIn(frame.TCPSyn|frame.TCPAck, nil)})
	c.seqS++
	c.step([][]byte{c.tcpOut(frame.TCPAck, nil), c.udpOut(100), c.echoOut(1, 56)}, nil)
	c.step(nil, [][]byte{c.udpIn(100), c.echoIn(1, 56)})
}

// exchange sends n rounds of data of every flow both ways; extra, if set,
// adds a frame from A to each third of a round.
func (c *conv) exchange(n int, extra func() []byte) {
	for i := range n {
		var a, s [][]byte
		for range 3 {
			a = append(a, c.tcpOut(frame.TCPAck|frame.TCPPsh, c.payload(1200)), c.udpOut(1300))
			if extra != nil {
				a = append(a, extra())
			}
			s = append(s, c.tcpIn(frame.TCPAck|frame.TCPPsh, c.payload(1200)), c.udpIn(1300))
		}
		a = append(a, c.echoOut(uint32(i+2), 56))
		s = append(s, c.echoIn(uint32(i+2), 56))
		c.step(a, s)
	}
}

// blast sends n damaged frames (made by damage) of the flows both ways,
// one side after the other: a damaged frame from the LAN (a new
// connection, a state change, the ACKs a RST's window is judged by)
// decides the fate of some from the WAN, and the fast path forwards (and
// tracks) A's frames sooner than the rings do.
func (c *conv) blast(n int, damage func(*rand.Rand, [][]byte, int) [][]byte) {
	seqA, seqS := c.seqA, c.seqS
	out := [][]byte{c.tcpOut(frame.TCPAck, c.payload(40)), c.udpOut(40), c.echoOut(1, 40)}
	in := [][]byte{c.tcpIn(frame.TCPAck, c.payload(40)), c.udpIn(40)}
	c.seqA, c.seqS = seqA, seqS
	outs, ins := damage(c.r, out, n), damage(c.r, in, n)
	c.step(outs, nil)
	c.step(nil, ins)
}

// close ends the TCP connection with FINs and a RST of the server.
func (c *conv) close() {
	c.step([][]byte{c.tcpOut(frame.TCPFin|frame.TCPAck, nil)}, nil)
	c.seqA++
	c.step(nil, [][]byte{c.tcpIn(frame.TCPAck|frame.TCPPsh, c.payload(100))})
	c.step(nil, [][]byte{c.tcpIn(frame.TCPRst, nil)})
}
