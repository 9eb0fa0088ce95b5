package nat

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// fragments splits a UDP datagram from A to remote into IP fragments of
// the given payload sizes (multiples of 8 but the last).
func fragments(id uint16, sizes ...int) (frags [][]byte, whole []byte) {
	total := 0
	for _, n := range sizes {
		total += n
	}
	payload := make([]byte, total-8)
	for i := range payload {
		payload[i] = byte(i)
	}
	ip := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: id}.UDPPacket(4000, 4001, payload)
	l4 := ip[20:]
	off := 0
	for i, n := range sizes {
		h := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: id, Proto: frame.ProtoUDP, FragOff: uint16(off / 8), MF: i < len(sizes)-1}
		frags = append(frags, fromLAN(hostA, h.Build(l4[off:off+n])))
		off += n
	}
	return frags, ip
}

func TestFragments(t *testing.T) {
	e := newEnv(t, nil)
	// Give A's port 4000 to B first so A's fragments get a new port.
	e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote)}.UDPPacket(4000, 4001, nil)), wanPort)
	frags, whole := fragments(77, 24, 16, 13)
	first, f := e.forward(LAN, frags[0], wanPort)
	natPort := f.UDP.SrcPort
	if natPort == 4000 || f.IPv4.SrcAddr() != wanAddr {
		t.Fatalf("first fragment: %v:%d", f.IPv4.SrcAddr(), natPort)
	}
	// Reassemble what the router sends and check the UDP checksum over it.
	outs := [][]byte{first}
	for _, fr := range frags[1:] {
		b, g := e.forward(LAN, fr, wanPort)
		if g.IPv4.SrcAddr() != wanAddr || g.IPv4.DstAddr() != remote || g.IPv4.TTL != 63 {
			t.Errorf("later fragment: %v > %v ttl %d", g.IPv4.SrcAddr(), g.IPv4.DstAddr(), g.IPv4.TTL)
		}
		outs = append(outs, append([]byte(nil), b...))
	}
	var l4 []byte
	for _, o := range outs {
		l4 = append(l4, o[14+20:14+int(binary.BigEndian.Uint16(o[16:]))]...)
	}
	if len(l4) != len(whole)-20 {
		t.Fatalf("reassembled %d bytes, want %d", len(l4), len(whole)-20)
	}
	if s := frametest.Sum(frametest.Pseudo4(a4(wanAddr), a4(remote), frame.ProtoUDP, len(l4)), l4); s != 0xffff {
		t.Errorf("reassembled datagram's UDP checksum wrong (sum %#x)", s)
	}
	if binary.BigEndian.Uint16(l4[0:]) != natPort {
		t.Errorf("reassembled source port %d, want %d", binary.BigEndian.Uint16(l4[0:]), natPort)
	}
	// Overlap: a fragment repeating units is dropped.
	frags2, _ := fragments(78, 24, 16, 13)
	e.forward(LAN, frags2[0], wanPort)
	if res := e.send(LAN, frags2[0][:0:0]); res.Action != routing.Drop {
		t.Errorf("empty frame: %v", res.Action)
	}
	e.forward(LAN, frags2[1], wanPort)
	for i, fr := range frags2[:2] {
		if res := e.send(LAN, fr); res.Action != routing.Drop || res.Reason != ReasonFragment {
			t.Errorf("fragment %d again: %v/%v, want drop fragment", i, res.Action, res.Reason)
		}
	}
	// A later fragment without its first is dropped.
	frags3, _ := fragments(79, 24, 16, 13)
	if res := e.send(LAN, frags3[2]); res.Action != routing.Drop || res.Reason != ReasonFragment {
		t.Errorf("fragment without first: %v/%v, want drop fragment", res.Action, res.Reason)
	}
}

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

func TestARP(t *testing.T) {
	e := newEnv(t, nil)
	host := mac(0xc1)
	ip := ap("192.168.1.30")
	res := e.send(LAN, frametest.ARPFrame(bcast, host, 1, host, a4(ip), [6]byte{}, a4(lanAddr)))
	if res.Action != routing.Reply || res.Port != lanPort {
		t.Fatalf("ARP request: %v", res.Action)
	}
	want := frametest.ARPFrame(host, lanMAC, 2, lanMAC, a4(lanAddr), host, a4(ip))
	if string(res.Frame) != string(want) {
		t.Errorf("ARP reply\n% x\nwant\n% x", res.Frame, want)
	}
	if n, ok := e.r.neigh.get(LAN, be32(a4(ip))); !ok || n.mac != host {
		t.Errorf("requester not learned: %+v %v", n, ok)
	}
	for _, tc := range []struct {
		name string
		side Side
		b    []byte
		want routing.Action
		why  Reason
	}{
		{"request for another host", LAN, frametest.ARPFrame(bcast, host, 1, host, a4(ip), [6]byte{}, a4(ipA)), routing.Consumed, 0},
		{"unsolicited reply", LAN, frametest.ARPFrame(lanMAC, mac(0xd1), 2, mac(0xd1), a4(ap("192.168.1.40")), lanMAC, a4(lanAddr)), routing.Consumed, 0},
		{"sender off subnet", LAN, frametest.ARPFrame(bcast, host, 1, host, a4(ap("10.0.0.1")), [6]byte{}, a4(lanAddr)), routing.Drop, ReasonARP},
		{"address conflict", LAN, frametest.ARPFrame(bcast, host, 1, host, a4(lanAddr), [6]byte{}, a4(lanAddr)), routing.Drop, ReasonARP},
		{"unicast to another MAC", LAN, frametest.ARPFrame(host, mac(0xd2), 2, mac(0xd2), a4(ap("192.168.1.41")), host, a4(ip)), routing.Drop, ReasonNotForUs},
		{"wan request", WAN, frametest.ARPFrame(bcast, gwMAC, 1, gwMAC, a4(gwAddr), [6]byte{}, a4(wanAddr)), routing.Reply, 0},
	} {
		if res := e.send(tc.side, tc.b); res.Action != tc.want || res.Reason != tc.why {
			t.Errorf("%s: %v/%v, want %v/%v", tc.name, res.Action, res.Reason, tc.want, tc.why)
		}
	}
	if _, ok := e.r.neigh.get(LAN, be32(a4(ap("192.168.1.40")))); ok {
		t.Errorf("unsolicited reply created an entry")
	}
}

func TestPendingQueue(t *testing.T) {
	r, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	lan, wan := r.NewWorker(nil), r.NewWorker(nil)
	now := t0
	pkt := func(sp uint16) []byte {
		return fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(sp, 53, []byte("q")))
	}
	// The gateway is unknown: frames wait, one ARP request goes out.
	for i := range 3 {
		if res := lan.Handle(now, lanPort, pkt(uint16(1000+i))); res.Action != routing.Queued {
			t.Fatalf("frame %d: %v/%v, want queued", i, res.Action, res.Reason)
		}
	}
	outs := drain(lan)
	if len(outs) != 1 || outs[0].port != wanPort {
		t.Fatalf("outbox %v, want one ARP request on the WAN", outs)
	}
	want := frametest.ARPFrame(bcast, wanMAC, 1, wanMAC, a4(wanAddr), [6]byte{}, a4(gwAddr))
	if string(outs[0].b) != string(want) {
		t.Errorf("ARP request\n% x\nwant\n% x", outs[0].b, want)
	}
	if !lan.Waiting() {
		t.Errorf("Waiting false with queued frames")
	}
	// Retries: one per second.
	lan.Tick(now + sec/2)
	if n := len(drain(lan)); n != 0 {
		t.Errorf("%d ARP requests after 0.5 s, want 0", n)
	}
	lan.Tick(now + sec)
	if n := len(drain(lan)); n != 1 {
		t.Errorf("%d ARP requests after 1 s, want 1", n)
	}
	// The reply arrives on the WAN worker; the LAN worker's Tick releases
	// the frames, addressed to the gateway.
	if res := wan.Handle(now+sec+1, wanPort, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr))); res.Action != routing.Consumed {
		t.Fatalf("ARP reply: %v", res.Action)
	}
	lan.Tick(now + sec + 2)
	outs = drain(lan)
	if len(outs) != 3 {
		t.Fatalf("%d frames released, want 3", len(outs))
	}
	for i, o := range outs {
		_, f := checkFrame(t, o.b)
		if o.port != wanPort || f.Dst != gwMAC || f.Src != wanMAC || f.IPv4.SrcAddr() != wanAddr || f.UDP.SrcPort != uint16(1000+i) {
			t.Errorf("released frame %d: port %d %v>%v %v:%d", i, o.port, f.Src, f.Dst, f.IPv4.SrcAddr(), f.UDP.SrcPort)
		}
	}
	if lan.Waiting() {
		t.Errorf("still waiting")
	}

	// A LAN host that never answers: frames are dropped after 3 s.
	lost := ap("192.168.1.77")
	res := wan.Handle(now, wanPort, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(1, 5000, nil)))
	_ = res
	r2, _ := New(func() Config { c := testConfig(); c.Forwards[1].To = addrPort(lost, 6000); return c }())
	w2 := r2.NewWorker(nil)
	w2.Handle(now, wanPort, frametest.ARPFrame(bcast, gwMAC, 1, gwMAC, a4(gwAddr), [6]byte{}, a4(wanAddr)))
	if res := w2.Handle(now, wanPort, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(1, 5000, nil))); res.Action != routing.Queued {
		t.Fatalf("forward to unresolved host: %v", res.Action)
	}
	requests := len(drain(w2))
	for i := int64(1); i <= 4; i++ {
		w2.Tick(now + i*sec)
		requests += len(drain(w2))
	}
	if requests != 3 {
		t.Errorf("%d ARP requests, want 3 (one per second)", requests)
	}
	if w2.Waiting() || w2.Stats().Drops[ReasonNeighFailed] != 1 {
		t.Errorf("waiting %v, neigh_failed %d; want the frame dropped", w2.Waiting(), w2.Stats().Drops[ReasonNeighFailed])
	}
	// The queue is bounded.
	cfg := testConfig()
	cfg.PendingFrames = 2
	r3, _ := New(cfg)
	w3 := r3.NewWorker(nil)
	var got []routing.Action
	for i := range 3 {
		got = append(got, w3.Handle(now, lanPort, pkt(uint16(2000+i))).Action)
	}
	if got[0] != routing.Queued || got[1] != routing.Queued || got[2] != routing.Drop || w3.Stats().Drops[ReasonQueueFull] != 1 {
		t.Errorf("queue of 2: %v, queue_full %d", got, w3.Stats().Drops[ReasonQueueFull])
	}
}

type outFrameT struct {
	port int
	b    []byte
}

func drain(w *Worker) []outFrameT {
	var o []outFrameT
	for p, b, ok := w.Output(); ok; p, b, ok = w.Output() {
		o = append(o, outFrameT{p, append([]byte(nil), b...)})
	}
	return o
}

func TestStaleNeighbourProbe(t *testing.T) {
	e := newEnv(t, nil)
	b := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	e.now += 31 * sec // past NeighReachable
	e.forward(LAN, b, wanPort)
	outs := drain(e.lan)
	want := frametest.ARPFrame(gwMAC, wanMAC, 1, wanMAC, a4(wanAddr), [6]byte{}, a4(gwAddr))
	if len(outs) != 1 || string(outs[0].b) != string(want) {
		t.Fatalf("stale neighbour: outbox %v, want a unicast probe", outs)
	}
	// Probes unanswered 3 times: the entry is given up, frames queue.
	for range 3 {
		e.now += sec
		e.send(LAN, b)
		drain(e.lan)
	}
	e.now += sec
	if res := e.send(LAN, b); res.Action != routing.Queued {
		t.Errorf("after unanswered probes: %v, want queued", res.Action)
	}
}

func TestEviction(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 16 })
	udpOut := func(sp uint16) Result {
		return e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(sp, 9, nil)))
	}
	reply := func(sp uint16) {
		e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, sp, nil)), lanPort)
	}
	// 12 streams (assured: a reply, and traffic streamAfter later), 4
	// unreplied.
	for i := range 16 {
		if res := udpOut(uint16(100 + i)); res.Action != routing.Forward {
			t.Fatalf("conn %d: %v/%v", i, res.Action, res.Reason)
		}
		if i < 12 {
			reply(uint16(100 + i))
		}
	}
	e.now += streamAfter * sec
	for i := range 12 {
		reply(uint16(100 + i))
	}
	// Four more, a second later, evict the four unreplied ones.
	e.now += sec
	for i := range 4 {
		if res := udpOut(uint16(200 + i)); res.Action != routing.Forward {
			t.Fatalf("new conn %d in full table: %v/%v", i, res.Action, res.Reason)
		}
	}
	for i := range 16 {
		c, _ := e.r.Conns(Filter{Port: uint16(100 + i)}, 0, 0, e.now, nil)
		if alive := len(c) == 1; alive != (i < 12) {
			t.Errorf("conn %d alive %v, want %v", 100+i, alive, i < 12)
		}
	}
	// The new ones are unreplied: they go next. Make them streams: now no
	// entry is evictable and new connections are refused.
	for i := range 4 {
		reply(uint16(200 + i))
	}
	e.now += streamAfter * sec
	for i := range 4 {
		reply(uint16(200 + i))
	}
	if res := udpOut(300); res.Action != routing.Drop || res.Reason != ReasonTableFull {
		t.Errorf("full of assured: %v/%v, want drop table_full", res.Action, res.Reason)
	}
	if n := e.r.CountConns(Filter{}); n != 16 {
		t.Errorf("%d connections, want 16", n)
	}
	st := e.r.Stats()
	if st.Evicted != 4 || st.InsertFailed == 0 {
		t.Errorf("evicted %d insert failed %d, want 4 and >0", st.Evicted, st.InsertFailed)
	}
	// TCP in TIME_WAIT is evictable (after unreplied).
	e2 := newEnv(t, func(c *Config) { c.MaxConns = 16 })
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	in := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	for i := range 16 {
		sp := uint16(100 + i)
		e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Flags: frame.TCPSyn}, nil)), wanPort)
		e2.forward(WAN, fromWAN(in.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: sp, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
		e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Flags: frame.TCPAck}, nil)), wanPort)
		if i == 5 { // at the responder's RCV.NXT (the SYN's sequence number + 1): it ends the connection
			e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Seq: 1, Flags: frame.TCPRst}, nil)), wanPort)
		}
	}
	if res := e2.send(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: 999, DstPort: 80, Flags: frame.TCPSyn}, nil))); res.Action != routing.Forward {
		t.Errorf("SYN with a closed entry to evict: %v/%v", res.Action, res.Reason)
	}
	if c, _ := e2.r.Conns(Filter{Port: 105}, 0, 0, e2.now, nil); len(c) != 0 {
		t.Errorf("closed connection not evicted")
	}
	if n := e2.r.CountConns(Filter{HasState: true, State: StateEstablished}); n != 15 {
		t.Errorf("%d established, want 15 (never evicted)", n)
	}
}

func TestExpirySweep(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepBatch = 2000 })
	for i := range 50 {
		e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(uint16(3000+i), 9, nil)), wanPort)
	}
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil)), lanPort)
	if n := e.r.maps.active(frame.ProtoUDP); n != 50 {
		t.Fatalf("%d mappings, want 50", n)
	}
	// Port 3000 becomes a stream (traffic after its reply): the long timeout.
	e.now += streamAfter * sec
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil)), lanPort)
	e.now += (29 - streamAfter) * sec
	e.lan.Tick(e.now)
	if n := e.r.CountConns(Filter{}); n != 50 {
		t.Errorf("after 29 s: %d connections, want 50", n)
	}
	e.now += 2 * sec
	e.lan.Tick(e.now)
	if n := e.r.CountConns(Filter{}); n != 1 {
		t.Errorf("after 31 s: %d connections, want 1 (the stream)", n)
	}
	if n := e.r.maps.active(frame.ProtoUDP); n != 1 {
		t.Errorf("after sweep: %d mappings, want 1", n)
	}
	if st := e.r.Stats(); st.Expired != 49 {
		t.Errorf("expired %d, want 49", st.Expired)
	}
	// An expired connection is not used even before the sweep reaches it.
	e.now += 180 * sec
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil))); res.Action != routing.ToHost {
		t.Errorf("reply to an expired connection: %v, want to_host", res.Action)
	}
}

func TestListAndDelete(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 30 {
		src, m := ipA, hostA
		if i%3 == 0 {
			src, m = ipB, hostB
		}
		e.forward(LAN, fromLAN(m, frametest.IPv4{Src: a4(src), Dst: a4(remote)}.UDPPacket(uint16(10000+i), 53, nil)), wanPort)
	}
	var all []Conn
	cursor, pages := 0, 0
	for {
		var page []Conn
		page, cursor = e.r.Conns(Filter{}, cursor, 7, e.now, nil)
		all = append(all, page...)
		pages++
		if cursor == 0 {
			break
		}
	}
	if len(all) != 30 || pages != 5 {
		t.Errorf("paged %d connections in %d pages, want 30 in 5", len(all), pages)
	}
	seen := map[ConnID]bool{}
	for _, c := range all {
		if seen[c.ID] {
			t.Errorf("connection %v listed twice", c.ID)
		}
		seen[c.ID] = true
	}
	if n := e.r.CountConns(Filter{Addr: ipB}); n != 10 {
		t.Errorf("%d connections of B, want 10", n)
	}
	if n := e.r.CountConns(Filter{Port: 10004, Proto: frame.ProtoUDP}); n != 1 {
		t.Errorf("%d connections on port 10004, want 1", n)
	}
	if n := e.r.DeleteConns(Filter{Addr: ipB}); n != 10 {
		t.Errorf("deleted %d, want 10", n)
	}
	c := e.conn(Filter{Port: 10001})
	if !e.r.DeleteConn(c.ID) || e.r.DeleteConn(c.ID) {
		t.Errorf("DeleteConn: want true then false")
	}
	if n := e.r.CountConns(Filter{}); n != 19 {
		t.Errorf("%d left, want 19", n)
	}
	if n := e.r.maps.active(frame.ProtoUDP); n != 19 {
		t.Errorf("%d mappings left, want 19", n)
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

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"bad mac", func(c *Config) { c.LAN.MAC = c.LAN.MAC[:5] }, "lan: MAC"},
		{"multicast mac", func(c *Config) { c.WAN.MAC = hw([6]byte{1, 0, 0, 0, 0, 1}) }, "not a unicast"},
		{"same ids", func(c *Config) { c.WAN.ID = lanPort }, "same port id"},
		{"overlap", func(c *Config) { c.WAN.Addr = netip.MustParsePrefix("192.168.1.200/16") }, "overlap"},
		{"gateway off subnet", func(c *Config) { c.Gateway = ap("10.0.0.1") }, "gateway"},
		{"network address", func(c *Config) { c.LAN.Addr = netip.MustParsePrefix("192.168.1.0/24") }, "not a host address"},
		{"range", func(c *Config) { c.PortMin, c.PortMax = 3000, 2000 }, "port range"},
		{"forward target", func(c *Config) { c.Forwards[0].To = addrPort(remote, 80) }, "lan subnet"},
		{"forward overlap", func(c *Config) {
			c.Forwards = append(c.Forwards, PortForward{Proto: frame.ProtoUDP, Port: 5010, To: addrPort(ipA, 1)})
		}, "overlap"},
		{"forward proto", func(c *Config) { c.Forwards[0].Proto = 1 }, "protocol"},
		{"mtu", func(c *Config) { c.LAN.MTU = 100 }, "MTU"},
		{"mss", func(c *Config) { c.MSSClamp = 20 }, "mss"},
	} {
		cfg := testConfig()
		tc.mod(&cfg)
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if verr := cfg.Validate(); verr == nil || err == nil || verr.Error() != err.Error() {
			t.Errorf("%s: Validate = %v, want New's error %v", tc.name, verr, err)
		}
	}
	cfg := testConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate(testConfig()) = %v", err)
	}
	cfg.WAN.Addr, cfg.Gateway = netip.Prefix{}, netip.Addr{}
	if _, err := New(cfg); err != nil {
		t.Errorf("unset WAN address (DHCP): %v", err)
	}
}

func TestUpdate(t *testing.T) {
	e := newEnv(t, nil)
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
	cfg := e.r.Config()
	cfg.Forwards = nil
	if err := e.r.Update(cfg); err != nil {
		t.Fatal(err)
	}
	if n := e.r.CountConns(Filter{}); n != 1 {
		t.Errorf("update without address change dropped connections: %d", n)
	}
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 8080, Flags: frame.TCPSyn}, nil))); res.Action != routing.ToHost {
		t.Errorf("removed forward still used: %v", res.Action)
	}
	if err := e.r.SetWAN(netip.MustParsePrefix("198.18.0.2/24"), ap("198.18.0.1")); err != nil {
		t.Fatal(err)
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("WAN address change kept %d connections", n)
	}
	cfg = e.r.Config()
	cfg.MaxConns = 5000
	if err := e.r.Update(cfg); err == nil {
		t.Errorf("changing MaxConns: no error")
	}
}

// TestAllocPicksAhead checks the free-list allocation that picks each
// slot one allocation ahead: every slot is handed out exactly once until
// the table is full, a released slot is handed out again, and the
// count follows.
func TestAllocPicksAhead(t *testing.T) {
	const n = 64
	tb := newTable(n, 1, nil)
	seen := map[uint32]bool{}
	for i := range n {
		idx, ok := tb.alloc()
		if !ok {
			t.Fatalf("alloc %d of %d failed", i, n)
		}
		if seen[idx] || idx >= n {
			t.Fatalf("alloc %d: slot %d handed out twice or out of range", i, idx)
		}
		seen[idx] = true
	}
	if idx, ok := tb.alloc(); ok {
		t.Fatalf("alloc on a full table gave slot %d", idx)
	}
	tb.release(5)
	tb.release(9)
	got := map[uint32]bool{}
	for range 2 {
		idx, ok := tb.alloc()
		if !ok {
			t.Fatal("alloc after a release failed")
		}
		got[idx] = true
	}
	if !got[5] || !got[9] {
		t.Errorf("after releasing 5 and 9, alloc gave %v", got)
	}
	if _, ok := tb.alloc(); ok {
		t.Error("alloc past the released slots succeeded")
	}
	if c := tb.count.Load(); c != n {
		t.Errorf("count %d, want %d", c, n)
	}
}
