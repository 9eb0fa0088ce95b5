package dataplane

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/pppoepeer"
	"e1kbox/internal/vlanpeer"
)

// The fast path over a PPPoE WAN: the engine's session is static
// (NAT.PPPoESession), the WAN gateway G is the AC, and G's end of the
// cable frames its IPv4 in the session (pppoepeer), inside VLAN 7 where
// the WAN is tagged (vlanpeer). G's captures are the wire's: the
// router's session frames, compared byte for byte.

const fpSession = 0x1b2c

// TestFastPathNATOverPPPoEDifferential is TestFastPathNATDifferential
// over a PPPoE WAN, untagged and in VLAN 7: the tcx fast path takes the
// flows from and to the session (the session header off and on), and
// the frames, counters and connections agree with the rings'; the fast
// path's counters show it carried the flows both ways.
func TestFastPathNATOverPPPoEDifferential(t *testing.T) {
	for _, tc := range []struct {
		name string
		vlan WANVLAN
	}{
		{"untagged", WANVLAN{}},
		{"VLAN 7", WANVLAN{ID: 7, PCP: 2, ControlPCP: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := pppoeRun(t, FastPathOff, tc.vlan)
			tcx := pppoeRun(t, FastPathTCX, tc.vlan)
			compareRuns(t, off, map[FastPathMode]fpRun{FastPathTCX: tcx})
		})
	}
}

// pppoeBoxConfig is the NAT engine of the PPPoE runs: the session's
// address, G as the peer, a session MTU of 1392 on a WAN port of 1400.
func pppoeBoxConfig(mode FastPathMode, vlan WANVLAN, sid uint16) *Config {
	return &Config{
		Mode:     ModeNAT,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN, MTU: 1400}},
		FastPath: mode,
		Bridge:   Bridge{NoLoopProtect: true},
		NAT: &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANAddr: netip.PrefixFrom(fpWANAddr, 32),
			Gateway: fpGateway, WANVLAN: vlan, WANMTU: 1392, WANPPPoE: true,
			PPPoESession: PPPoESession{ID: sid, ACMAC: fpGwMAC}},
	}
}

// pppoeStart is a PPPoE run's topology, engine and conversations, the
// conversations open and their flows offered.
type pppoeStart struct {
	tp     *topo
	e      *Engine
	cfg    *Config
	c      natConv
	peer   *pppoepeer.Peer
	h1, h2 *netnstest.Packets
}

// pppoeTopo is the topology of the PPPoE runs: the hosts without
// addresses, G the AC's end of the static session fpSession (in VLAN
// vlan, if any: afterwards G got nothing off it, and the conversations'
// frames with its data priority).
func pppoeTopo(t *testing.T, vlan WANVLAN) (*topo, *pppoepeer.Peer) {
	t.Helper()
	tp := quietTopo(t)
	for _, h := range tp.hosts {
		h.IP(t, "addr", "flush", "dev", "eth0")
	}
	peer := pppoepeer.In(t, tp.hosts[1], "eth0", fpSession)
	if vlan.ID != 0 {
		vp := vlanpeer.In(t, tp.hosts[1], "eth0", vlan.ID, 3)
		t.Cleanup(func() {
			if n, err := vp.Dropped(); n != 0 || err != nil {
				t.Errorf("G got %d frames off VLAN %d (%v)", n, vlan.ID, err)
			}
			if n := vp.Frames(t, vlanpeer.Key{Tagged: 1, VID: vlan.ID, PCP: vlan.PCP, EtherType: EtherTypePPPoESession}); n < 100 {
				t.Errorf("G got %d PPPoE session frames with VLAN %d's data priority %d, want the conversations'", n, vlan.ID, vlan.PCP)
			}
		})
	}
	return tp, peer
}

// startPPPoE builds a PPPoE run and opens the conversations.
func startPPPoE(t *testing.T, mode FastPathMode, vlan WANVLAN) *pppoeStart {
	t.Helper()
	tp, peer := pppoeTopo(t, vlan)
	cfg := pppoeBoxConfig(mode, vlan, fpSession)
	e := tp.engine(cfg)
	lanMAC, wanMAC := linkMAC(t, tp.box, "p1"), linkMAC(t, tp.box, "p2")
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	// The router learns A from its ARP request; G is the session's peer.
	h1.Send(t, frametest.ARPFrame(bcast, fpHostA, 1, fpHostA, fpLANHost.As4(), [6]byte{}, [4]byte{10, 42, 0, 254}))
	c := natConv{&conv{t: t, r: rand.New(rand.NewPCG(9, 8864)), lanMAC: lanMAC, wanMAC: wanMAC, h1: h1, h2: h2,
		etherType: frame.EtherTypeIPv4, outIP: fpOutIP, inIP: fpInIP, echoReq: frame.ICMPEchoRequest, echoRe: frame.ICMPEchoReply, pad: true}}
	c.open()
	time.Sleep(2100 * time.Millisecond) // UDP becomes a stream (assured) with the next packets
	c.exchange(1)
	time.Sleep(offload.Reoffer + 100*time.Millisecond)
	c.exchange(1)
	waitFast(t, e, 6)
	return &pppoeStart{tp: tp, e: e, cfg: cfg, c: c, peer: peer, h1: h1, h2: h2}
}

// pppoeRun runs the NAT conversations of natRunOn through a PPPoE WAN.
func pppoeRun(t *testing.T, mode FastPathMode, vlan WANVLAN) fpRun {
	t.Helper()
	s := startPPPoE(t, mode, vlan)
	c, e := s.c, s.e
	fastBefore := fastPorts(e)
	c.exchange(60)
	s.h2.Wait(100*time.Millisecond, 2*time.Second)
	if mode != FastPathOff {
		// 60 rounds carry 7 frames of the established flows from G
		// and 10 from A: most must be the fast path's (a flow the
		// manager installs late, on a busy machine, leaves a few to
		// the rings).
		after := fastPorts(e)
		wan, lan := e.wanID(), uint16(1)
		fromWAN, fromLAN := after[wan].RxPackets-fastBefore[wan].RxPackets, after[lan].RxPackets-fastBefore[lan].RxPackets
		t.Logf("60 rounds: the fast path forwarded %d of 420 frames from the PPPoE WAN and %d of 600 from the LAN", fromWAN, fromLAN)
		if fromWAN < 420/2 || fromLAN < 600/2 {
			t.Errorf("the fast path forwarded %d frames from the PPPoE WAN and %d from the LAN in 60 rounds, want most of 420 and 600", fromWAN, fromLAN)
		}
		if ws := after[wan].TxPackets - fastBefore[wan].TxPackets; ws != fromLAN {
			t.Errorf("the fast path sent %d frames to the WAN, received %d from the LAN", ws, fromLAN)
		}
	}
	c.exceptions()
	c.blast(300)
	c.close()
	end := time.Now()
	s.h2.Wait(300*time.Millisecond, 5*time.Second)
	if n, err := s.peer.Counts(); err != nil || n.Session < 400 {
		t.Errorf("G received %+v frames (session's, other) (%v), want the conversations' in the session", n, err)
	}
	run := collect(t, e, s.h1, s.h2, end)
	noARP := func(fs []string, port *PortStats) []string {
		return slices.DeleteFunc(fs, func(s string) bool {
			if strings.HasPrefix(s[24:], "0806") {
				port.TxPackets--
				port.TxBytes -= uint64(len(s) / 2)
				return true
			}
			return false
		})
	}
	run.at1 = noARP(run.at1, &run.ports[0])
	return run
}

// fastPorts is what the fast path forwarded by port id so far.
func fastPorts(e *Engine) []offload.PortCount {
	_, ports := e.fp.Stats()
	return ports
}

// TestFastPathPPPoESessionChange checks that a new session, and then no
// session, takes the old session's flows off the fast path at once: from
// the Apply on, G's frames in the old session reach A no more, A's
// frames leave in the new session (or not at all), and the flows leave
// the kernel.
func TestFastPathPPPoESessionChange(t *testing.T) {
	s := startPPPoE(t, FastPathTCX, WANVLAN{})
	c, e := s.c, s.e
	c.exchange(5)
	if st := e.Snapshot().FastPath; st == nil || st.NATFlows < 6 {
		t.Fatalf("fast path before the change: %+v", st)
	}
	const next = fpSession + 1
	cfg := pppoeBoxConfig(FastPathTCX, WANVLAN{}, next)
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	s.h1.Wait(100*time.Millisecond, time.Second)
	s.h2.Wait(100*time.Millisecond, time.Second)
	s.h1.Reset()
	s.h2.Reset()
	fastBefore := fastPorts(e)
	// G still speaks the old session; A goes on.
	c.exchange(5)
	s.h1.Wait(200*time.Millisecond, 2*time.Second)
	s.h2.Wait(200*time.Millisecond, 2*time.Second)
	if n := len(s.h1.Frames()); n != 0 {
		t.Errorf("A received %d frames G sent in the old session", n)
	}
	sessions := map[uint16]int{}
	for _, f := range s.h2.Frames() {
		if len(f) >= 22 && binary.BigEndian.Uint16(f[12:]) == EtherTypePPPoESession {
			sessions[binary.BigEndian.Uint16(f[16:])]++
		}
	}
	if sessions[fpSession] != 0 || sessions[next] < 20 {
		t.Errorf("G received session frames by session %v, want A's in session %#04x only", sessions, next)
	}
	after := fastPorts(e)
	if d := after[e.wanID()].RxPackets - fastBefore[e.wanID()].RxPackets; d != 0 {
		t.Errorf("the fast path forwarded %d frames of the old session", d)
	}
	// A's flows are offered again in the new session (G's are not: G
	// speaks the old one).
	t.Logf("after the new session: %+v", e.Snapshot().FastPath)

	// The session goes down: nothing leaves on the WAN.
	down := pppoeBoxConfig(FastPathTCX, WANVLAN{}, 0)
	down.NAT.PPPoESession, down.NAT.WANAddr, down.NAT.Gateway, down.NAT.WANMTU = PPPoESession{}, netip.Prefix{}, netip.Addr{}, 0
	if err := e.Apply(down); err != nil {
		t.Fatal(err)
	}
	s.h2.Wait(100*time.Millisecond, time.Second)
	s.h2.Reset()
	c.exchange(3)
	s.h2.Wait(200*time.Millisecond, 2*time.Second)
	if n := len(s.h2.Frames()); n != 0 {
		t.Errorf("G received %d frames with the session down", n)
	}
	eventually(t, 5*time.Second, "no NAT flow in the fast path with the session down", func() (bool, string) {
		st := e.Snapshot().FastPath
		return st != nil && st.NATFlows == 0, ""
	})
}
