package nat

import (
	"encoding/binary"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

func TestMSSClamp(t *testing.T) {
	mssOpt := func(pre []byte, v uint16) []byte {
		o := append(append([]byte(nil), pre...), 2, 4, byte(v>>8), byte(v))
		for len(o)%4 != 0 {
			o = append(o, 1)
		}
		return o
	}
	for _, tc := range []struct {
		name  string
		clamp int
		mtu   int
		opts  []byte
		want  uint16
	}{
		{"default clamps to wan mtu", 0, 1400, mssOpt(nil, 1460), 1360},
		{"odd offset", 0, 1400, mssOpt([]byte{1}, 1460), 1360},
		{"smaller kept", 0, 1400, mssOpt([]byte{1, 1, 1}, 1200), 1200},
		{"explicit", 1000, 1500, mssOpt([]byte{1, 1, 1, 1, 4, 2}, 1460), 1000},
		{"off", -1, 1400, mssOpt(nil, 1460), 1460},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.MSSClamp = tc.clamp; c.WAN.MTU = tc.mtu })
			b, f := e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn, Opts: tc.opts}, nil)), wanPort)
			opts := b[f.L4Off+20 : f.PayloadOff]
			i := strings.Index(string(opts), "\x02\x04")
			if got := binary.BigEndian.Uint16(opts[i+2:]); got != tc.want {
				t.Errorf("MSS %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDrops(t *testing.T) {
	e := newEnv(t, nil)
	good := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, []byte("abc")))
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		side Side
		port int
		b    []byte
		why  Reason
	}{
		{"truncated", LAN, lanPort, good[:30], ReasonMalformed},
		{"bad ihl", LAN, lanPort, mod(func(b []byte) []byte { b[14] = 0x44; return b }), ReasonMalformed},
		{"bad total length", LAN, lanPort, mod(func(b []byte) []byte { b[17] = 0xff; return b }), ReasonMalformed},
		{"bad header checksum", LAN, lanPort, mod(func(b []byte) []byte { b[24] ^= 1; return b }), ReasonBadChecksum},
		{"ipv6", LAN, lanPort, frametest.Pad(frametest.Frame(lanMAC, hostA, frame.EtherTypeIPv6, append([]byte{0x60, 0, 0, 0, 0, 0, 59, 64}, make([]byte, 32)...))), ReasonIPv6},
		{"vlan", LAN, lanPort, mod(func(b []byte) []byte {
			return append(append(append([]byte(nil), b[:12]...), 0x81, 0, 0, 5), b[12:]...)
		}), ReasonVLAN},
		{"other mac", LAN, lanPort, mod(func(b []byte) []byte { b[5] = 0x77; return b }), ReasonNotForUs},
		{"spoofed lan source", LAN, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ap("10.9.9.9")), Dst: a4(remote)}.UDPPacket(1, 2, nil)), ReasonMartian},
		{"lan address from wan", WAN, wanPort, fromWAN(frametest.IPv4{Src: a4(ipA), Dst: a4(wanAddr)}.UDPPacket(1, 2, nil)), ReasonMartian},
		{"lan to lan", LAN, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(ipB)}.UDPPacket(1, 2, nil)), ReasonNoRoute},
		{"wan to other ip", WAN, wanPort, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(ap("203.0.113.50"))}.UDPPacket(1, 2, nil)), ReasonNotForUs},
		{"unknown port", LAN, 9, good, ReasonUnknownPort},
		{"lldp", LAN, lanPort, frametest.Pad(frametest.Frame(lanMAC, hostA, 0x88cc, make([]byte, 40))), ReasonEtherType},
	} {
		res := e.lan.Handle(e.now, tc.port, append([]byte(nil), tc.b...))
		if tc.side == WAN {
			res = e.wan.Handle(e.now, tc.port, append([]byte(nil), tc.b...))
		}
		if res.Action != routing.Drop || res.Reason != tc.why {
			t.Errorf("%s: %v/%v, want drop %v", tc.name, res.Action, res.Reason, tc.why)
		}
	}
	st := e.r.Stats()
	if st.Malformed[frame.ReasonTruncated] != 1 || st.Malformed[frame.ReasonBadIHL] != 1 || st.Malformed[frame.ReasonBadLength] != 1 {
		t.Errorf("malformed counters %v", st.Malformed)
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("dropped frames created %d connections", n)
	}
	// A DHCP discover from 0.0.0.0 on the LAN reaches the host.
	if res := e.send(LAN, frametest.Pad(frametest.Frame(bcast, hostA, frame.EtherTypeIPv4, frametest.IPv4{Src: a4(ap("0.0.0.0")), Dst: a4(ap("255.255.255.255"))}.UDPPacket(68, 67, nil)))); res.Action != routing.ToHost {
		t.Errorf("DHCP discover: %v/%v, want to_host", res.Action, res.Reason)
	}
	// DHCP replies to the WAN reach the host even before it has an address.
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(gwAddr), Dst: a4(ap("203.0.113.77"))}.UDPPacket(67, 68, nil))); res.Action != routing.ToHost {
		t.Errorf("DHCP reply: %v, want to_host", res.Action)
	}
}

func TestRules(t *testing.T) {
	rs, err := rules.Parse(`
udp dport 53 drop
tcp dport 25 reject
udp dport 69 reject
chain input
icmp type echo-request drop
`)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := rules.Compile(rs, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := rules.NewSet(rules.SetOptions{Workers: 1})
	set.Swap(tab)
	e := newEnv(t, nil)
	w := e.r.NewWorker(set.Worker(0))
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	res := w.Handle(e.now, lanPort, fromLAN(hostA, out.UDPPacket(1, 53, nil)))
	if res.Action != routing.Drop || res.Reason != ReasonRule {
		t.Errorf("udp 53: %v/%v, want rule drop", res.Action, res.Reason)
	}
	res = w.Handle(e.now, lanPort, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: 1234, DstPort: 25, Seq: 1000, Flags: frame.TCPSyn}, nil)))
	if res.Action != routing.Reply {
		t.Fatalf("tcp 25: %v/%v, want RST", res.Action, res.Reason)
	}
	_, f := checkFrame(t, res.Frame)
	if f.IPv4.SrcAddr() != remote || f.IPv4.DstAddr() != ipA || f.TCP.SrcPort != 25 || f.TCP.DstPort != 1234 ||
		f.TCP.Flags != frame.TCPRst|frame.TCPAck || f.TCP.Ack != 1001 || f.Dst != hostA {
		t.Errorf("RST: %+v %+v", f.IPv4, f.TCP)
	}
	res = w.Handle(e.now, lanPort, fromLAN(hostA, out.UDPPacket(1, 69, nil)))
	if res.Action != routing.Reply {
		t.Fatalf("udp 69: %v, want port unreachable", res.Action)
	}
	if _, f := checkFrame(t, res.Frame); f.ICMP.Type != 3 || f.ICMP.Code != 3 || f.IPv4.SrcAddr() != lanAddr {
		t.Errorf("unreachable: type %d code %d from %v", f.ICMP.Type, f.ICMP.Code, f.IPv4.SrcAddr())
	}
	if res := w.Handle(e.now, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}.ICMPPacket(8, 0, 0, nil))); res.Action != routing.Drop {
		t.Errorf("echo to box with input drop: %v", res.Action)
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("refused connections created %d entries", n)
	}
	res = w.Handle(e.now, lanPort, fromLAN(hostA, out.UDPPacket(1, 54, nil)))
	if res.Action != routing.Forward {
		t.Errorf("udp 54: %v, want forwarded", res.Action)
	}
}
