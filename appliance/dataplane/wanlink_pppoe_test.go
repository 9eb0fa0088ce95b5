package dataplane

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/services/pppoe"
)

var macAC = [6]byte{0x02, 0, 0, 0, 0, 0xac}

const testSID = 0x1234

// setPPPoE swaps the test router's settings to a PPPoE WAN with session
// s (zero: none up) on VLAN v, as Engine.Apply does, and gives the WAN
// worker a control queue.
func (tr *testRouter) setPPPoE(s PPPoESession, v WANVLAN) *pppoeQueue {
	cfg := *tr.cfg
	n := *cfg.NAT
	n.WANPPPoE, n.PPPoESession, n.WANVLAN = true, s, v
	cfg.NAT = &n
	tr.cur.Store(newSettings(&cfg))
	if tr.fwds[idWAN].ppp == nil {
		tr.fwds[idWAN].ppp = newPPPoEQueue()
	}
	return tr.fwds[idWAN].ppp
}

// sessionFrame wraps the IP packet of the untagged frame b in a PPPoE
// session frame from src to dst.
func sessionFrame(dst, src [6]byte, sid, proto uint16, b []byte) []byte {
	out := append(append(append([]byte(nil), dst[:]...), src[:]...), 0x88, 0x64)
	h := make([]byte, pppoeHeaderLen)
	pppoe.PutSessionHeader(h, sid, proto, len(b)-frame.EthernetHeaderLen)
	return append(append(out, h...), b[frame.EthernetHeaderLen:]...)
}

// queued takes the frames waiting in q.
func queued(q *pppoeQueue) [][]byte {
	var out [][]byte
	for {
		select {
		case it := <-q.full:
			out = append(out, append([]byte(nil), q.bufs[it.buf][:it.n]...))
			q.free <- it.buf
		default:
			return out
		}
	}
}

func TestWANPPPoE(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	sess := PPPoESession{ID: testSID, ACMAC: macAC}
	q := tr.setPPPoE(sess, WANVLAN{})

	syn := tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0)
	out := tr.rx(idLAN1, syn)
	if diff := cmp.Diff([]int{0, 0, 1, 0}, counts(out)); diff != "" {
		t.Fatalf("SYN from the LAN: frames per port (-want +got):\n%s", diff)
	}
	got := out[idWAN][0]
	if !bytes.Equal(got[0:6], macAC[:]) || !bytes.Equal(got[6:12], rWAN[:]) || binary.BigEndian.Uint16(got[12:]) != EtherTypePPPoESession {
		t.Fatalf("the SYN left as % x, want a PPPoE session frame from the WAN MAC to the AC", got[:14])
	}
	sid, proto, ip, ok := pppoe.ParseSessionHeader(got[14:])
	if !ok || sid != testSID || proto != pppoe.ProtoIPv4 {
		t.Fatalf("session header: session %#x proto %#x ok %v, want %#x IPv4", sid, proto, ok, testSID)
	}
	f := parsed(t, append(frametest.Frame(rWAN, macAC, frame.EtherTypeIPv4, nil)[:14:14], ip...))
	if f.IPv4.Src != wanIP || f.IPv4.Dst != remIP || f.TCP.Flags != frame.TCPSyn {
		t.Fatalf("the SYN's IP packet: %v > %v flags %#x", f.IPv4.Src, f.IPv4.Dst, f.TCP.Flags)
	}
	natPort := f.TCP.SrcPort
	synAck := tcp4(rWAN, macAC, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0)

	for _, tc := range []struct {
		name   string
		data   []byte
		want   []int // frames per port
		queued int   // frames for the client
		drop   Drop  // counted, if not 0
	}{
		{"the session's IPv4 to the LAN", sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, synAck), []int{1, 0, 0, 0}, 0, 0},
		{"another session", sessionFrame(rWAN, macAC, testSID+1, pppoe.ProtoIPv4, synAck), []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"another AC", sessionFrame(rWAN, macGW, testSID, pppoe.ProtoIPv4, synAck), []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"plain IPv4 on a PPPoE WAN", synAck, []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"ARP on a PPPoE WAN", frametest.ARPFrame(bcast, macGW, 1, macGW, gwIP, [6]byte{}, wanIP), []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"bad version", func() []byte {
			b := sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, synAck)
			b[14] = 0x12
			return b
		}(), []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"length past the frame", func() []byte {
			b := sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, synAck)
			binary.BigEndian.PutUint16(b[18:], 1600)
			return b
		}(), []int{0, 0, 0, 0}, 0, DropPPPoE},
		{"LCP to the client", sessionFrame(rWAN, macAC, testSID, 0xc021, append(make([]byte, 14), 9, 1, 0, 8, 0, 0, 0, 0)), []int{0, 0, 0, 0}, 1, 0},
		{"LCP of another session: the client's to judge", sessionFrame(rWAN, macAC, 7, 0xc021, append(make([]byte, 14), 9, 1, 0, 8, 0, 0, 0, 0)), []int{0, 0, 0, 0}, 1, 0},
		{"PADO to the client", append(append(append([]byte(nil), rWAN[:]...), macAC[:]...), 0x88, 0x63, 0x11, 0x07, 0, 0, 0, 0), []int{0, 0, 0, 0}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.drops()
			out := tr.rx(idWAN, tc.data)
			if diff := cmp.Diff(tc.want, counts(out)); diff != "" {
				t.Errorf("frames per port (-want +got):\n%s", diff)
			}
			qd := queued(q)
			if len(qd) != tc.queued {
				t.Errorf("%d frames for the client, want %d", len(qd), tc.queued)
			}
			for _, b := range qd {
				if !bytes.Equal(b, tc.data) {
					t.Errorf("the client got % x, want the frame as received", b)
				}
			}
			if tc.drop != 0 {
				if d := tr.drops(); d[tc.drop] != before[tc.drop]+1 {
					t.Errorf("%v: %d, want %d", tc.drop, d[tc.drop], before[tc.drop]+1)
				}
			}
			if tc.want[0] == 1 {
				f := parsed(t, out[idLAN1][0])
				if f.Dst != macA || f.IPv4.Dst != hAIP || f.TCP.DstPort != 40000 {
					t.Errorf("to the LAN: %v %v:%d, want %v %v:40000", f.Dst, f.IPv4.Dst, f.TCP.DstPort, macA, hAIP)
				}
			}
		})
	}

	t.Run("VLAN 7 under the session", func(t *testing.T) {
		tr.setPPPoE(sess, WANVLAN{ID: 7, PCP: 3, ControlPCP: 6})
		out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 10))
		if diff := cmp.Diff([]int{0, 0, 1, 0}, counts(out)); diff != "" {
			t.Fatalf("frames per port (-want +got):\n%s", diff)
		}
		b := out[idWAN][0]
		if tci, ok := outerTCI(b); !ok || tci != 3<<13|7 || binary.BigEndian.Uint16(b[16:]) != EtherTypePPPoESession {
			t.Errorf("tag %#x (%v), EtherType %#x: want the data priority's tag on VLAN 7 over a session frame", tci, ok, binary.BigEndian.Uint16(b[16:]))
		}
		in := tagged(sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, tcp4(rWAN, macAC, remIP, wanIP, 80, natPort, frame.TCPAck, 5)),
			frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 7})
		if diff := cmp.Diff([]int{1, 0, 0, 0}, counts(tr.rx(idWAN, in))); diff != "" {
			t.Errorf("tagged session frame in: frames per port (-want +got):\n%s", diff)
		}
		tr.setPPPoE(sess, WANVLAN{})
	})

	t.Run("no session up", func(t *testing.T) {
		tr.setPPPoE(PPPoESession{}, WANVLAN{})
		defer tr.setPPPoE(sess, WANVLAN{})
		before := tr.drops()[DropPPPoEDown]
		if diff := cmp.Diff([]int{0, 0, 0, 0}, counts(tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 10)))); diff != "" {
			t.Errorf("frames per port (-want +got):\n%s", diff)
		}
		if got := tr.drops()[DropPPPoEDown]; got != before+1 {
			t.Errorf("%v: %d, want %d", DropPPPoEDown, got, before+1)
		}
		if diff := cmp.Diff([]int{0, 0, 0, 0}, counts(tr.rx(idWAN, sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, synAck)))); diff != "" {
			t.Errorf("the old session's frame: frames per port (-want +got):\n%s", diff)
		}
	})
}

// TestWANPPPoENoARP: a router that does not know its gateway ARPs for it;
// on a PPPoE WAN that request never leaves (counted pppoe_down).
func TestWANPPPoENoARP(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, WANVLAN{})
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	if n := len(out[idWAN]); n != 0 {
		t.Errorf("%d frames on the WAN, want none (the ARP request dropped)", n)
	}
	if d := tr.drops()[DropPPPoEDown]; d != 1 {
		t.Errorf("%v: %d, want 1", DropPPPoEDown, d)
	}
}

func TestPPPoEQueueFull(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	q := tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, WANVLAN{})
	padt := append(append(append([]byte(nil), rWAN[:]...), macAC[:]...), 0x88, 0x63, 0x11, 0xa7, 0x12, 0x34, 0, 0)
	for range pppoeQueueFrames + 5 {
		tr.rx(idWAN, padt)
	}
	if n := len(queued(q)); n != pppoeQueueFrames {
		t.Errorf("%d frames queued, want %d", n, pppoeQueueFrames)
	}
	if d := tr.drops()[DropPPPoEQueue]; d != 5 {
		t.Errorf("%v: %d, want 5", DropPPPoEQueue, d)
	}
}

func TestWANPPPoEZeroAllocs(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	q := tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, WANVLAN{})
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	_, _, ip, _ := pppoe.ParseSessionHeader(out[idWAN][0][14:])
	natPort := binary.BigEndian.Uint16(ip[20:])
	tr.rx(idWAN, sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, tcp4(rWAN, macAC, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0)))
	lcp := sessionFrame(rWAN, macAC, testSID, 0xc021, append(make([]byte, 14), 9, 1, 0, 8, 0, 0, 0, 0))
	for _, fr := range []struct {
		name string
		in   uint16
		data []byte
	}{
		{"LAN to the session", idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 100)},
		{"the session to the LAN", idWAN, sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, tcp4(rWAN, macAC, remIP, wanIP, 80, natPort, frame.TCPAck, 100))},
		{"LCP to the client", idWAN, lcp},
		{"another session", idWAN, sessionFrame(rWAN, macAC, 9, pppoe.ProtoIPv4, tcp4(rWAN, macAC, remIP, wanIP, 80, natPort, frame.TCPAck, 100))},
	} {
		t.Run(fr.name, func(t *testing.T) {
			tr.requireNoAllocs(t, fr.in, fr.data, false, frame.VLANTag{}, func() {
				select { // the client's side, which the test's frames keep filling
				case it := <-q.full:
					q.free <- it.buf
				default:
				}
			})
		})
	}
}

// FuzzPPPoESession checks the dataplane's session header parser against
// package pppoe's, the writer against both, and runs the bytes through a
// PPPoE WAN worker (it must not panic).
func FuzzPPPoESession(f *testing.F) {
	f.Add(sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, tcp4(rWAN, macAC, remIP, wanIP, 80, 1024, frame.TCPAck, 3)))
	f.Add([]byte{0x11, 0, 0x12, 0x34, 0, 2, 0, 0x21})
	f.Add([]byte{0x11, 0, 0x12, 0x34, 0, 1, 0xc0, 0x21})
	f.Add(append(append(append([]byte(nil), rWAN[:]...), macAC[:]...), 0x88, 0x63, 0x11, 0x07, 0, 0, 0, 0))
	f.Add(sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv6, frametest.Frame(rWAN, macAC, frame.EtherTypeIPv6,
		frametest.IPv6{Src: [16]byte{0: 0xfe, 1: 0x80, 15: 1}, Dst: [16]byte{0: 0xfe, 1: 0x80, 15: 2}}.UDPPacket(547, 546, []byte{7, 1, 2, 3}))))
	tr := newTestRouter(f, 1024, "")
	tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, WANVLAN{})
	f.Fuzz(func(t *testing.T, b []byte) {
		sid, proto, n, ok := parsePPPoESession(b)
		wsid, wproto, payload, wok := pppoe.ParseSessionHeader(b)
		if ok != wok || ok && (sid != wsid || proto != wproto || n != len(payload)) {
			t.Fatalf("parse: %#x %#x %d %v; package pppoe: %#x %#x %d %v", sid, proto, n, ok, wsid, wproto, len(payload), wok)
		}
		if ok {
			h := make([]byte, pppoeHeaderLen)
			putPPPoESession(h, sid, proto, n)
			if !bytes.Equal(h, b[:pppoeHeaderLen]) {
				t.Errorf("put % x, parsed from % x", h, b[:pppoeHeaderLen])
			}
		}
		tr.rx(idWAN, append([]byte(nil), b...))
		queued(tr.fwds[idWAN].ppp)
		queued(tr.fwds[idWAN].ppp.dhcp6)
	})
}

// TestWANPPPoERouter: with a session in the config, the router is
// point-to-point (natConfig): IPCP's /32, the peer as its gateway, the
// session's MTU; the first SYN from the LAN leaves at once, framed, with
// no ARP before it, its MSS clamped to 1452.
func TestWANPPPoERouter(t *testing.T) {
	peer := [4]byte{10, 255, 0, 1}
	local := [4]byte{100, 64, 0, 5}
	mutate := func(c *Config) {
		natTestConfig(1024)(c)
		c.NAT.WANPPPoE = true
		c.NAT.PPPoESession = PPPoESession{ID: testSID, ACMAC: macAC}
		c.NAT.WANAddr = netip.PrefixFrom(netip.AddrFrom4(local), 32)
		c.NAT.Gateway = netip.AddrFrom4(peer)
		c.NAT.WANMTU = 1492
	}
	b := newTestBridge(t, 3, true, "", false, mutate)
	p := natPorts{wanID: idWAN, lanID: idLAN1, wanMAC: rWAN, lanMAC: rLAN, wanMTU: 1500, lanMTU: 1500}
	r, err := nat.New(b.cfg.natConfig(p))
	if err != nil {
		t.Fatalf("nat.New: %v", err)
	}
	for _, in := range b.ports[1:] {
		b.fwds[in.id].setNAT(r.NewWorker(b.set.Worker(int(in.id)-1)), idWAN, idLAN1, rLAN, 0)
	}
	b.fwds[idWAN].ppp = newPPPoEQueue()
	tr := &testRouter{testBridge: b, r: r, now: natT0}
	tr.rx(idLAN1, frametest.ARPFrame(bcast, macA, 1, macA, hAIP, [6]byte{}, lanIP))

	seg := frametest.TCP{SrcPort: 40000, DstPort: 80, Flags: frame.TCPSyn, Opts: []byte{2, 4, 0x05, 0xb4}}
	syn := frametest.Frame(rLAN, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: hAIP, Dst: remIP}.TCPPacket(seg, nil))
	out := tr.rx(idLAN1, syn)
	if diff := cmp.Diff([]int{0, 0, 1, 0}, counts(out)); diff != "" {
		t.Fatalf("SYN: frames per port (-want +got):\n%s", diff)
	}
	got := out[idWAN][0]
	sid, proto, ip, ok := pppoe.ParseSessionHeader(got[14:])
	if [6]byte(got[0:6]) != macAC || !ok || sid != testSID || proto != pppoe.ProtoIPv4 {
		t.Fatalf("the SYN left as % x, want a session frame to the AC", got[:22])
	}
	f := parsed(t, append(append([]byte(nil), got[:12]...), append([]byte{8, 0}, ip...)...))
	if f.IPv4.Src != local {
		t.Errorf("masqueraded on %v, want IPCP's %v", f.IPv4.Src, local)
	}
	if mss := binary.BigEndian.Uint16(ip[20+20+2:]); mss != 1452 {
		t.Errorf("MSS %d, want 1452", mss)
	}
	reply := frametest.Frame(rWAN, macAC, frame.EtherTypeIPv4, frametest.IPv4{Src: remIP, Dst: local}.TCPPacket(
		frametest.TCP{SrcPort: 80, DstPort: f.TCP.SrcPort, Flags: frame.TCPSyn | frame.TCPAck}, nil))
	if diff := cmp.Diff([]int{1, 0, 0, 0}, counts(tr.rx(idWAN, sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, reply)))); diff != "" {
		t.Errorf("SYN-ACK: frames per port (-want +got):\n%s", diff)
	}
}
