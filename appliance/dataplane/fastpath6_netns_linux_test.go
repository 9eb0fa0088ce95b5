package dataplane

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/internal/netnstest"
)

// The differential test of the fast path's routed IPv6 flows: the same
// conversations through a NAT-mode engine with IPv6 routing, with and
// without the fast path, compared byte for byte at both ends, with the
// port counters, route6's connections (states, packets, timeouts) and
// its counters.

var (
	fp6Host   = netip.MustParseAddr("2001:db8:42::77")
	fp6Server = netip.MustParseAddr("2001:db8:43::1")
	fp6GwLL   = netip.MustParseAddr("fe80::99")
	fp6LAN    = netip.MustParsePrefix("2001:db8:42::/64")
	fp6Deleg  = netip.MustParsePrefix("2001:db8:42::/56")
)

// TestFastPathIPv6Differential routes the same IPv6 conversations (TCP,
// UDP, ICMPv6 echo, both ways) through route6 with and without the fast
// path: the frames each side receives, the port counters, route6's
// connections and counters agree; so do the answers route6 gives the
// frames the fast path leaves to it (time exceeded, packet too big, a
// destination options header, padding, FIN and RST).
func TestFastPathIPv6Differential(t *testing.T) {
	off := v6Run(t, FastPathOff)
	on := map[FastPathMode]fpRun{FastPathTCX: v6Run(t, FastPathTCX), FastPathXDP: v6Run(t, FastPathXDP)}
	compareRuns(t, off, on)
	busy := 0
	for _, c := range off.v6conns {
		if c.Packets[0] > 50 && c.Packets[1] > 50 {
			busy++
		}
	}
	if busy != 3 || off.v6stats.Actions[routing.Forward] < 1000 {
		t.Errorf("route6 without the fast path: %d busy connections, %d frames forwarded; want TCP, UDP and echo, over 1000 frames",
			busy, off.v6stats.Actions[routing.Forward])
	}
	compareV6(t, off, on)
}

// compareV6 compares route6's connections and counters of runs with the
// fast path (each of on) to the run without it, and checks that each
// had the six flows of the conversations in the kernel.
func compareV6(t *testing.T, off fpRun, on map[FastPathMode]fpRun) {
	t.Helper()
	for mode, r := range on {
		if diff := gocmp.Diff(off.v6conns, r.v6conns, gocmp.Comparer(func(a, b int64) bool { return a-b <= 1 && b-a <= 1 })); diff != "" {
			t.Errorf("%s: route6 connections (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := gocmp.Diff(off.v6stats, r.v6stats); diff != "" {
			t.Errorf("%s: route6 counters (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if r.v6flows < 6 {
			t.Errorf("%s: %d IPv6 flows in the kernel at most, want the 6 directions of TCP, UDP and echo", mode, r.v6flows)
		}
	}
}

// v6Conn is a route6 connection with its expiry relative to the end of
// the run's traffic.
type v6Conn struct {
	route6.Conn
	ExpiresIn int64 // seconds
}

// v6Run runs the IPv6 conversations through an engine with fast path
// mode. The test's own sockets are the LAN host A and the WAN gateway G
// (fe80::99), which also plays the server beyond it.
func v6Run(t *testing.T, mode FastPathMode) fpRun {
	t.Helper()
	e, c := v6Setup(t, mode)
	h1, h2 := c.h1, c.h2
	most := 0
	if fs := e.Snapshot().FastPath; fs != nil {
		most = fs.IPv6Flows
	}
	c.exchange(60)
	c.exceptions()
	c.blast(300)
	c.close()
	end := time.Now()
	h2.Wait(300*time.Millisecond, 5*time.Second)
	return collect6(t, e, h1, h2, end, most)
}

// collect6 is collect with route6's connections and counters, and most,
// the most IPv6 flows the kernel had.
func collect6(t *testing.T, e *Engine, h1, h2 *netnstest.Packets, end time.Time, most int) fpRun {
	t.Helper()
	v6 := e.IPv6()
	run := collect(t, e, h1, h2, end)
	run.v6flows = most
	for _, cn := range v6.Conns(100, end.UnixNano()) {
		run.v6conns = append(run.v6conns, v6Conn{Conn: cn, ExpiresIn: int64(cn.Expires) - end.Unix()})
		run.v6conns[len(run.v6conns)-1].Conn.Expires = 0
	}
	slices.SortFunc(run.v6conns, func(a, b v6Conn) int { // a total order: the table lists by hash
		return cmp.Compare(fmt.Sprint(a.Proto, a.LANPort, a.WANPort, a.LAN, a.WAN), fmt.Sprint(b.Proto, b.LANPort, b.WANPort, b.LAN, b.WAN))
	})
	run.v6stats = v6.Stats()
	return run
}

// v6Setup starts the engine of the IPv6 conversations, opens them and
// waits for their six flows in the fast path (when it runs).
func v6Setup(t *testing.T, mode FastPathMode) (*Engine, v6Conv) {
	t.Helper()
	tp := quietTopo(t)
	cfg := &Config{
		Mode:     ModeNAT,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN, MTU: 1400}},
		FastPath: mode,
		Bridge:   Bridge{NoLoopProtect: true},
		NAT: &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			Gateway: fpGateway, IPv6: true},
	}
	e := tp.engine(cfg)
	v6 := e.IPv6()
	c6 := v6.Config()
	c6.LANPrefixes, c6.Delegated, c6.Gateway = []netip.Prefix{fp6LAN}, []netip.Prefix{fp6Deleg}, fp6GwLL
	if err := v6.SetConfig(c6); err != nil {
		t.Fatal(err)
	}
	lanMAC, wanMAC := linkMAC(t, tp.box, "p1"), linkMAC(t, tp.box, "p2")
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	c := v6Conv{&conv{t: t, r: rand.New(rand.NewPCG(10, 10)), lanMAC: lanMAC, wanMAC: wanMAC, h1: h1, h2: h2,
		etherType: frame.EtherTypeIPv6, outIP: fp6Out, inIP: fp6In, echoReq: frame.ICMPv6EchoRequest, echoRe: frame.ICMPv6EchoReply}}
	// route6 learns A and G from their solicitations of its addresses.
	c.step([][]byte{ns(fpHostA, lanMAC, fp6Host.As16(), LinkLocal(lanMAC).As16())}, [][]byte{ns(fpGwMAC, wanMAC, fp6GwLL.As16(), LinkLocal(wanMAC).As16())})
	c.open()
	c.exchange(1)
	time.Sleep(offload.Reoffer + 100*time.Millisecond)
	c.exchange(1)
	waitFast(t, e, 6)
	return e, c
}

// TestFastPathIPv6Evictions: a renumbering (SetPrefixes without the
// LAN's prefix) takes the IPv6 flows out of the kernel before it returns,
// and route6 drops the host's next frames (martian); a new MAC of the
// gateway takes its flows out within a harvest, and the frames follow it.
func TestFastPathIPv6Evictions(t *testing.T) {
	e, c := v6Setup(t, FastPathTCX)
	v6 := e.IPv6()
	udp := func(n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = c.out(fp6Out.UDPPacket(5353, 53, c.payload(100)))
		}
		return out
	}
	if fs := e.Snapshot().FastPath; fs.IPv6Flows != 6 {
		t.Fatalf("%d IPv6 flows in the kernel, want 6", fs.IPv6Flows)
	}
	// The gateway answers from a new MAC (an override NA): its flows
	// leave, the next frames go to the new MAC.
	newGw := [6]byte{0x02, 0xfa, 0, 0, 0, 0x98}
	na := frametest.IPv6{Src: fp6GwLL.As16(), Dst: LinkLocal(c.wanMAC).As16(), HopLimit: 255}.ICMPPacket(136, 0, 0x20000000,
		append(slices.Clone(fp6GwLL.AsSlice()), append([]byte{2, 1}, newGw[:]...)...))
	c.step(nil, [][]byte{frametest.Frame(c.wanMAC, newGw, frame.EtherTypeIPv6, na)})
	netnstest.WaitFor(t, 2*time.Second, "the gateway's flows out of the kernel", func() bool { return e.Snapshot().FastPath.IPv6Flows <= 3 })
	c.h2.Reset()
	c.step(udp(20), nil)
	got := c.h2.Wait(200*time.Millisecond, 2*time.Second)
	to := 0
	for _, b := range got {
		if [6]byte(b[0:6]) == newGw {
			to++
		}
	}
	if to != 20 {
		t.Errorf("%d of 20 frames went to the gateway's new MAC (%d frames in all)", to, len(got))
	}
	// Renumbered away from the host's prefix.
	if err := v6.SetPrefixes([]netip.Prefix{netip.MustParsePrefix("2001:db8:42:1::/64")}, []netip.Prefix{fp6Deleg}, nil); err != nil {
		t.Fatal(err)
	}
	if fs := e.Snapshot().FastPath; fs.IPv6Flows != 0 {
		t.Errorf("%d IPv6 flows in the kernel after SetPrefixes returned, want 0", fs.IPv6Flows)
	}
	before := v6.Stats().Drops[route6.ReasonMartian]
	c.h2.Reset()
	c.step(udp(20), nil)
	if n := len(c.h2.Wait(200*time.Millisecond, time.Second)); n != 0 {
		t.Errorf("%d frames from the old prefix reached the WAN after the renumbering", n)
	}
	if d := v6.Stats().Drops[route6.ReasonMartian] - before; d != 20 {
		t.Errorf("route6 dropped %d frames as martian, want the 20 of the old prefix", d)
	}
}

// ns is a neighbour solicitation from mac and src for target (the box's
// link-local address on the port whose MAC is to), with the source
// link-layer address: unicast, as the LAN's multicast NDP is the host
// port's (the engine hands route6 no group frames from the LAN but ARP).
func ns(mac, to [6]byte, src, target [16]byte) []byte {
	body := append(append(slices.Clone(target[:]), 1, 1), mac[:]...)
	h := frametest.IPv6{Src: src, Dst: target, HopLimit: 255}
	return frametest.Frame(to, mac, frame.EtherTypeIPv6, h.ICMPPacket(135, 0, 0, body))
}

// v6Conv is the IPv6 test's conversations (routed, unpadded frames).
type v6Conv struct{ *conv }

var (
	fp6Out = frametest.IPv6{Src: fp6Host.As16(), Dst: fp6Server.As16(), HopLimit: 64}
	fp6In  = frametest.IPv6{Src: fp6Server.As16(), Dst: fp6Host.As16(), HopLimit: 50}
)

// exchange sends n rounds of data of every flow both ways.
func (c v6Conv) exchange(n int) { c.conv.exchange(n, nil) }

// blast sends n damaged frames of the flows both ways.
func (c v6Conv) blast(n int) { c.conv.blast(n, blast6) }

// exceptions sends frames of the established flows that the fast path
// must leave to route6.
func (c v6Conv) exceptions() {
	hop1 := fp6Out
	hop1.HopLimit = 1
	opts := fp6Out
	opts.NextHeader = frametest.ProtoDestOpts
	other := c.out(fp6Out.UDPPacket(5353, 53, c.payload(40)))
	other[0] ^= 0x02 // not the router's MAC
	padded := append(c.out(fp6Out.UDPPacket(5353, 53, c.payload(20))), 0, 0, 0, 0)
	quote := c.out(fp6Out.UDPPacket(5353, 53, c.payload(20)))[14:]
	unreach := c.in(frametest.IPv6{Src: fp6Server.As16(), Dst: fp6Host.As16(), HopLimit: 50}.ICMPPacket(frame.ICMPv6DestUnreach, 4, 0, quote))
	c.step([][]byte{
		c.out(hop1.UDPPacket(5353, 53, c.payload(40))),                                                           // time exceeded
		c.out(opts.Build(slices.Concat(frametest.Ext6(frame.ProtoUDP, nil), opts.UDP(5353, 53, c.payload(40))))), // forwarded by route6
		c.out(fp6Out.UDPPacket(5353, 53, make([]byte, 1380))),                                                    // over the WAN MTU: packet too big
		other, padded,
		c.out(fp6Out.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: c.seqA, Flags: frame.TCPPsh}, c.payload(10))), // no ACK: route6's
	}, [][]byte{unreach})
}

// blast6 is blast with damage where IPv6 keeps its lengths and hop limit.
func blast6(r *rand.Rand, good [][]byte, n int) [][]byte {
	out := blast(r, good, n/2)
	for range n - n/2 {
		b := slices.Clone(good[r.IntN(len(good))])
		at := []int{18, 19, 20, 21, 14, 14 + 40 + 4, 14 + 40 + 5, 14 + 40 + 12, 14 + 40 + 13}[r.IntN(9)]
		if at >= len(b) { // a UDP frame without payload has no TCP flags
			at = 14
		}
		b[at] = byte(r.Uint32())
		out = append(out, b)
	}
	return out
}
