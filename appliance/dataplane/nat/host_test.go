package nat

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

const hostPort = 3 // the box's own stack (Config.Host)

func withHost(c *Config) { c.Host = hostPort }

func withExtra(c *Config) { c.Host, c.HostAddrs = hostPort, []netip.Addr{ap("192.168.1.2")} }

// TestBoxStack: with Config.Host, TCP and UDP to the LAN address reach the
// box's own stack unchanged, the box's connections are masqueraded like a
// LAN host's and their replies come back to it, and a LAN host cannot
// pass for the box.
func TestBoxStack(t *testing.T) {
	toBox := frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}
	fromBox := frametest.IPv4{Src: a4(lanAddr), Dst: a4(remote)}
	boxFrame := func(ip []byte) []byte { // the kernel routes via the LAN MAC, from its own
		return frametest.Pad(frametest.Frame(lanMAC, lanMAC, frame.EtherTypeIPv4, ip))
	}
	tests := []struct {
		name   string
		mod    func(*Config)
		port   int
		frame  []byte
		action routing.Action
		reason Reason
		outTo  int
	}{
		{"DNS query to the LAN address", withHost, lanPort, fromLAN(hostA, toBox.UDPPacket(5353, 53, []byte("q"))), routing.Deliver, 0, hostPort},
		{"TCP to the dashboard", withHost, lanPort, fromLAN(hostA, toBox.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 80, Flags: frame.TCPSyn, Seq: 1}, nil)), routing.Deliver, 0, hostPort},
		{"a later fragment for the box", withHost, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr), Proto: frame.ProtoUDP, ID: 7, FragOff: 185}.Build(make([]byte, 64))), routing.Deliver, 0, hostPort},
		{"echo is answered by the router itself", withHost, lanPort, fromLAN(hostA, toBox.ICMPPacket(8, 0, 0x00010001, nil)), routing.Reply, 0, lanPort},
		{"without a host port, TCP to the LAN address", nil, lanPort, fromLAN(hostA, toBox.UDPPacket(5353, 53, nil)), routing.ToHost, 0, lanPort},
		{"the box's DNS query to the Internet", withHost, hostPort, boxFrame(fromBox.UDPPacket(40001, 53, []byte("q"))), routing.Forward, 0, wanPort},
		{"a ping to another of the box's addresses is its stack's", withExtra, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(ap("192.168.1.2"))}.ICMPPacket(8, 0, 0x00010001, nil)), routing.Deliver, 0, hostPort},
		{"another LAN address is not the box's", withExtra, lanPort, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(ap("192.168.1.3"))}.ICMPPacket(8, 0, 0x00010001, nil)), routing.Drop, ReasonNoRoute, 0},
		{"a LAN host with the box's address", withHost, lanPort, fromLAN(hostA, fromBox.UDPPacket(40001, 53, nil)), routing.Drop, ReasonMartian, 0},
		{"the box's address from the LAN without a host port", nil, lanPort, fromLAN(hostA, fromBox.UDPPacket(40001, 53, nil)), routing.Drop, ReasonMartian, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.mod)
			in := append([]byte(nil), tt.frame...)
			res := e.lan.Handle(e.now, tt.port, in)
			if res.Action != tt.action || res.Reason != tt.reason || tt.outTo != 0 && res.Port != tt.outTo {
				t.Fatalf("got %v/%v on port %d, want %v/%v on port %d", res.Action, res.Reason, res.Port, tt.action, tt.reason, tt.outTo)
			}
			if res.Action == routing.Deliver && string(res.Frame) != string(tt.frame) {
				t.Errorf("delivered frame changed")
			}
		})
	}
}

// TestBoxConnection follows one of the box's own connections to the WAN
// and its reply back to the host port.
func TestBoxConnection(t *testing.T) {
	e := newEnv(t, withHost)
	q := frametest.Pad(frametest.Frame(lanMAC, lanMAC, frame.EtherTypeIPv4, frametest.IPv4{Src: a4(lanAddr), Dst: a4(remote)}.UDPPacket(40001, 53, []byte("query"))))
	res := e.lan.Handle(e.now, hostPort, q)
	if res.Action != routing.Forward || res.Port != wanPort {
		t.Fatalf("query: %v/%v on %d", res.Action, res.Reason, res.Port)
	}
	_, f := checkFrame(t, res.Frame)
	if f.IPv4.SrcAddr() != wanAddr {
		t.Fatalf("query leaves from %v, want %v", f.IPv4.SrcAddr(), wanAddr)
	}
	natPort := f.UDP.SrcPort
	reply := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, natPort, []byte("answer")))
	res = e.send(WAN, reply)
	if res.Action != routing.Forward || res.Port != hostPort {
		t.Fatalf("reply: %v/%v on %d, want forward to the host port", res.Action, res.Reason, res.Port)
	}
	_, f = checkFrame(t, res.Frame)
	if f.Dst != lanMAC || f.IPv4.DstAddr() != lanAddr || f.UDP.DstPort != 40001 {
		t.Errorf("reply to %x %v:%d, want %x %v:40001", f.Dst, f.IPv4.DstAddr(), f.UDP.DstPort, lanMAC, lanAddr)
	}
	if c := e.conn(Filter{}); c.OrigSrc.Addr() != lanAddr {
		t.Errorf("connection %+v, want one from the box", c)
	}
}

// TestBoxInputRules: the input chain decides what reaches the box's own
// stack; the box's own connections go through the output chain.
func TestBoxInputRules(t *testing.T) {
	rs, err := rules.Parse(`
chain input
udp dport 53 drop
chain output
udp dport 123 drop
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
	e := newEnv(t, withHost)
	w := e.r.NewWorker(set.Worker(0))
	toBox := frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}
	if res := w.Handle(e.now, lanPort, fromLAN(hostA, toBox.UDPPacket(1, 53, nil))); res.Action != routing.Drop || res.Reason != ReasonRule {
		t.Errorf("udp 53 to the box: %v/%v, want rule drop", res.Action, res.Reason)
	}
	if res := w.Handle(e.now, lanPort, fromLAN(hostA, toBox.UDPPacket(1, 67, nil))); res.Action != routing.Deliver {
		t.Errorf("udp 67 to the box: %v/%v, want deliver", res.Action, res.Reason)
	}
	ntp := frametest.Pad(frametest.Frame(lanMAC, lanMAC, frame.EtherTypeIPv4, frametest.IPv4{Src: a4(lanAddr), Dst: a4(remote)}.UDPPacket(40002, 123, nil)))
	if res := w.Handle(e.now, hostPort, ntp); res.Action != routing.Drop || res.Reason != ReasonRule {
		t.Errorf("the box's NTP out: %v/%v, want rule drop (output chain)", res.Action, res.Reason)
	}
	fwd := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(40002, 123, nil))
	if res := w.Handle(e.now, lanPort, fwd); res.Action != routing.Forward {
		t.Errorf("a LAN host's NTP: %v/%v, want forward (the output chain is the box's)", res.Action, res.Reason)
	}
}
