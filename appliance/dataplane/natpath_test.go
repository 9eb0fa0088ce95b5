package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
)

// The NAT test router: LAN ports lan1 (id 1) and lan2 (2), the WAN port
// wan (3), the host port (4, the box's kernel at 192.168.1.2); the router
// is 192.168.1.1 on the LAN and 203.0.113.2 on the WAN, its gateway
// 203.0.113.1.
var (
	rLAN   = [6]byte{0x02, 0, 0, 0, 1, 1}
	rWAN   = [6]byte{0x02, 0, 0, 0, 2, 2}
	macGW  = [6]byte{0x02, 0, 0, 0, 0, 0x99}
	macTap = [6]byte{0x02, 0, 0, 0, 0, 0x44}
	lanIP  = [4]byte{192, 168, 1, 1}
	wanIP  = [4]byte{203, 0, 113, 2}
	gwIP   = [4]byte{203, 0, 113, 1}
	hAIP   = [4]byte{192, 168, 1, 10}
	hBIP   = [4]byte{192, 168, 1, 20}
	tapIP  = [4]byte{192, 168, 1, 2}
	remIP  = [4]byte{198, 51, 100, 7}
)

const (
	idLAN1, idLAN2, idWAN, idHost = 1, 2, 3, 4
	natT0                         = int64(1_700_000_000) * 1e9
)

type testRouter struct {
	*testBridge
	r   *nat.Router
	now int64 // Unix ns, advanced 1 ms per frame
}

func natTestConfig(maxConns int) func(*Config) {
	return func(c *Config) {
		c.Mode = ModeNAT
		c.Ports[0].Role, c.Ports[1].Role, c.Ports[2].Role = RoleLAN, RoleLAN, RoleWAN
		c.Ports[2].Name = "wan"
		c.NAT = &NAT{
			LANAddr:  netip.MustParsePrefix("192.168.1.1/24"),
			WANAddr:  netip.MustParsePrefix("203.0.113.2/24"),
			Gateway:  netip.MustParseAddr("203.0.113.1"),
			MaxConns: maxConns,
			Timeouts: nat.Timeouts{UDPUnreplied: 5},
			Forwards: []nat.PortForward{{Proto: frame.ProtoTCP, Port: 8080, To: netip.AddrPortFrom(netip.AddrFrom4(hAIP), 80)}},
		}
	}
}

func newTestRouter(t testing.TB, maxConns int, ruleText string) *testRouter {
	return newTestRouterHost(t, maxConns, ruleText, 0)
}

// newTestRouterHost is newTestRouter with the router's host port id (0:
// the host port is a LAN host of its own, not the box's stack).
func newTestRouterHost(t testing.TB, maxConns int, ruleText string, host uint16) *testRouter {
	t.Helper()
	b := newTestBridge(t, 3, true, ruleText, false, natTestConfig(maxConns))
	p := natPorts{wanID: idWAN, lanID: idLAN1, hostID: int(host), wanMAC: rWAN, lanMAC: rLAN, wanMTU: 1500, lanMTU: 1500}
	r, err := nat.New(b.cfg.natConfig(p))
	if err != nil {
		t.Fatalf("nat.New: %v", err)
	}
	for _, in := range b.ports[1:] {
		b.fwds[in.id].setNAT(r.NewWorker(b.set.Worker(int(in.id)-1)), idWAN, idLAN1, rLAN, host)
	}
	return &testRouter{testBridge: b, r: r, now: natT0}
}

// rx runs one frame through port in as a batch of one (with the router's
// end-of-batch Tick) and returns the frames each port got, by id.
func (tr *testRouter) rx(in uint16, data []byte) [][][]byte {
	tr.now += 1e6
	tr.clock += 1e6
	w := tr.fwds[in]
	w.begin(tr.now, tr.clock)
	w.handle(data, len(data), false, frame.VLANTag{})
	w.natTick()
	w.dirty = 0
	return tr.sent(in)
}

// sent takes the frames port in's worker queued, by out port id.
func (tr *testRouter) sent(in uint16) [][][]byte {
	out := make([][][]byte, len(tr.ports))
	for id, f := range tr.tx[in] {
		if f == nil {
			continue
		}
		for i := range f.n {
			out[id] = append(out[id], append([]byte(nil), f.slots[i][:f.lens[i]]...))
		}
		f.n = 0
	}
	return out
}

// tick runs an idle tick on port in's worker at the router's clock plus d.
func (tr *testRouter) tick(in uint16, d int64) [][][]byte {
	tr.now += d
	tr.clock += d
	w := tr.fwds[in]
	w.begin(tr.now, tr.clock)
	w.natTick()
	return tr.sent(in)
}

// counts lists how many frames each port (1..4) got.
func counts(out [][][]byte) []int {
	n := make([]int, len(out)-1)
	for id := 1; id < len(out); id++ {
		n[id-1] = len(out[id])
	}
	return n
}

// tcp4, udp4 and icmpEcho are the router tests' IPv4 fixtures: TCP with
// sequence and acknowledgement 1, UDP without a checksum, and an echo
// request with identifier 0x1234, sequence 1 and "ping" as data.
func tcp4(dst, src [6]byte, sip, dip [4]byte, sport, dport uint16, flags uint8, payload int) []byte {
	seg := frametest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Seq: 1, Ack: 1}
	return frametest.Frame(dst, src, frame.EtherTypeIPv4, frametest.IPv4{Src: sip, Dst: dip}.TCPPacket(seg, make([]byte, payload)))
}

func udp4(dst, src [6]byte, sip, dip [4]byte, sport, dport uint16, payload int) []byte {
	ip := frametest.IPv4{Src: sip, Dst: dip}
	return frametest.Frame(dst, src, frame.EtherTypeIPv4, ip.UDPPacketNoChecksum(sport, dport, make([]byte, payload)))
}

func icmpEcho(dst, src [6]byte, sip, dip [4]byte, ttl uint8) []byte {
	ip := frametest.IPv4{Src: sip, Dst: dip, TTL: ttl}
	return frametest.Frame(dst, src, frame.EtherTypeIPv4, ip.ICMPPacket(frame.ICMPEchoRequest, 0, 0x1234<<16|1, []byte("ping")))
}

// parsed parses a frame the router sent.
func parsed(t testing.TB, b []byte) *frame.Frame {
	t.Helper()
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		t.Fatalf("router sent a frame that does not parse: %v", err)
	}
	return &f
}

// resolve makes hosts A (lan1), B (lan2), the host port and the gateway
// known to the router and the LAN segment's FDB.
func (tr *testRouter) resolve(t testing.TB) {
	t.Helper()
	for _, h := range []struct {
		port uint16
		mac  [6]byte
		ip   [4]byte
	}{{idLAN1, macA, hAIP}, {idLAN2, macB, hBIP}, {idHost, macTap, tapIP}} {
		out := tr.rx(h.port, frametest.ARPFrame(bcast, h.mac, 1, h.mac, h.ip, [6]byte{}, lanIP))
		if len(out[h.port]) != 1 {
			t.Fatalf("no ARP reply to %v on port %d: %v", h.ip, h.port, counts(out))
		}
	}
	tr.rx(idWAN, frametest.ARPFrame(rWAN, macGW, 2, macGW, gwIP, rWAN, wanIP)) // unsolicited: not learned
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 999, 9, frame.TCPSyn, 0))
	if len(out[idWAN]) != 1 || parsed(t, out[idWAN][0]).EtherType != frame.EtherTypeARP {
		t.Fatalf("no ARP request for the gateway: %v", counts(out))
	}
	out = tr.rx(idWAN, frametest.ARPFrame(rWAN, macGW, 2, macGW, gwIP, rWAN, wanIP))
	if diff := cmp.Diff([]int{0, 0, 0, 0}, counts(out)); diff != "" {
		t.Fatalf("the gateway's ARP reply (-want +got):\n%s", diff)
	}
	// The SYN waits in lan1's worker, which releases it on its next tick.
	out = tr.tick(idLAN1, 2e6)
	if len(out[idWAN]) != 1 {
		t.Fatalf("queued SYN not released on the WAN after the gateway's ARP reply: %v", counts(out))
	}
}

func TestNATPath(t *testing.T) {
	tr := newTestRouter(t, 1024, "")

	// ARP for the router from lan1: answered on lan1 and bridged to the
	// rest of the LAN segment, never to the WAN.
	out := tr.rx(idLAN1, frametest.ARPFrame(bcast, macA, 1, macA, hAIP, [6]byte{}, lanIP))
	if diff := cmp.Diff([]int{1, 1, 0, 1}, counts(out)); diff != "" {
		t.Fatalf("ARP request for the router: frames per port (-want +got):\n%s", diff)
	}
	if a := parsed(t, out[idLAN1][0]).ARP; a.Op != 2 || a.SenderMAC != rLAN || a.SenderIP != lanIP || a.TargetMAC != macA {
		t.Errorf("ARP reply %+v", a)
	}
	tr.resolve(t)

	// A masqueraded TCP connection, both directions.
	out = tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	if diff := cmp.Diff([]int{0, 0, 1, 0}, counts(out)); diff != "" {
		t.Fatalf("SYN to the internet: frames per port (-want +got):\n%s", diff)
	}
	syn := parsed(t, out[idWAN][0])
	if syn.Src != rWAN || syn.Dst != macGW || syn.IPv4.Src != wanIP || syn.IPv4.TTL != 63 || syn.TCP.DstPort != 80 {
		t.Errorf("masqueraded SYN: eth %v→%v ip %v ttl %d dport %d", syn.Src, syn.Dst, syn.IPv4.Src, syn.IPv4.TTL, syn.TCP.DstPort)
	}
	natPort := syn.TCP.SrcPort
	out = tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0))
	if diff := cmp.Diff([]int{1, 0, 0, 0}, counts(out)); diff != "" {
		t.Fatalf("SYN/ACK back: frames per port (-want +got):\n%s", diff)
	}
	back := parsed(t, out[idLAN1][0])
	if back.Src != rLAN || back.Dst != macA || back.IPv4.Dst != hAIP || back.TCP.DstPort != 40000 {
		t.Errorf("SYN/ACK to the LAN: eth %v→%v ip %v dport %d", back.Src, back.Dst, back.IPv4.Dst, back.TCP.DstPort)
	}
	if err := frame.VerifyChecksums(out[idLAN1][0], back); err != nil {
		t.Errorf("SYN/ACK checksums: %v", err)
	}

	for _, tc := range []struct {
		name  string
		in    uint16
		frame []byte
		want  []int
		drop  Drop
	}{
		{"LAN hosts are bridged", idLAN1, tcp4(macB, macA, hAIP, hBIP, 1, 2, frame.TCPSyn, 0), []int{0, 1, 0, 0}, 0},
		{"the host port reaches LAN hosts", idHost, tcp4(macA, macTap, tapIP, hAIP, 1, 2, frame.TCPSyn, 0), []int{1, 0, 0, 0}, 0},
		{"LAN broadcast floods the segment, not the WAN", idLAN2, udp4(bcast, macB, hBIP, [4]byte{255, 255, 255, 255}, 68, 67, 10), []int{1, 0, 0, 1}, 0},
		{"echo to the router from the host port", idHost, icmpEcho(rLAN, macTap, tapIP, lanIP, 64), []int{0, 0, 0, 1}, 0},
		{"the box routes through the router", idHost, tcp4(rLAN, macTap, tapIP, remIP, 5555, 443, frame.TCPSyn, 0), []int{0, 0, 1, 0}, 0},
		{"TTL 1 gets time exceeded on the ingress port", idLAN2, icmpEcho(rLAN, macB, hBIP, remIP, 1), []int{0, 1, 0, 0}, 0},
		{"WAN frames for other MACs", idWAN, tcp4(macC, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, 0), []int{0, 0, 0, 0}, NATDrop(nat.ReasonNotForUs)},
		{"WAN broadcast is not bridged", idWAN, frametest.ARPFrame(bcast, macGW, 1, macGW, gwIP, [6]byte{}, [4]byte{203, 0, 113, 77}), []int{0, 0, 0, 0}, 0},
		{"TCP to the router's own address", idLAN1, tcp4(rLAN, macA, hAIP, lanIP, 1, 22, frame.TCPSyn, 0), []int{0, 0, 0, 0}, DropNATHost},
		{"TCP to the WAN address, no forward", idWAN, tcp4(rWAN, macGW, remIP, wanIP, 1, 22, frame.TCPSyn, 0), []int{0, 0, 0, 0}, DropNATHost},
		{"IPv6 to the router", idLAN1, frametest.Frame(rLAN, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: [16]byte{0xfe, 0x80, 15: 1}, Dst: [16]byte{0xfe, 0x80, 15: 2}, NextHeader: 59}.Build(nil)), []int{0, 0, 0, 0}, NATDrop(nat.ReasonIPv6)},
		{"ICMP error with a garbled quote", idWAN, frametest.Frame(rWAN, macGW, frame.EtherTypeIPv4,
			frametest.IPv4{Src: remIP, Dst: wanIP}.ICMPPacket(frame.ICMPDestUnreach, 1, 0, []byte{0x45, 0, 0, 1})),
			[]int{0, 0, 0, 0}, NATDrop(nat.ReasonMalformed)},
		{"port forward from the WAN", idWAN, tcp4(rWAN, macGW, remIP, wanIP, 33333, 8080, frame.TCPSyn, 0), []int{1, 0, 0, 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.drops()
			out := tr.rx(tc.in, tc.frame)
			if diff := cmp.Diff(tc.want, counts(out)); diff != "" {
				t.Errorf("frames per port (-want +got):\n%s", diff)
			}
			after := tr.drops()
			for r := range after {
				want := before[r]
				if Drop(r) == tc.drop && tc.drop != 0 {
					want++
				}
				if after[r] != want {
					t.Errorf("drops[%s] = %d, want %d", Drop(r), after[r], want)
				}
			}
		})
	}

	// The port forward went to host A on port 80, from the remote address.
	out = tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 33334, 8080, frame.TCPSyn, 0))
	if len(out[idLAN1]) != 1 {
		t.Fatalf("forwarded SYN: %v", counts(out))
	}
	if f := parsed(t, out[idLAN1][0]); f.IPv4.Dst != hAIP || f.TCP.DstPort != 80 || f.IPv4.Src != remIP || f.Dst != macA {
		t.Errorf("forwarded SYN to %v:%d from %v (eth dst %v)", f.IPv4.Dst, f.TCP.DstPort, f.IPv4.Src, f.Dst)
	}
	// Time exceeded came from the router's LAN address.
	out = tr.rx(idLAN2, icmpEcho(rLAN, macB, hBIP, remIP, 1))
	if f := parsed(t, out[idLAN2][0]); f.IPv4.Src != lanIP || f.ICMP.Type != frame.ICMPTimeExceeded || f.Dst != macB {
		t.Errorf("time exceeded from %v type %d to %v", f.IPv4.Src, f.ICMP.Type, f.Dst)
	}
}

// TestNATQueuedFlood: a frame from the WAN for a LAN host the router has
// not resolved waits for ARP; the ARP request floods the LAN segment and
// the reply, received by another worker, releases the frame on the WAN
// worker's next tick.
func TestNATQueuedRelease(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	// hB is unknown to the router's ARP cache (resolve only answered it),
	// so forward to it through a new port forward.
	cfg := *tr.cfg
	n := *cfg.NAT
	n.Forwards = append(n.Forwards, nat.PortForward{Proto: frame.ProtoUDP, Port: 5000, To: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 168, 1, 30}), 5000)})
	cfg.NAT = &n
	if err := tr.r.Update(cfg.natConfig(natPorts{wanID: idWAN, lanID: idLAN1, wanMAC: rWAN, lanMAC: rLAN, wanMTU: 1500, lanMTU: 1500})); err != nil {
		t.Fatal(err)
	}
	out := tr.rx(idWAN, udp4(rWAN, macGW, remIP, wanIP, 7, 5000, 20))
	if diff := cmp.Diff([]int{1, 1, 0, 1}, counts(out)); diff != "" {
		t.Fatalf("ARP request for 192.168.1.30 (-want +got):\n%s", diff)
	}
	if !tr.fwds[idWAN].nw.Waiting() {
		t.Fatalf("WAN worker holds no queued frame")
	}
	macD := [6]byte{0x02, 0, 0, 0, 0, 0xd}
	out = tr.rx(idLAN2, frametest.ARPFrame(rLAN, macD, 2, macD, [4]byte{192, 168, 1, 30}, rLAN, lanIP))
	if diff := cmp.Diff([]int{0, 0, 0, 0}, counts(out)); diff != "" {
		t.Errorf("ARP reply to the router is not bridged (-want +got):\n%s", diff)
	}
	out = tr.tick(idWAN, 2e6)
	if diff := cmp.Diff([]int{0, 1, 0, 0}, counts(out)); diff != "" {
		t.Fatalf("released frame (-want +got):\n%s", diff)
	}
	if f := parsed(t, out[idLAN2][0]); f.Dst != macD || f.UDP.DstPort != 5000 {
		t.Errorf("released frame to %v port %d", f.Dst, f.UDP.DstPort)
	}
	if tr.fwds[idWAN].nw.Waiting() {
		t.Errorf("still waiting after the release")
	}
}

// TestNATTableFull fills a small table: unreplied connections are
// evicted for new ones, assured ones (streams: traffic after the reply)
// never; with only assured ones left, new connections are dropped as
// table_full.
func TestNATTableFull(t *testing.T) {
	const size = 16
	tr := newTestRouter(t, size, "")
	tr.resolve(t) // one SYN_SENT connection
	tr.r.DeleteConns(nat.Filter{})
	var natPorts []uint16
	for i := range size {
		out := tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, uint16(1000+i), 53, 10))
		f := parsed(t, out[idWAN][0])
		natPorts = append(natPorts, f.UDP.SrcPort)
		tr.rx(idWAN, udp4(rWAN, macGW, remIP, wanIP, 53, f.UDP.SrcPort, 10)) // replied
	}
	tr.now += 3e9 // a stream: traffic past the first reply
	for _, p := range natPorts {
		tr.rx(idWAN, udp4(rWAN, macGW, remIP, wanIP, 53, p, 10))
	}
	if n := tr.r.Stats().Conns; n != size {
		t.Fatalf("%d connections, want %d", n, size)
	}
	before := tr.drops()[NATDrop(nat.ReasonTableFull)]
	out := tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, 2000, 53, 10))
	if len(out[idWAN]) != 0 || tr.drops()[NATDrop(nat.ReasonTableFull)] != before+1 {
		t.Fatalf("new connection in a table of assured ones: sent %v, table_full %d→%d", counts(out), before, tr.drops()[NATDrop(nat.ReasonTableFull)])
	}
	// Free one slot, fill it with an unreplied connection: the next new
	// one evicts it, and every replied one stays.
	tr.r.DeleteConns(nat.Filter{Port: 1000})
	tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, 3000, 53, 10))
	out = tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, 3001, 53, 10))
	if len(out[idWAN]) != 1 {
		t.Fatalf("no eviction of the unreplied connection: %v", counts(out))
	}
	s := tr.r.Stats()
	if s.Evicted != 1 {
		t.Errorf("evicted %d, want 1", s.Evicted)
	}
	for i := 1; i < size; i++ {
		if tr.r.CountConns(nat.Filter{Port: uint16(1000 + i)}) != 1 {
			t.Errorf("replied connection from port %d evicted", 1000+i)
		}
	}
}

func TestNATZeroAllocs(t *testing.T) {
	tr := newTestRouter(t, 1024, "tcp dport 23 drop")
	tr.resolve(t)
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	natPort := parsed(t, out[idWAN][0]).TCP.SrcPort
	tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0))
	frames := []struct {
		name string
		in   uint16
		data []byte
	}{
		{"established LAN to WAN", idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 100)},
		{"established WAN to LAN", idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, 100)},
		{"ARP for the router", idLAN2, frametest.ARPFrame(bcast, macB, 1, macB, hBIP, [6]byte{}, lanIP)},
		{"echo to the router", idLAN1, icmpEcho(rLAN, macA, hAIP, lanIP, 64)},
		{"time exceeded", idLAN1, icmpEcho(rLAN, macA, hAIP, remIP, 1)},
		{"bridged in the segment", idLAN1, tcp4(macB, macA, hAIP, hBIP, 1, 2, frame.TCPAck, 10)},
		{"not for us on the WAN", idWAN, tcp4(macC, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, 0)},
		{"rule drop of a new connection", idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40001, 23, frame.TCPSyn, 0)},
	}
	for _, fr := range frames {
		t.Run(fr.name, func(t *testing.T) {
			tr.requireNoAllocs(t, fr.in, fr.data, false, frame.VLANTag{}, nil)
		})
	}
}

// requireNoAllocs hands the frame data to port in's worker 500 times
// (a fresh copy each time: the router rewrites in place), with a batch's
// begin and tick and its TX ring emptied, then after (if not nil); it
// fails t if that allocates.
func (tr *testRouter) requireNoAllocs(t *testing.T, in uint16, data []byte, stripped bool, tag frame.VLANTag, after func()) {
	t.Helper()
	w := tr.fwds[in]
	buf := make([]byte, len(data))
	allocs := testing.AllocsPerRun(500, func() {
		tr.now += 1e6
		tr.clock += 1e6
		copy(buf, data)
		w.begin(tr.now, tr.clock)
		w.handle(buf, len(buf), stripped, tag)
		w.natTick()
		for _, f := range tr.tx[in] {
			if f != nil {
				f.n = 0
			}
		}
		if after != nil {
			after()
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame", allocs)
	}
}
