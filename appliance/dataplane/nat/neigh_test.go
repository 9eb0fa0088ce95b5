package nat

import (
	"math/rand/v2"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

var spoofMAC = mac(0x66)

// gratuitous is a gratuitous ARP (op 2, or 1) from mac claiming ip.
func gratuitous(op uint16, m [6]byte, ip [4]byte, dst [6]byte) []byte {
	return frametest.ARPFrame(dst, m, op, m, ip, [6]byte{}, ip)
}

// TestARPSpoofGateway: a host on the WAN segment that claims the
// gateway's address (gratuitous ARP, unsolicited replies, requests with
// the gateway as sender) cannot divert its traffic while the gateway
// answers the router's probes; each claim is counted and makes the
// router probe the gateway.
func TestARPSpoofGateway(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	probes := 0
	for i := range 200 {
		var b []byte
		switch i % 3 {
		case 0:
			b = gratuitous(2, spoofMAC, a4(gwAddr), bcast)
		case 1:
			b = frametest.ARPFrame(wanMAC, spoofMAC, 2, spoofMAC, a4(gwAddr), wanMAC, a4(wanAddr)) // unsolicited reply
		case 2:
			b = frametest.ARPFrame(bcast, spoofMAC, 1, spoofMAC, a4(gwAddr), [6]byte{}, a4(wanAddr))
		}
		e.send(WAN, b)
		for _, o := range drain(e.wan) {
			// The router probes the gateway's MAC; the gateway answers.
			if string(o.b[0:6]) == string(gwMAC[:]) {
				probes++
				e.send(WAN, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)))
			}
		}
		_, f := e.forward(LAN, out, wanPort)
		if f.Dst != gwMAC {
			t.Fatalf("after %d spoofed ARPs the router sends to %v, want the gateway %v", i+1, f.Dst, gwMAC)
		}
		e.now += sec / 10
	}
	if probes == 0 || probes > 25 {
		t.Errorf("%d probes of the gateway for 200 claims over 20 s, want some, at most one a second", probes)
	}
	if d := e.r.Stats().Drops[ReasonARPConflict]; d < 100 {
		t.Errorf("%d ARP conflicts counted, want the claims", d)
	}
}

// TestARPNeighbourReplaced: a neighbour that stopped answering is
// replaced by the MAC that now claims its address, once the probes went
// unanswered.
func TestARPNeighbourReplaced(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	newGW := mac(0x77)
	var f frame.Frame
	for range 10 {
		e.send(WAN, gratuitous(2, newGW, a4(gwAddr), bcast))
		drain(e.wan) // probes of the old gateway, unanswered
		e.now += sec
		_, f = e.forward(LAN, out, wanPort)
	}
	if f.Dst != newGW {
		t.Errorf("after 10 s of unanswered probes the router sends to %v, want the new gateway %v", f.Dst, newGW)
	}
}

// TestARPSprayKeepsNeighbours: a flood of ARP requests from every address
// of both subnets cannot evict the gateway or the LAN hosts the router
// sends to.
func TestARPSprayKeepsNeighbours(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxNeighbours = 16 })
	rng := rand.New(rand.NewPCG(5, 6))
	toA := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(2, 1, nil))
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
	e.forward(WAN, toA, lanPort)
	e.now += sec // the spray's entries are newer than host A's
	for i := range 10000 {
		lan := i%2 == 0
		m := mac(byte(rng.IntN(200)))
		m[4] = byte(i)
		if lan {
			ip := [4]byte{192, 168, 1, byte(30 + rng.IntN(200))}
			e.send(LAN, frametest.ARPFrame(bcast, m, 1, m, ip, [6]byte{}, a4(lanAddr)))
		} else {
			ip := [4]byte{203, 0, 113, byte(3 + rng.IntN(250))}
			e.send(WAN, frametest.ARPFrame(bcast, m, 1, m, ip, [6]byte{}, a4(wanAddr)))
		}
		if i%100 == 0 {
			e.now += sec / 10
			// Host A's connection keeps sending both ways.
			e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
			e.forward(WAN, toA, lanPort)
		}
	}
	if n, ok := e.r.neigh.get(WAN, ip4(gwAddr)); !ok || !n.resolved || n.mac != gwMAC {
		t.Errorf("the gateway's entry after the spray: %+v %v", n, ok)
	}
	if n, ok := e.r.neigh.get(LAN, ip4(ipA)); !ok || !n.resolved || n.mac != hostA {
		t.Errorf("host A's entry after the spray: %+v %v", n, ok)
	}
}

// TestARPSpoofSlowGateway: the gateway answers the router's probes, but
// 2.5 s late (a busy gateway). A claim that keeps coming every 100 ms is
// not taken at the moment the third probe goes out: the last probe gets
// its second to be answered, as for a stale entry, and the late answers
// keep confirming the gateway.
func TestARPSpoofSlowGateway(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	var due []int64 // when the gateway's answers to probes arrive
	for i := range 100 {
		e.send(WAN, gratuitous(2, spoofMAC, a4(gwAddr), bcast))
		for _, o := range drain(e.wan) {
			if string(o.b[0:6]) == string(gwMAC[:]) {
				due = append(due, e.now+25*sec/10)
			}
		}
		for len(due) > 0 && due[0] <= e.now {
			e.send(WAN, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)))
			due = due[1:]
		}
		if _, f := e.forward(LAN, out, wanPort); f.Dst != gwMAC {
			t.Fatalf("after %.1f s of claims with the gateway answering 2.5 s late, the router sends to %v, want the gateway %v",
				float64(i)/10, f.Dst, gwMAC)
		}
		e.now += sec / 10
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
