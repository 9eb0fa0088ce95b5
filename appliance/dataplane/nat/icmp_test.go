package nat

import (
	"bytes"
	"encoding/binary"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

func TestTTLExceeded(t *testing.T) {
	e := newEnv(t, nil)
	orig := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 1}.UDPPacket(33434, 33435, []byte("traceroute")))
	res := e.send(LAN, orig)
	if res.Action != routing.Reply || res.Port != lanPort {
		t.Fatalf("TTL 1: %v on %d (%v), want reply on LAN", res.Action, res.Port, res.Reason)
	}
	b, f := checkFrame(t, res.Frame)
	if f.Dst != hostA || f.Src != lanMAC || f.IPv4.SrcAddr() != lanAddr || f.IPv4.DstAddr() != ipA ||
		f.ICMP.Type != frame.ICMPTimeExceeded || f.ICMP.Code != 0 {
		t.Errorf("time exceeded: %v>%v %v>%v type %d code %d", f.Src, f.Dst, f.IPv4.SrcAddr(), f.IPv4.DstAddr(), f.ICMP.Type, f.ICMP.Code)
	}
	if q := orig[14 : 14+20+8+10]; !bytes.Equal(b[f.ICMP.EmbeddedOff:f.L3End], q) {
		t.Errorf("quote % x, want the original packet % x", b[f.ICMP.EmbeddedOff:f.L3End], q)
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("TTL-expired packet created %d connections", n)
	}
	if got := e.lan.Stats().Drops[ReasonTTL]; got != 1 {
		t.Errorf("ttl drops %d, want 1", got)
	}
	// TTL 2 is forwarded with TTL 1.
	_, f = e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 2}.UDPPacket(33434, 33436, nil)), wanPort)
	if f.IPv4.TTL != 1 {
		t.Errorf("TTL 2 forwarded with TTL %d", f.IPv4.TTL)
	}
	// No error about an ICMP error.
	res = e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 1}.ICMPPacket(3, 3, 0, make([]byte, 28))))
	if res.Action != routing.Drop {
		t.Errorf("TTL 1 ICMP error: %v, want drop", res.Action)
	}
}

func TestFragNeeded(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WAN.MTU = 1400 })
	big := func(df bool) []byte {
		return fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), DF: df}.UDPPacket(1000, 2000, make([]byte, 1472)))
	}
	res := e.send(LAN, big(true))
	if res.Action != routing.Reply || res.Port != lanPort {
		t.Fatalf("DF oversize: %v (%v), want reply", res.Action, res.Reason)
	}
	b, f := checkFrame(t, res.Frame)
	if f.ICMP.Type != 3 || f.ICMP.Code != 4 || binary.BigEndian.Uint32(b[f.L4Off+4:]) != 1400 {
		t.Errorf("got type %d code %d rest %d, want 3/4 with MTU 1400", f.ICMP.Type, f.ICMP.Code, binary.BigEndian.Uint32(b[f.L4Off+4:]))
	}
	if n := f.L3End - f.L3Off; n != 576 {
		t.Errorf("error is %d bytes, want 576 (quote cut)", n)
	}
	// Without DF the box fragments it (TestFragmentation).
	if res := e.send(LAN, big(false)); res.Action != routing.Forward || len(res.Frame) > 14+1400 {
		t.Errorf("non-DF oversize: %v/%v, %d bytes; want a forwarded first fragment", res.Action, res.Reason, len(res.Frame))
	}
	// 1400 bytes fit.
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), DF: true}.UDPPacket(1000, 2000, make([]byte, 1372))), wanPort)
}

// TestICMPErrorTranslation sends errors about translated packets back and
// checks that the quote is restored to what the LAN host sent.
func TestICMPErrorTranslation(t *testing.T) {
	e := newEnv(t, nil)
	// Host B's flows get allocated ports: A holds the same source ports.
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote2)}.UDPPacket(7000, 53, nil)), wanPort)
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote2)}.TCPPacket(frametest.TCP{SrcPort: 7001, DstPort: 80, Flags: frame.TCPSyn}, nil)), wanPort)
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote2)}.ICMPPacket(8, 0, 7002<<16, nil)), wanPort)
	for _, tc := range []struct {
		name      string
		orig      []byte // IP packet host B sends
		quoteLen  int    // bytes of the translated packet the error quotes
		typ, code uint8
		from      string // "router" or "peer"
	}{
		{"udp port unreachable from peer", frametest.IPv4{Src: a4(ipB), Dst: a4(remote), TTL: 9}.UDPPacket(7000, 53, []byte("dns?")), 32, 3, 3, "peer"},
		{"udp zero checksum time exceeded", frametest.IPv4{Src: a4(ipB), Dst: a4(remote), TTL: 9}.UDPPacketNoChecksum(7000, 54, []byte("x")), 28, 11, 0, "router"},
		{"tcp time exceeded 8-byte quote", frametest.IPv4{Src: a4(ipB), Dst: a4(remote), TTL: 9}.TCPPacket(frametest.TCP{SrcPort: 7001, DstPort: 80, Seq: 5, Flags: frame.TCPSyn}, nil), 28, 11, 0, "router"},
		{"tcp frag needed full header", frametest.IPv4{Src: a4(ipB), Dst: a4(remote), TTL: 9, DF: true}.TCPPacket(frametest.TCP{SrcPort: 7001, DstPort: 81, Seq: 5, Flags: frame.TCPSyn}, []byte("data")), 44, 3, 4, "router"},
		{"echo time exceeded", frametest.IPv4{Src: a4(ipB), Dst: a4(remote), TTL: 9}.ICMPPacket(8, 0, 7002<<16|3, []byte("pingpong")), 36, 11, 0, "router"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := fromLAN(hostB, tc.orig)
			out, f := e.forward(LAN, fr, wanPort)
			if f.IPv4.SrcAddr() != wanAddr {
				t.Fatalf("not masqueraded: %v", f.IPv4.SrcAddr())
			}
			// What the quoted packet looks like at the next hop (TTL
			// decremented again there, as routers quote what they got).
			quote := append([]byte(nil), out[14:14+tc.quoteLen]...)
			src := router1
			if tc.from == "peer" {
				src = remote
			}
			errPkt := fromWAN(frametest.IPv4{Src: a4(src), Dst: a4(wanAddr), TTL: 30}.ICMPPacket(tc.typ, tc.code, 1400, quote))
			b, g := e.forward(WAN, errPkt, lanPort)
			if g.IPv4.DstAddr() != ipB || g.Dst != hostB {
				t.Errorf("error went to %v (%v), want %v", g.IPv4.DstAddr(), g.Dst, ipB)
			}
			if g.IPv4.SrcAddr() != src {
				t.Errorf("error source %v, want %v kept", g.IPv4.SrcAddr(), src)
			}
			want := tc.orig[:tc.quoteLen]
			// The host's packet left with TTL 9, the quote has 8.
			wantQ := append([]byte(nil), want...)
			wantQ[8]--
			binary.BigEndian.PutUint16(wantQ[10:], 0)
			binary.BigEndian.PutUint16(wantQ[10:], frametest.Checksum(wantQ[:20]))
			if got := b[g.ICMP.EmbeddedOff:g.L3End]; !bytes.Equal(got, wantQ) {
				t.Errorf("quote\n% x\nwant what B sent\n% x", got, wantQ)
			}
		})
	}
	if got := e.wan.Stats().ICMPTranslated; got != 5 {
		t.Errorf("translated %d errors, want 5", got)
	}
	// An error about no known connection goes to the host.
	q := frametest.IPv4{Src: a4(wanAddr), Dst: a4(remote)}.UDPPacket(1, 2, nil)[:28]
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(router1), Dst: a4(wanAddr)}.ICMPPacket(3, 1, 0, q))); res.Action != routing.ToHost {
		t.Errorf("unmatched error: %v, want to_host", res.Action)
	}
	// An error with a bad ICMP checksum is dropped.
	bad := fromWAN(frametest.IPv4{Src: a4(router1), Dst: a4(wanAddr)}.ICMPPacket(3, 1, 0, q))
	bad[14+20+2] ^= 0xff
	if res := e.send(WAN, bad); res.Action != routing.Drop || res.Reason != ReasonBadChecksum {
		t.Errorf("bad checksum error: %v/%v", res.Action, res.Reason)
	}
}

func TestICMPErrorFromLANForDNAT(t *testing.T) {
	// A LAN host answers a forwarded UDP packet with port unreachable: the
	// error goes out from the WAN address quoting the remote's packet.
	e := newEnv(t, nil)
	origIn := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr), TTL: 40}.UDPPacket(9999, 5001, []byte("hello"))
	out, _ := e.forward(WAN, fromWAN(origIn), lanPort)
	quote := append([]byte(nil), out[14:14+28+5]...)
	b, g := e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote)}.ICMPPacket(3, 3, 0, quote)), wanPort)
	if g.IPv4.SrcAddr() != wanAddr || g.IPv4.DstAddr() != remote || g.Dst != gwMAC {
		t.Errorf("error %v > %v via %v, want %v > %v via gateway", g.IPv4.SrcAddr(), g.IPv4.DstAddr(), g.Dst, wanAddr, remote)
	}
	want := append([]byte(nil), origIn[:33]...)
	want[8]--
	binary.BigEndian.PutUint16(want[10:], 0)
	binary.BigEndian.PutUint16(want[10:], frametest.Checksum(want[:20]))
	if got := b[g.ICMP.EmbeddedOff:g.L3End]; !bytes.Equal(got, want) {
		t.Errorf("quote\n% x\nwant\n% x", got, want)
	}
}

func TestEchoToBox(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		side Side
		b    []byte
		src  [4]byte
	}{
		{LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}.ICMPPacket(8, 0, 1<<16|2, []byte("0123456789"))), a4(lanAddr)},
		{WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(8, 0, 3<<16|4, make([]byte, 1000))), a4(wanAddr)},
	} {
		res := e.send(tc.side, tc.b)
		if res.Action != routing.Reply {
			t.Fatalf("%v echo: %v %v", tc.side, res.Action, res.Reason)
		}
		_, f := checkFrame(t, res.Frame)
		var in frame.Frame
		if err := frame.Parse(tc.b, &in); err != nil {
			t.Fatal(err)
		}
		if f.IPv4.Src != tc.src || f.IPv4.Dst != in.IPv4.Src || f.Dst != in.Src || f.ICMP.Type != 0 ||
			f.ICMP.ID != in.ICMP.ID || f.ICMP.Seq != in.ICMP.Seq ||
			!bytes.Equal(res.Frame[f.PayloadOff:f.L3End], tc.b[in.PayloadOff:in.L3End]) {
			t.Errorf("%v echo reply does not mirror the request", tc.side)
		}
	}
	// TCP to the box goes to the host.
	if res := e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}.TCPPacket(frametest.TCP{SrcPort: 5, DstPort: 80, Flags: frame.TCPSyn}, nil))); res.Action != routing.ToHost {
		t.Errorf("TCP to LAN address: %v, want to_host", res.Action)
	}
}
