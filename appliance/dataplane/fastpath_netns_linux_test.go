package dataplane

import (
	"math/rand/v2"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestFastPathBridgeDifferential bridges the same frames between two
// hosts with and without the fast path: under no rules (L2-only pairs),
// under address rules (microflows), and between VLAN-aware ports (the
// fast path pops and pushes tags).
func TestFastPathBridgeDifferential(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		vlan  bool
		modes []FastPathMode
	}{
		{"no rules", "", false, []FastPathMode{FastPathTCX, FastPathXDP}},
		{"address rules", "ip saddr 10.77.0.0/16 drop\nudp dport 7000 counter accept\nudp dport 9999 counter drop\n", false, []FastPathMode{FastPathTCX}},
		{"vlan-aware", "", true, []FastPathMode{FastPathTCX}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := bridgeRun(t, FastPathOff, tc.rules, tc.vlan)
			on := map[FastPathMode]fpRun{}
			for _, m := range tc.modes {
				on[m] = bridgeRun(t, m, tc.rules, tc.vlan)
			}
			compareRuns(t, off, on)
		})
	}
}

var (
	fpHostA = [6]byte{0x02, 0xfa, 0, 0, 0, 0xa}
	fpHostB = [6]byte{0x02, 0xfa, 0, 0, 0, 0xb}
)

// bridgeFrames is the traffic of the bridge test from A (behind p1) to B
// (behind p2): flows of UDP, TCP, ICMP and IPv6, each frame with its own
// payload, and among them frames the slow path must see or drop.
func bridgeFrames(vlan bool) (warm, main [][]byte) {
	r := rand.New(rand.NewPCG(7, 7))
	v4 := frametest.IPv4{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, TTL: 64}
	v6 := frametest.IPv6{Src: [16]byte{0xfd, 15: 1}, Dst: [16]byte{0xfd, 15: 2}, HopLimit: 64}
	var tags [][]frametest.Tag
	tags = append(tags, nil)
	if vlan {
		tags = append(tags, []frametest.Tag{{TPID: frame.EtherTypeVLAN, TCI: 20}}, []frametest.Tag{{TPID: frame.EtherTypeVLAN, TCI: 0x6000 | 20}})
	} else {
		tags = append(tags, []frametest.Tag{{TPID: frame.EtherTypeVLAN, TCI: 5}})
	}
	payload := func() []byte {
		p := make([]byte, r.IntN(300))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	flows := func(tag []frametest.Tag) [][]byte {
		mk := func(et uint16, p []byte) []byte {
			return frametest.Pad(frametest.Frame(fpHostB, fpHostA, et, p, tag...))
		}
		return [][]byte{
			mk(frame.EtherTypeIPv4, v4.UDPPacket(5000, 7000, payload())),
			mk(frame.EtherTypeIPv4, v4.UDPPacket(5001, 7001, payload())),
			mk(frame.EtherTypeIPv4, v4.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 80, Seq: r.Uint32(), Ack: 1, Flags: frame.TCPAck | frame.TCPPsh}, payload())),
			mk(frame.EtherTypeIPv4, v4.ICMPPacket(frame.ICMPEchoRequest, 0, 0x00420001, payload())),
			mk(frame.EtherTypeIPv6, v6.UDPPacket(5000, 7000, payload())),
		}
	}
	for _, tag := range tags {
		warm = append(warm, flows(tag)...)
	}
	for range 40 {
		for _, tag := range tags {
			main = append(main, flows(tag)...)
		}
	}
	// Frames the slow path drops or must see.
	bad := frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.UDPPacket(5000, 7000, payload())))
	bad[14+2], bad[14+3] = 0x05, 0xdc // total length past the frame: dropped as malformed
	frag := v4
	frag.MF = true
	opts := v4
	opts.Opts = []byte{1, 1, 1, 0}
	// Over p2's MTU of 1400: dropped as oversize.
	oversize := frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.UDPPacket(5000, 7000, make([]byte, 1420)))
	main = append(main, bad, oversize,
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, frag.UDPPacket(5000, 7000, make([]byte, 32)))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, opts.UDPPacket(5000, 7000, payload()))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.UDPPacket(5000, 9999, payload()))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, frametest.IPv4{Src: [4]byte{10, 77, 0, 1}, Dst: v4.Dst}.UDPPacket(5000, 7000, nil))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 80, Flags: frame.TCPSyn}, nil))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeARP, frametest.ARP(2, fpHostA, v4.Src, fpHostB, v4.Dst))),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.UDPPacket(5000, 7000, nil), frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 0xfff})),
		frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, v4.UDPPacket(5000, 7000, nil),
			frametest.Tag{TPID: frame.EtherTypeQinQ, TCI: 5}, frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 6})),
	)
	r.Shuffle(len(main), func(i, j int) { main[i], main[j] = main[j], main[i] })
	return warm, main
}

// bridgeRun bridges bridgeFrames from h1 to h2 through an engine with
// fast path mode.
func bridgeRun(t *testing.T, mode FastPathMode, ruleText string, vlan bool) fpRun {
	t.Helper()
	tp := quietTopo(t)
	// Loop probes carry each engine's random nonce and come at their own
	// times: the differential runs go without them.
	cfg := &Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2", MTU: 1400}}, FastPath: mode, Bridge: Bridge{NoLoopProtect: true}}
	if ruleText != "" {
		cfg.Rules = mustRules(t, ruleText)
	}
	if vlan {
		cfg.Ports[0].VLANs = &VLANs{Native: 10, Allowed: []uint16{20}}
		cfg.Ports[1].VLANs = &VLANs{Allowed: []uint16{10, 20}}
	}
	e := tp.engine(cfg)
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	// B announces itself in every VLAN it talks in.
	ip := frametest.IPv4{Src: [4]byte{10, 0, 0, 2}, Dst: [4]byte{10, 0, 0, 1}}
	hello := func(tags ...frametest.Tag) []byte {
		return frametest.Pad(frametest.Frame(fpHostA, fpHostB, frame.EtherTypeIPv4, ip.UDPPacket(7000, 5000, nil), tags...))
	}
	if vlan {
		h2.Send(t, hello(frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 10}), hello(frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 20}))
	} else {
		h2.Send(t, hello(), hello(frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 5}))
	}
	h1.Wait(200*time.Millisecond, 2*time.Second)
	warm, main := bridgeFrames(vlan)
	h1.Send(t, warm...)
	want := 2 // pairs without rules
	if ruleText != "" {
		want = 5
	}
	if vlan {
		want = 2
	}
	waitFast(t, e, want)
	h1.Send(t, main...)
	h1.Send(t, blast(rand.New(rand.NewPCG(8, 8)), warm, 300)...)
	h2.Wait(300*time.Millisecond, 5*time.Second)
	return collect(t, e, h1, h2, time.Now())
}

// bridgeStream is n UDP frames from A to B to dport, with payloads of
// their own.
func bridgeStream(r *rand.Rand, n int, dport uint16) [][]byte {
	ip := frametest.IPv4{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}}
	out := make([][]byte, n)
	for i := range out {
		p := make([]byte, 20+r.IntN(100))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		out[i] = frametest.Pad(frametest.Frame(fpHostB, fpHostA, frame.EtherTypeIPv4, ip.UDPPacket(5000, dport, p)))
	}
	return out
}

// countUDPTo counts the UDP frames among frames to dport.
func countUDPTo(frames [][]byte, dport uint16) int {
	n := 0
	for _, b := range frames {
		var f frame.Frame
		if frame.Parse(b, &f) == nil && f.Proto == frame.ProtoUDP && f.UDP.DstPort == dport {
			n++
		}
	}
	return n
}

// TestFastPathRuleSwap: a rule change that changes a flow's verdict takes
// it out of the kernel before Apply returns, and the rules' counters
// count every frame, whichever path decided it.
func TestFastPathRuleSwap(t *testing.T) {
	tp := quietTopo(t)
	cfg := &Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}}}
	e := tp.engine(cfg)
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	r := rand.New(rand.NewPCG(3, 3))
	h2.Send(t, frametest.Pad(frametest.Frame(fpHostA, fpHostB, frame.EtherTypeARP, frametest.ARP(2, fpHostB, [4]byte{10, 0, 0, 2}, fpHostA, [4]byte{10, 0, 0, 1}))))
	h1.Wait(100*time.Millisecond, time.Second)
	h1.Send(t, bridgeStream(r, 5, 7000)...)
	waitFast(t, e, 1)
	h1.Send(t, bridgeStream(r, 100, 7000)...)
	if got := countUDPTo(h2.Wait(200*time.Millisecond, 3*time.Second), 7000); got != 105 {
		t.Fatalf("%d of 105 frames arrived before the rule", got)
	}
	if fs := e.Snapshot().FastPath; fs.Packets < 90 {
		t.Fatalf("the fast path forwarded %d frames, want most of 105", fs.Packets)
	}
	h2.Reset()
	cfg2 := *cfg
	cfg2.Rules = mustRules(t, "udp dport 7000 counter drop\nudp dport 7001 counter accept")
	if err := e.Apply(&cfg2); err != nil {
		t.Fatal(err)
	}
	h1.Send(t, bridgeStream(r, 50, 7000)...)
	h1.Send(t, bridgeStream(r, 50, 7001)...)
	got := h2.Wait(200*time.Millisecond, 3*time.Second)
	if n := countUDPTo(got, 7000); n != 0 {
		t.Errorf("%d frames of the dropped flow arrived after the rule's Apply returned", n)
	}
	if n := countUDPTo(got, 7001); n != 50 {
		t.Errorf("%d of 50 frames of the accepted flow arrived", n)
	}
	e.SyncFastPath() // as the API does before it lists counters
	_, cs := e.Rules().Counters()
	if len(cs) != 2 || cs[0].Packets != 50 || cs[1].Packets != 50 {
		t.Errorf("rule counters %+v, want 50 dropped and 50 accepted", cs)
	}
	if fs := e.Snapshot().FastPath; fs.Microflows == 0 {
		t.Errorf("no microflow for the accepted flow: %+v", fs)
	}
}

// TestFastPathStationMoves: when B shows up on another port, the pair to
// it leaves the kernel: A's next frames go to B's new port.
func TestFastPathStationMoves(t *testing.T) {
	tp := newTopo(t, 3)
	for _, h := range tp.hosts {
		h.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.eth0.disable_ipv6=1")
	}
	e := tp.engine(&Config{Ports: []Port{{Interface: "p1"}, {Interface: "p2"}, {Interface: "p3"}}})
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	h3 := tp.hosts[2].OpenPackets(t, "eth0", true)
	r := rand.New(rand.NewPCG(4, 4))
	hello := frametest.Pad(frametest.Frame(fpHostA, fpHostB, frame.EtherTypeARP, frametest.ARP(2, fpHostB, [4]byte{10, 0, 0, 2}, fpHostA, [4]byte{10, 0, 0, 1})))
	h2.Send(t, hello)
	h1.Wait(100*time.Millisecond, time.Second)
	h1.Send(t, bridgeStream(r, 5, 7000)...)
	waitFast(t, e, 1)
	h1.Send(t, bridgeStream(r, 50, 7000)...)
	h2.Wait(200*time.Millisecond, 3*time.Second)
	h3.Send(t, hello) // B moved to p3
	h1.Wait(100*time.Millisecond, time.Second)
	h2.Reset()
	h3.Reset()
	h1.Send(t, bridgeStream(r, 50, 7000)...)
	if n := countUDPTo(h3.Wait(200*time.Millisecond, 3*time.Second), 7000); n != 50 {
		t.Errorf("%d of 50 frames reached B on its new port", n)
	}
	if n := countUDPTo(h2.Frames(), 7000); n != 0 {
		t.Errorf("%d frames still went to B's old port", n)
	}
}
