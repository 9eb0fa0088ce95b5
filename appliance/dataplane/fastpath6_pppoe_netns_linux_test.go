package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/offload"
)

// Routed IPv6 over a PPPoE WAN in the fast path: the engine's session is
// static with IPv6CP's link-local addresses (route6 routes the WAN
// point-to-point, to the AC's MAC), G is the AC and the session's peer
// fe80::99, and G's end of the cable frames its IPv6 in the session
// (pppoepeer, PPP protocol 0x0057), inside VLAN 7 where the WAN is
// tagged (vlanpeer).

var fp6PPPLocalLL = netip.MustParseAddr("fe80::e1")

// TestFastPathIPv6OverPPPoEDifferential is TestFastPathIPv6Differential
// over a PPPoE WAN, untagged and in VLAN 7: the tcx fast path takes the
// IPv6 flows from and to the session (the session header off and on),
// and the frames, counters, route6's connections and counters agree with
// the rings'; the fast path's counters show it carried most established
// frames both ways.
func TestFastPathIPv6OverPPPoEDifferential(t *testing.T) {
	for _, tc := range []struct {
		name string
		vlan WANVLAN
	}{
		{"untagged", WANVLAN{}},
		{"VLAN 7", WANVLAN{ID: 7, PCP: 2, ControlPCP: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := pppoe6Run(t, FastPathOff, tc.vlan)
			tcx := pppoe6Run(t, FastPathTCX, tc.vlan)
			routerNS(t, &off, &tcx)
			on := map[FastPathMode]fpRun{FastPathTCX: tcx}
			compareRuns(t, off, on)
			compareV6(t, off, on)
		})
	}
}

// pppoe6Run runs the IPv6 conversations of v6Run through a PPPoE WAN
// (the session MTU 1392, pppoeBoxConfig's).
func pppoe6Run(t *testing.T, mode FastPathMode, vlan WANVLAN) fpRun {
	t.Helper()
	tp, peer := pppoeTopo(t, vlan)
	cfg := pppoeBoxConfig(mode, vlan, fpSession)
	cfg.NAT.IPv6 = true
	cfg.NAT.PPPoESession.LocalLinkLocal, cfg.NAT.PPPoESession.PeerLinkLocal = fp6PPPLocalLL, fp6GwLL
	e := tp.engine(cfg)
	v6 := e.IPv6()
	c6 := v6.Config()
	if !c6.WANPointToPoint || c6.Gateway != fp6GwLL || c6.WANPeerMAC != fpGwMAC {
		t.Fatalf("route6 on the PPPoE WAN: point-to-point %v, gateway %v, peer MAC %x; want the session's", c6.WANPointToPoint, c6.Gateway, c6.WANPeerMAC)
	}
	c6.LANPrefixes, c6.Delegated = []netip.Prefix{fp6LAN}, []netip.Prefix{fp6Deleg}
	if err := v6.SetConfig(c6); err != nil {
		t.Fatal(err)
	}
	lanMAC, wanMAC := linkMAC(t, tp.box, "p1"), linkMAC(t, tp.box, "p2")
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	c := v6Conv{&conv{t: t, r: rand.New(rand.NewPCG(10, 8864)), lanMAC: lanMAC, wanMAC: wanMAC, h1: h1, h2: h2,
		etherType: frame.EtherTypeIPv6, outIP: fp6Out, inIP: fp6In, echoReq: frame.ICMPv6EchoRequest, echoRe: frame.ICMPv6EchoReply}}
	// route6 learns A from its solicitation; the WAN has no neighbours.
	c.step([][]byte{ns(fpHostA, lanMAC, fp6Host.As16(), LinkLocal(lanMAC).As16())}, nil)
	c.open()
	c.exchange(1)
	time.Sleep(offload.Reoffer + 100*time.Millisecond)
	c.exchange(1)
	waitFast(t, e, 6)
	most := 0
	if fs := e.Snapshot().FastPath; fs != nil {
		most = fs.IPv6Flows
	}

	fastBefore := fastPorts(e)
	c.exchange(60)
	h2.Wait(100*time.Millisecond, 2*time.Second)
	if mode != FastPathOff {
		// 60 rounds carry 7 frames of the established flows from
		// each side: most must be the fast path's.
		after := fastPorts(e)
		wan, lan := e.wanID(), uint16(1)
		fromWAN, fromLAN := after[wan].RxPackets-fastBefore[wan].RxPackets, after[lan].RxPackets-fastBefore[lan].RxPackets
		t.Logf("60 rounds: the fast path forwarded %d of 420 IPv6 frames from the PPPoE WAN and %d of 420 from the LAN", fromWAN, fromLAN)
		if fromWAN < 420/2 || fromLAN < 420/2 {
			t.Errorf("the fast path forwarded %d IPv6 frames from the PPPoE WAN and %d from the LAN in 60 rounds, want most of 420 each", fromWAN, fromLAN)
		}
		if ws := after[wan].TxPackets - fastBefore[wan].TxPackets; ws != fromLAN {
			t.Errorf("the fast path sent %d frames to the WAN, received %d from the LAN", ws, fromLAN)
		}
	}
	c.exceptions()
	c.blast(300)
	c.close()
	end := time.Now()
	h2.Wait(300*time.Millisecond, 5*time.Second)
	if n, err := peer.Counts(); err != nil || n.Session6 < 400 {
		t.Errorf("G received %+v frames (%v), want the conversations' in the session as IPv6", n, err)
	}
	return collect6(t, e, h1, h2, end, most)
}

// routerNS takes the router's solicitations of A (multicast NS from its
// LAN MAC) out of both runs, with what they count, when their numbers
// differ by one: A never answers them, and route6 solicits an unanswered
// entry again once a second while it is used, so a run a second longer
// (a loaded machine) sees one more, in either mode. Seen in 2 of 4 runs
// beside other tests. Everything else still compares exactly.
func routerNS(t *testing.T, off, on *fpRun) {
	t.Helper()
	const nsLen = 86 // Ethernet, IPv6, NS with its source link-layer option
	isNS := func(h string) bool {
		return strings.HasPrefix(h, "3333ff") && h[12:24] == "02fa00000101" && len(h) == 2*nsLen && h[108:110] == "87"
	}
	count := func(r *fpRun) (n int, rest []string) {
		for _, h := range r.at1 {
			if isNS(h) {
				n++
			} else {
				rest = append(rest, h)
			}
		}
		return n, rest
	}
	nOff, restOff := count(off)
	nOn, restOn := count(on)
	d := nOn - nOff
	if d == 0 || d < -1 || d > 1 || len(off.ports) != len(on.ports) {
		return
	}
	t.Logf("the router solicited A %d times without the fast path, %d with it (one a second while unanswered): not compared", nOff, nOn)
	off.at1, on.at1 = restOff, restOn
	for i := range on.ports {
		o, n := &off.ports[i], &on.ports[i]
		if int64(n.Flooded)-int64(o.Flooded) == int64(d) {
			n.Flooded = o.Flooded
		}
		if int64(n.TxPackets)-int64(o.TxPackets) == int64(d) && int64(n.TxBytes)-int64(o.TxBytes) == int64(d*nsLen) {
			n.TxPackets, n.TxBytes = o.TxPackets, o.TxBytes
		}
	}
	if int64(on.v6stats.NS)-int64(off.v6stats.NS) == int64(d) {
		on.v6stats.NS = off.v6stats.NS
	}
}
