package route6

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// offloadEnv is a resolved env with an established TCP connection, a
// replied UDP flow, an unreplied one and a replied echo from host to
// server.
func offloadEnv(t *testing.T) *env {
	e := resolved(t, "")
	for _, p := range []struct {
		port int
		b    []byte
	}{
		{lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))},
		{wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0))},
		{lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, 0))},
		{lanPort, fromLAN(udp(host, server, 7000, 53))},
		{wanPort, fromWAN(udp(server, host, 53, 7000))},
		{lanPort, fromLAN(udp(host, server, 7001, 53))},
		{lanPort, fromLAN(icmp(host, server, 64, frame.ICMPv6EchoRequest, 0, 0x00420001, nil))},
		{wanPort, fromWAN(icmp(server, host, 64, frame.ICMPv6EchoReply, 0, 0x00420001, nil))},
	} {
		if res := e.handle(p.port, p.b); res.Action != routing.Forward {
			t.Fatalf("setup frame %d: %v/%v", len(p.b), res.Action, res.Reason)
		}
	}
	return e
}

var (
	tcpOut  = Flow{Side: LAN, Src: host, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	udpOut  = Flow{Side: LAN, Src: host, Dst: server, SrcPort: 7000, DstPort: 53, Proto: frame.ProtoUDP}
	echoOut = Flow{Side: LAN, Src: host, Dst: server, SrcPort: 0x42, Proto: frame.ProtoICMPv6}
)

// TestOffloadable: the directions of established connections with fresh
// next hops are offloadable, with the forwarding route6 does; the rest
// is not.
func TestOffloadable(t *testing.T) {
	toWAN := Offload{Out: WAN, OutPort: wanPort, OutMAC: wanMAC, InMAC: lanMAC, OutMTU: 1400, NextHop: gwLL, NextHopMAC: gwMAC}
	toLAN := Offload{Out: LAN, OutPort: lanPort, OutMAC: lanMAC, InMAC: wanMAC, OutMTU: 1500, NextHop: host, NextHopMAC: hostMAC}
	with := func(o Offload, timeout uint32) *Offload { o.Timeout = timeout; return &o }
	for _, tc := range []struct {
		name  string
		flow  Flow
		setup func(e *env)
		want  *Offload // nil: not offloadable
	}{
		{"tcp out", tcpOut, nil, with(toWAN, 5*24*3600)},
		{"tcp in", tcpOut.Reverse(), nil, with(toLAN, 5*24*3600)},
		{"udp out", udpOut, nil, with(toWAN, 180)},
		{"udp in", udpOut.Reverse(), nil, with(toLAN, 180)},
		{"echo request", echoOut, nil, with(toWAN, 30)},
		{"echo reply", echoOut.Reverse(), nil, with(toLAN, 30)},
		{"udp without a reply", Flow{Side: LAN, Src: host, Dst: server, SrcPort: 7001, DstPort: 53, Proto: frame.ProtoUDP}, nil, nil},
		{"no connection", Flow{Side: LAN, Src: host, Dst: server, SrcPort: 7002, DstPort: 53, Proto: frame.ProtoUDP}, nil, nil},
		{"tcp syn sent", Flow{Side: LAN, Src: host, Dst: server, SrcPort: 40001, DstPort: 443, Proto: frame.ProtoTCP}, func(e *env) {
			e.handle(lanPort, fromLAN(tcp(host, server, 40001, 443, frame.TCPSyn, 0)))
		}, nil},
		{"tcp after a fin", tcpOut, func(e *env) {
			e.handle(lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPFin|frame.TCPAck, 0)))
		}, nil},
		{"expired", udpOut, func(e *env) { e.now += 181e9 }, nil},
		{"gateway stale", tcpOut, func(e *env) { e.now += 31e9 }, nil},
		{"host stale, gateway fresh", tcpOut.Reverse(), func(e *env) {
			e.now += 31e9
			e.r.neigh.learn(WAN, &gwLL, gwMAC, learnConfirm, uint32(e.now/1e9), e.now)
		}, nil},
		{"gateway fresh again", tcpOut, func(e *env) {
			e.now += 31e9
			e.r.neigh.learn(WAN, &gwLL, gwMAC, learnConfirm, uint32(e.now/1e9), e.now)
		}, with(toWAN, 5*24*3600)},
		{"renumbered away", tcpOut, func(e *env) {
			if err := e.r.SetPrefixes([]netip.Prefix{netip.MustParsePrefix("2001:db8:2::/64")}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"no gateway", tcpOut, func(e *env) {
			c := e.r.Config()
			c.Gateway = netip.Addr{}
			if err := e.r.SetConfig(c); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"link-local", Flow{Side: LAN, Src: lanLL, Dst: server, SrcPort: 1, DstPort: 2, Proto: frame.ProtoUDP}, nil, nil},
		{"to the box", Flow{Side: LAN, Src: host, Dst: lanAddr, SrcPort: 1, DstPort: 2, Proto: frame.ProtoUDP}, nil, nil},
		{"other protocol", Flow{Side: LAN, Src: host, Dst: server, Proto: 47}, nil, nil},
		{"bad side", Flow{Side: 7, Src: host, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := offloadEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			got, ok := e.r.Offloadable(tc.flow, e.now)
			if tc.want == nil {
				if ok {
					t.Errorf("Offloadable = %+v, want not offloadable", got)
				}
				return
			}
			if !ok {
				t.Fatalf("not offloadable, want %+v", *tc.want)
			}
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Errorf("Offloadable (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOffloaded: the fast path's packets count in the connection and
// carry its deadline; a FIN the router saw ends the offload.
func TestOffloaded(t *testing.T) {
	e := offloadEnv(t)
	later := e.now + 100e9
	if !e.r.Offloaded(udpOut, OffloadUse{Packets: 5, Last: later}) || !e.r.Offloaded(udpOut.Reverse(), OffloadUse{Packets: 7, Last: later}) {
		t.Fatal("Offloaded said the UDP flow is no longer offloadable")
	}
	if !e.r.Offloaded(tcpOut, OffloadUse{}) {
		t.Error("a report without packets ended the TCP offload")
	}
	find := func(port uint16) Conn {
		for _, c := range e.r.Conns(10, e.now) {
			if c.LANPort == port {
				return c
			}
		}
		t.Fatalf("no connection of port %d", port)
		return Conn{}
	}
	c := find(7000)
	if want := (Conn{LAN: host, WAN: server, LANPort: 7000, WANPort: 53, Proto: frame.ProtoUDP, State: "udp", Replied: true,
		Expires: uint32(later/1e9) + udpReplied, Packets: [2]uint64{6, 8}}); !cmp.Equal(want, c) {
		t.Errorf("connection (-want +got):\n%s", cmp.Diff(want, c))
	}
	// Past the deadline the router would have found it expired.
	if e.r.Offloaded(udpOut, OffloadUse{Packets: 1, Last: later + 181e9}) {
		t.Error("Offloaded past the deadline said the flow stays")
	}
	if got := find(7000).Packets; got != [2]uint64{6, 8} {
		t.Errorf("packets past the deadline were counted: %v", got)
	}
	e.handle(wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPFin|frame.TCPAck, 0)))
	if e.r.Offloaded(tcpOut, OffloadUse{Packets: 1, Last: e.now}) {
		t.Error("Offloaded after the server's FIN said the TCP flow stays")
	}
	if e.r.Offloaded(Flow{Side: LAN, Src: host, Dst: server, SrcPort: 1, DstPort: 2, Proto: frame.ProtoUDP}, OffloadUse{Packets: 1, Last: e.now}) {
		t.Error("Offloaded of no connection said it stays")
	}
	e.r.CountOffloaded(12)
	if got := e.r.Stats().Actions[routing.Forward]; got != 9+12 {
		t.Errorf("Stats forwarded %d, want the 8 setup frames, the FIN and the 12 offloaded", got)
	}
}

// TestOnChange: SetPrefixes and SetConfig call the hook and count a
// generation.
func TestOnChange(t *testing.T) {
	e := offloadEnv(t)
	calls := 0
	e.r.OnChange(func() { calls++ })
	g := e.r.Generation()
	if err := e.r.SetPrefixes([]netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.r.SetConfig(testConfig()); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || e.r.Generation() != g+2 {
		t.Errorf("hook called %d times, generation %d → %d; want 2 and +2", calls, g, e.r.Generation())
	}
	e.r.OnChange(nil)
	if err := e.r.SetConfig(testConfig()); err != nil || calls != 2 {
		t.Errorf("hook called after OnChange(nil): %d (%v)", calls, err)
	}
	if err := e.r.SetConfig(Config{}); err == nil || e.r.Generation() != g+3 {
		t.Errorf("a refused config: err %v, generation %d, want an error and no change", err, e.r.Generation())
	}
}

// TestOffloadAllocs: the fast path's calls allocate nothing (the harvest
// makes them for every flow twice a second).
func TestOffloadAllocs(t *testing.T) {
	e := offloadEnv(t)
	n := testing.AllocsPerRun(100, func() {
		e.r.Offloadable(tcpOut, e.now)
		e.r.Offloaded(udpOut, OffloadUse{Packets: 1, Last: e.now})
		e.r.NeighbourFresh(WAN, gwLL, gwMAC, e.now)
	})
	if n != 0 {
		t.Errorf("%v allocations per harvest of a flow, want 0", n)
	}
}

// TestNeighbourFreshProbes: a next hop the fast path sends to is probed
// by a unicast NS (a worker's Tick sends it) once half the reachable time
// has passed, one a second, at most neighProbes unanswered; a solicited
// NA keeps it fresh past the reachable time, so that its flows stay in
// the kernel; one that does not answer goes stale.
func TestNeighbourFreshProbes(t *testing.T) {
	probe := eth(gwMAC, wanMAC, icmp(wanLL, gwLL, 255, icmpNS, 0, 0, append(append([]byte(nil), gwLL[:]...), optSLLA, 1, 2, 0, 0, 0, 0xb, 1)))
	for _, tc := range []struct {
		name      string
		answer    bool
		freshAt40 bool
		maxProbes int
	}{
		{"answered", true, true, 20},
		// Linux answers a unicast NS without the option.
		{"answered without a link-layer address", true, true, 20},
		{"answered from another MAC, no option", true, false, neighProbes},
		{"silent", false, false, neighProbes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := resolved(t, "") // the gateway confirmed at e.now
			start := e.now
			probes := 0
			for s := 1; s <= 40; s++ {
				e.now = start + int64(s)*1e9
				fresh := e.r.NeighbourFresh(WAN, gwLL, gwMAC, e.now)
				if s < reachableTime && !fresh {
					t.Fatalf("%d s after its confirmation the gateway is not fresh", s)
				}
				for range 2 { // two ticks a second: one probe
					e.w.Tick(e.now)
					for _, o := range e.outputs() {
						if o.port != wanPort || string(o.b) != string(probe) {
							t.Fatalf("%d s: the worker sent %x on port %d, want the gateway's unicast NS %x", s, o.b, o.port, probe)
						}
						if s <= reachableTime/2 {
							t.Errorf("a probe %d s after the confirmation, want none before half the reachable time", s)
						}
						probes++
						if tc.answer {
							answer := eth(wanMAC, gwMAC, na(gwLL, wanLL, gwLL, gwMAC))
							switch tc.name {
							case "answered without a link-layer address":
								answer = eth(wanMAC, gwMAC, icmp(gwLL, wanLL, 255, icmpNA, 0, 0x60000000, gwLL[:]))
							case "answered from another MAC, no option":
								answer = eth(wanMAC, hostMAC, icmp(gwLL, wanLL, 255, icmpNA, 0, 0x60000000, gwLL[:]))
							}
							if res := e.handle(wanPort, answer); res.Action != routing.Consumed {
								t.Fatalf("the gateway's NA: %v/%v", res.Action, res.Reason)
							}
						}
					}
				}
			}
			if got := e.r.NeighbourFresh(WAN, gwLL, gwMAC, e.now); got != tc.freshAt40 {
				t.Errorf("fresh 40 s after the first confirmation: %v, want %v (%d probes)", got, tc.freshAt40, probes)
			}
			if probes == 0 || probes > tc.maxProbes {
				t.Errorf("%d probes in 40 s, want 1 to %d", probes, tc.maxProbes)
			}
		})
	}
}
