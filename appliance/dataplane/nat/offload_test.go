package nat

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// TestOffloadable checks which connection directions the fast path may
// take over, and that the translation it gets is the one the router
// writes.
func TestOffloadable(t *testing.T) {
	e := newEnv(t, nil)
	lanT := Tuple{Side: LAN, Src: a4(ipA), Dst: a4(remote), SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	if _, ok := e.r.Offloadable(lanT, e.now); ok {
		t.Fatal("offloadable before the connection exists")
	}
	lanIP := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	wanIP := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	seg := func(ip frametest.IPv4, sp, dp uint16, seq, ack uint32, flags uint8) []byte {
		return ip.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: dp, Seq: seq, Ack: ack, Flags: flags, Window: 1000}, nil)
	}
	_, syn := e.forward(LAN, fromLAN(hostA, seg(lanIP, 40000, 443, 1000, 0, frame.TCPSyn)), wanPort)
	natPort := syn.TCP.SrcPort
	if _, ok := e.r.Offloadable(lanT, e.now); ok {
		t.Error("offloadable in SYN_SENT")
	}
	if e.lan.Offerable() {
		t.Error("the worker calls a new connection's SYN offerable")
	}
	e.forward(WAN, fromWAN(seg(wanIP, 443, natPort, 5000, 1001, frame.TCPSyn|frame.TCPAck)), lanPort)
	if e.wan.Offerable() {
		t.Error("the worker calls the SYN-ACK offerable")
	}
	wanT := Tuple{Side: WAN, Src: a4(remote), Dst: a4(wanAddr), SrcPort: 443, DstPort: natPort, Proto: frame.ProtoTCP}
	if _, ok := e.r.Offloadable(wanT, e.now); ok {
		t.Error("offloadable in SYN_RECV")
	}
	out, of := e.forward(LAN, fromLAN(hostA, seg(lanIP, 40000, 443, 1001, 5001, frame.TCPAck)), wanPort)
	if !e.lan.Offerable() {
		t.Error("the worker does not offer the established connection's ACK")
	}
	o, ok := e.r.Offloadable(lanT, e.now)
	if !ok {
		t.Fatal("established LAN direction not offloadable")
	}
	want := Offload{ID: o.ID, Dir: 0, Src: of.IPv4.Src, Dst: of.IPv4.Dst, SrcPort: of.TCP.SrcPort, DstPort: of.TCP.DstPort,
		Out: WAN, OutPort: wanPort, OutMAC: wanMAC, InMAC: lanMAC, OutMTU: 1500, NextHop: a4(gwAddr),
		NextHopMAC: [6]byte(out[0:6]), Timeout: 432000,
		Reverse: Tuple{Side: WAN, Src: a4(remote), Dst: a4(wanAddr), SrcPort: 443, DstPort: natPort, Proto: frame.ProtoTCP},
		Ack:     5001, Win: 1000} // the client's ACK and window: the fast path tracks on from them
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("LAN direction (-want +got):\n%s", diff)
	}
	if _, ok := e.r.Offloadable(wanT, e.now); !ok {
		t.Error("established WAN direction not offloadable")
	}
	// A stale neighbour: the router probes it first.
	if _, ok := e.r.Offloadable(lanT, e.now+31*sec); ok {
		t.Error("offloadable with a gateway not confirmed for 31 s")
	}

	// What the fast path forwarded shows in the listing, the deadline and
	// the TCP tracking a RST is judged by.
	before := e.conn(Filter{Port: 40000})
	e.now += 100 * sec
	if !e.r.Offloaded(o.ID, 0, OffloadUse{Packets: 70000, Bytes: 70000 * 40, Last: e.now, TCP: true, Ack: 900_000, Win: 2000}) {
		t.Error("Offloaded says the connection is no longer offloadable")
	}
	after := e.conn(Filter{Port: 40000})
	if after.Packets[0] != before.Packets[0]+70000 || after.Bytes[0] != before.Bytes[0]+70000*40 || after.Packets[1] != before.Packets[1] {
		t.Errorf("counters %v/%v after 70000 offloaded packets, before %v/%v", after.Packets, after.Bytes, before.Packets, before.Bytes)
	}
	if after.ExpiresIn != 432000 {
		t.Errorf("expires in %d s after a packet now, want the established timeout 432000", after.ExpiresIn)
	}
	// The server's RST at the client's new RCV.NXT (900000) ends the
	// connection; the one the router last saw (5001) would be blind now.
	if res := e.send(WAN, fromWAN(seg(wanIP, 443, natPort, 5001, 1001, frame.TCPRst))); res.Action != routing.Drop || res.Reason != ReasonRST {
		t.Errorf("RST at the old RCV.NXT: %v/%v, want dropped as out of window", res.Action, res.Reason)
	}
	e.forward(WAN, fromWAN(seg(wanIP, 443, natPort, 900_000, 1001, frame.TCPRst)), lanPort)
	if s := connState(t, e); s != "close" {
		t.Errorf("after the RST at the offloaded RCV.NXT the connection is %s, want close", s)
	}
	if e.r.Offloaded(o.ID, 0, OffloadUse{}) {
		t.Error("a closed connection is still offloadable")
	}
	e.r.DeleteConns(Filter{})
	if e.r.Offloaded(o.ID, 0, OffloadUse{Packets: 1, Last: e.now}) {
		t.Error("a deleted connection is still offloadable")
	}
}

// TestOffloadableUDPAndICMP: UDP once assured, ICMP echo once replied.
func TestOffloadableUDPAndICMP(t *testing.T) {
	e := newEnv(t, nil)
	lanIP := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	wanIP := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	udpT := Tuple{Side: LAN, Src: a4(ipA), Dst: a4(remote), SrcPort: 5353, DstPort: 53, Proto: frame.ProtoUDP}
	e.forward(LAN, fromLAN(hostA, lanIP.UDPPacket(5353, 53, nil)), wanPort)
	e.forward(WAN, fromWAN(wanIP.UDPPacket(53, 5353, nil)), lanPort)
	if _, ok := e.r.Offloadable(udpT, e.now); ok {
		t.Error("a UDP exchange (replied, not a stream) is offloadable")
	}
	e.now += 3 * sec
	e.forward(LAN, fromLAN(hostA, lanIP.UDPPacket(5353, 53, nil)), wanPort)
	if _, ok := e.r.Offloadable(udpT, e.now); !ok {
		t.Error("an assured UDP stream is not offloadable")
	}
	icmpT := Tuple{Side: LAN, Src: a4(ipA), Dst: a4(remote), SrcPort: 77, Proto: frame.ProtoICMP}
	e.forward(LAN, fromLAN(hostA, lanIP.ICMPPacket(frame.ICMPEchoRequest, 0, 77<<16|1, nil)), wanPort)
	if _, ok := e.r.Offloadable(icmpT, e.now); ok {
		t.Error("an unanswered ping is offloadable")
	}
	e.forward(WAN, fromWAN(wanIP.ICMPPacket(frame.ICMPEchoReply, 0, 77<<16|1, nil)), lanPort)
	if _, ok := e.r.Offloadable(icmpT, e.now); !ok {
		t.Error("an answered ping is not offloadable")
	}
	e2 := newEnv(t, func(c *Config) { c.Timeouts.UDPAssured = 5 })
	e2.forward(LAN, fromLAN(hostA, lanIP.UDPPacket(5353, 53, nil)), wanPort)
	e2.forward(WAN, fromWAN(wanIP.UDPPacket(53, 5353, nil)), lanPort)
	e2.now += 3 * sec
	e2.forward(LAN, fromLAN(hostA, lanIP.UDPPacket(5353, 53, nil)), wanPort)
	if _, ok := e2.r.Offloadable(udpT, e2.now); ok {
		t.Errorf("offloadable with a %d s timeout, under MinOffloadTimeout", 5)
	}
}

// TestCountOffloaded: the fast path's frames count as forwarded.
func TestCountOffloaded(t *testing.T) {
	e := newEnv(t, nil)
	before := e.r.Stats()
	e.r.CountOffloaded(10, 640)
	s := e.r.Stats()
	if s.Actions[routing.Forward]-before.Actions[routing.Forward] != 10 || s.ForwardedBytes-before.ForwardedBytes != 640 {
		t.Errorf("forwarded %d frames, %d bytes more; want 10, 640", s.Actions[routing.Forward]-before.Actions[routing.Forward], s.ForwardedBytes-before.ForwardedBytes)
	}
}

// TestNeighbourFreshProbes: a next hop the fast path sends to is probed
// (unicast ARP, by a worker's Tick) once half its reachable time has
// passed, at most once a second; its answer keeps it fresh past the
// reachable time, so that its flows stay in the kernel. One that does not
// answer is probed NeighProbes times and goes stale; its flows leave.
func TestNeighbourFreshProbes(t *testing.T) {
	probe := frametest.ARPFrame(gwMAC, wanMAC, 1, wanMAC, a4(wanAddr), [6]byte{}, a4(gwAddr))
	gw := a4(gwAddr)
	for _, tc := range []struct {
		name      string
		answer    bool
		freshAt40 bool
		maxProbes int
	}{
		{"answered", true, true, 25},
		{"silent", false, false, 3}, // testConfig's NeighProbes
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil) // NeighReachable 30 s; the gateway confirmed at t0
			probes := 0
			for s := 1; s <= 40; s++ {
				e.now = t0 + int64(s)*sec
				fresh := e.r.NeighbourFresh(WAN, gw, gwMAC, e.now, true)
				if s < 30 && !fresh {
					t.Fatalf("%d s after its confirmation the gateway is not fresh", s)
				}
				for range 2 { // two ticks a second: one probe
					e.lan.Tick(e.now)
					for _, o := range drain(e.lan) {
						if string(o.b) != string(probe) {
							t.Fatalf("%d s: the worker sent %x, want the gateway's unicast probe", s, o.b)
						}
						if s <= 15 {
							t.Errorf("a probe %d s after the confirmation, want none before half the reachable time", s)
						}
						probes++
						if tc.answer {
							e.send(WAN, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, gw, wanMAC, a4(wanAddr)))
						}
					}
				}
			}
			if got := e.r.NeighbourFresh(WAN, gw, gwMAC, e.now, false); got != tc.freshAt40 {
				t.Errorf("fresh 40 s after the first confirmation: %v, want %v (%d probes)", got, tc.freshAt40, probes)
			}
			if probes == 0 || probes > tc.maxProbes {
				t.Errorf("%d probes in 40 s, want 1 to %d", probes, tc.maxProbes)
			}
		})
	}
}

// TestPrefetchOffloaded checks that PrefetchOffloaded is only a hint:
// any connection id, in the table or past it, is taken without a panic
// and changes nothing Offloaded then reports.
func TestPrefetchOffloaded(t *testing.T) {
	const max = 1024
	r, keys := filledRouter(t, max, 4)
	id := connIDOf(t, r, keys[0])
	for _, p := range []ConnID{id, id + 2, ConnID(uint64(max) << 32), ConnID(^uint64(0))} {
		r.PrefetchOffloaded(p)
	}
	list := func() []Conn { c, _ := r.Conns(Filter{}, 0, 10, t0, nil); return c }
	before := list()
	if !r.Offloaded(id, 0, OffloadUse{}) {
		t.Error("the connection is not offloadable after the prefetches")
	}
	if diff := cmp.Diff(before, list(), cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
		t.Errorf("the connection changed (-want +got):\n%s", diff)
	}
}
