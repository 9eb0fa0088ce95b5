package nat

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// tcpConn runs a TCP handshake from host A's port 40000 to the remote's
// port 443: client ISN 1000, server ISN 5000, windows 1000 (scaled by 2^7
// when scaled), and returns the segment builders of both directions.
func tcpConn(t *testing.T, e *env, scaled bool) (out, in func(seq, ack uint32, flags uint8) []byte) {
	t.Helper()
	var opts []byte
	if scaled {
		opts = []byte{1, 3, 3, 7} // NOP, window scale 7
	}
	lanIP := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	wanIP := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	out = func(seq, ack uint32, flags uint8) []byte {
		seg := frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: seq, Ack: ack, Flags: flags, Window: 1000}
		if flags&frame.TCPSyn != 0 {
			seg.Opts = opts
		}
		return fromLAN(hostA, lanIP.TCPPacket(seg, nil))
	}
	in = func(seq, ack uint32, flags uint8) []byte {
		seg := frametest.TCP{SrcPort: 443, DstPort: 40000, Seq: seq, Ack: ack, Flags: flags, Window: 1000}
		if flags&frame.TCPSyn != 0 {
			seg.Opts = opts
		}
		return fromWAN(wanIP.TCPPacket(seg, nil))
	}
	e.forward(LAN, out(1000, 0, frame.TCPSyn), wanPort)
	e.forward(WAN, in(5000, 1001, frame.TCPSyn|frame.TCPAck), lanPort)
	e.forward(LAN, out(1001, 5001, frame.TCPAck), wanPort)
	// Data from the server: the client acknowledges it.
	e.forward(WAN, in(5001, 1001, frame.TCPAck|frame.TCPPsh), lanPort)
	e.forward(LAN, out(1001, 5101, frame.TCPAck), wanPort)
	return out, in
}

func connState(t *testing.T, e *env) string {
	t.Helper()
	c, _ := e.r.Conns(Filter{Port: 40000}, 0, 0, e.now, nil)
	if len(c) != 1 {
		t.Fatalf("%d connections on port 40000, want 1", len(c))
	}
	return c[0].State.String()
}

// TestBlindRST: a RST ends a tracked connection only at the receiver's
// RCV.NXT; one inside the receiver's window is passed on (for the
// receiver's challenge ACK) and the connection stays; one outside it is
// dropped (RFC 5961, as Linux conntrack does).
func TestBlindRST(t *testing.T) {
	for _, scaled := range []bool{false, true} {
		e := newEnv(t, nil)
		out, in := tcpConn(t, e, scaled)
		// The client's RCV.NXT is 5101: its last ACK said so.
		for _, seq := range []uint32{0, 1 << 31, 5100, 5101 + 1<<20, 3_000_000_000} {
			if res := e.send(WAN, in(seq, 1001, frame.TCPRst)); res.Action != routing.Drop || res.Reason != ReasonRST {
				t.Errorf("scaled=%v: RST seq %d: %v/%v, want drop rst_out_of_window", scaled, seq, res.Action, res.Reason)
			}
		}
		if s := connState(t, e); s != "established" {
			t.Fatalf("scaled=%v: after blind RSTs the connection is %s", scaled, s)
		}
		// Data still flows both ways.
		e.forward(WAN, in(5101, 1001, frame.TCPAck|frame.TCPPsh), lanPort)
		e.forward(LAN, out(1001, 5101, frame.TCPAck), wanPort)

		// In the window (1000 bytes, or 1000 << 7 scaled), not exact.
		inWindow := uint32(5101 + 500)
		if scaled {
			inWindow = 5101 + 100_000
		}
		e.forward(WAN, in(inWindow, 1001, frame.TCPRst), lanPort)
		if s := connState(t, e); s != "established" {
			t.Errorf("scaled=%v: after an in-window RST the connection is %s, want established", scaled, s)
		}
		if c, _ := e.r.Conns(Filter{Port: 40000}, 0, 0, e.now, nil); c[0].ExpiresIn > 120 {
			t.Errorf("scaled=%v: an in-window RST left %d s to live, want at most TIME_WAIT's 120", scaled, c[0].ExpiresIn)
		}
		// The next packet of the live connection restores its timeout.
		e.forward(LAN, out(1001, 5101, frame.TCPAck), wanPort)
		if c, _ := e.r.Conns(Filter{Port: 40000}, 0, 0, e.now, nil); c[0].ExpiresIn < 3600 {
			t.Errorf("scaled=%v: a packet after the RST left %d s to live, want the established timeout", scaled, c[0].ExpiresIn)
		}
		if !scaled {
			if res := e.send(WAN, in(5101+100_000, 1001, frame.TCPRst)); res.Action != routing.Drop {
				t.Errorf("unscaled: RST 100000 past RCV.NXT: %v, want dropped (window 1000)", res.Action)
			}
		}
		// Exact: the connection ends.
		e.forward(WAN, in(5101, 1001, frame.TCPRst), lanPort)
		if s := connState(t, e); s != "close" {
			t.Errorf("scaled=%v: after the exact RST the connection is %s, want close", scaled, s)
		}
	}
}

// TestRSTToSYN: before anything came back, a RST from the responder must
// acknowledge the SYN.
func TestRSTToSYN(t *testing.T) {
	e := newEnv(t, nil)
	lanIP := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	wanIP := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	e.forward(LAN, fromLAN(hostA, lanIP.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: 1000, Flags: frame.TCPSyn, Window: 1000}, nil)), wanPort)
	rst := func(ack uint32) []byte {
		return fromWAN(wanIP.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: 40000, Ack: ack, Flags: frame.TCPRst | frame.TCPAck}, nil))
	}
	if res := e.send(WAN, rst(77)); res.Action != routing.Drop || res.Reason != ReasonRST {
		t.Errorf("RST not acknowledging the SYN: %v/%v, want drop", res.Action, res.Reason)
	}
	if s := connState(t, e); s != "syn_sent" {
		t.Errorf("after a spoofed RST: %s, want syn_sent", s)
	}
	e.forward(WAN, rst(1001), lanPort)
	if s := connState(t, e); s != "close" {
		t.Errorf("after the RST of a closed port: %s, want close", s)
	}
}

// TestDamagedAck: a segment of the client's whose acknowledgment is
// further ahead than the server can have sent (a damaged or forged one;
// the client's window is 1000, 128000 scaled) does not become the
// highest: the server's RST at the client's real RCV.NXT still ends the
// connection. An acknowledgment within the client's window (or
// AckAdvance) is taken.
func TestDamagedAck(t *testing.T) {
	for _, scaled := range []bool{false, true} {
		e := newEnv(t, nil)
		out, in := tcpConn(t, e, scaled)
		e.forward(LAN, out(1001, 5101+1<<30, frame.TCPAck), wanPort) // forwarded: the router tracks, it does not judge ACKs
		e.forward(WAN, in(5101, 1001, frame.TCPAck|frame.TCPPsh), lanPort)
		e.forward(LAN, out(1001, 5101+AckAdvance, frame.TCPAck), wanPort) // within AckAdvance: taken
		e.forward(WAN, in(5101+AckAdvance, 1001, frame.TCPRst), lanPort)
		if s := connState(t, e); s != "close" {
			t.Errorf("scaled %v: after the RST at the client's RCV.NXT the connection is %s, want close", scaled, s)
		}
	}
	// Direct: how far ahead is later.
	for _, tc := range []struct {
		ack, a, win uint32
		want        bool
	}{
		{5100, 5000, 0, true},
		{5000, 5000, 0, false},
		{4999, 5000, 0, false},
		{5000 + AckAdvance, 5000, 0, true},
		{5000 + AckAdvance + 1, 5000, 0, false},
		{5000 + 1<<20, 5000, 1 << 19, true},
		{5000 + 1<<20 + 1, 5000, 1 << 19, false},
		{10, 0xffffff00, 1000, true}, // across the wrap
	} {
		if got := ackAhead(tc.ack, tc.a, tc.win); got != tc.want {
			t.Errorf("ackAhead(%d, %d, %d) = %v, want %v", tc.ack, tc.a, tc.win, got, tc.want)
		}
	}
}
