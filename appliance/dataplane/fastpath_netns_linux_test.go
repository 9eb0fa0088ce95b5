package dataplane

import (
	"encoding/hex"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/internal/netnstest"
	"e1kbox/rules"
)

// The differential test of the fast path: the same traffic through an
// engine with the fast path and one without, compared byte for byte at
// both ends, with the counters, the connection table and the rules'
// counters.

// fpRun is what one engine made of the traffic.
type fpRun struct {
	at1, at2 []string // hex frames received by h1 and h2, sorted
	ports    []PortStats
	conns    []Conn
	counters []rules.RuleCounter
	policy   uint64
	fast     *FastPathStats
	// IPv6 runs (fastpath6_netns_linux_test.go).
	v6conns []v6Conn
	v6stats route6.Stats
	v6flows int
}

// sortedHex returns the frames as sorted hex strings (the fast path may
// overtake a frame it leaves to the rings: the test compares multisets).
func sortedHex(frames [][]byte) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = hex.EncodeToString(f)
	}
	slices.Sort(out)
	return out
}

// quietTopo is newTopo with the hosts' kernels silent on IPv6 (no
// router solicitations or MLD reports in the captures).
func quietTopo(t *testing.T) *topo {
	tp := newTopo(t, 2)
	for _, h := range tp.hosts {
		h.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv6.conf.eth0.disable_ipv6=1")
	}
	// The router's MACs are the ports': the same in every run.
	tp.box.IP(t, "link", "set", "p1", "address", "02:fa:00:00:01:01")
	tp.box.IP(t, "link", "set", "p2", "address", "02:fa:00:00:01:02")
	return tp
}

// linkMAC returns the MAC of interface name in ns.
func linkMAC(t *testing.T, ns *netnstest.Namespace, name string) [6]byte {
	t.Helper()
	var m [6]byte
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		copy(m[:], ifi.HardwareAddr)
	})
	return m
}

// waitFast waits until the fast path holds n flows (pairs plus NAT flows,
// IPv6 flows and microflows), when it runs.
func waitFast(t *testing.T, e *Engine, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		fs := e.Snapshot().FastPath
		if fs == nil || fs.Mode == "off" || fs.Pairs+fs.NATFlows+fs.IPv6Flows+fs.Microflows >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fast path holds %+v after 3 s, want %d flows", fs, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// compareRuns compares runs with the fast path (each of on) to the run
// without it.
func compareRuns(t *testing.T, off fpRun, on map[FastPathMode]fpRun) {
	t.Helper()
	// Where the rings sit (AfterTCX) follows the fast path's mode
	// (testEngineNAT checks it); what they forward must not.
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		s := p.String()
		return strings.HasSuffix(s, "Ring") || strings.HasSuffix(s, "ExpiresIn") || strings.HasSuffix(s, "AfterTCX")
	}, cmp.Ignore())
	for mode, r := range on {
		if diff := cmp.Diff(off.at1, r.at1); diff != "" {
			t.Errorf("%s: frames received by h1 (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.at2, r.at2); diff != "" {
			t.Errorf("%s: frames received by h2 (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.ports, r.ports, ignore); diff != "" {
			t.Errorf("%s: port counters (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.conns, r.conns, ignore, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
			t.Errorf("%s: connections (-slow path only +with the fast path):\n%s", mode, diff)
		}
		for i := range min(len(off.conns), len(r.conns)) {
			if d := off.conns[i].ExpiresIn - r.conns[i].ExpiresIn; d > Duration(time.Second) || d < -Duration(time.Second) {
				t.Errorf("%s: connection %d expires in %v, %v without the fast path", mode, i, r.conns[i].ExpiresIn, off.conns[i].ExpiresIn)
			}
		}
		if diff := cmp.Diff(off.counters, r.counters, cmp.FilterPath(func(p cmp.Path) bool {
			return strings.HasSuffix(p.String(), "LastHit")
		}, cmp.Ignore())); diff != "" {
			t.Errorf("%s: rule counters (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if off.policy != r.policy {
			t.Errorf("%s: forward policy counted %d frames, %d without the fast path", mode, r.policy, off.policy)
		}
		if r.fast == nil || r.fast.Mode != string(mode) || r.fast.Packets == 0 {
			t.Errorf("%s: the fast path forwarded nothing: %+v", mode, r.fast)
		} else {
			t.Logf("%s: fast path forwarded %d frames; %d installed, punts %v", mode, r.fast.Packets, r.fast.Installed, r.fast.Punts)
		}
	}
	if off.fast == nil || off.fast.Mode != "off" {
		t.Errorf("the fast path ran in the run without it: %+v", off.fast)
	}
}

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
	return collect(t, e, h1, h2)
}

// collect reads an engine's results after the traffic.
func collect(t *testing.T, e *Engine, h1, h2 *netnstest.Packets) fpRun {
	t.Helper()
	h1.Wait(300*time.Millisecond, 3*time.Second)
	e.SyncFastPath() // as the API does before it lists counters
	s := e.Snapshot()
	r := fpRun{at1: sortedHex(h1.Frames()), at2: sortedHex(h2.Frames()), fast: s.FastPath}
	for _, p := range s.Ports {
		p.Ring = RingStats{}
		r.ports = append(r.ports, p)
	}
	_, r.counters = e.Rules().Counters()
	r.policy, _ = e.Rules().PolicyCounter(rules.Forward)
	if e.NAT() != nil {
		page, err := ListConns(e.NAT(), ConnFilter{}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.conns = page.Conns
		for i := range r.conns {
			r.conns[i].ID, r.conns[i].Created = 0, time.Time{}
		}
		// A total order: the table lists its connections in slot order,
		// and its free slots are taken at random.
		slices.SortFunc(r.conns, func(a, b Conn) int {
			if c := strings.Compare(a.Proto, b.Proto); c != 0 {
				return c
			}
			if c := strings.Compare(a.Orig.Src.String(), b.Orig.Src.String()); c != 0 {
				return c
			}
			return strings.Compare(a.Orig.Dst.String(), b.Orig.Dst.String())
		})
	}
	return r
}

// TestFastPathNATDifferential routes the same conversations (TCP, UDP,
// ICMP echo, both ways) through a NAT engine with and without the fast
// path: the frames each side receives, the port counters, the connection
// table (states, counters, timeouts) agree; so do the answers the router
// generates for the frames the fast path leaves to it (time exceeded,
// fragmentation needed, fragments, IP options, FIN and RST).
func TestFastPathNATDifferential(t *testing.T) {
	off := natRun(t, FastPathOff)
	on := map[FastPathMode]fpRun{FastPathTCX: natRun(t, FastPathTCX, harvestTurns), FastPathXDP: natRun(t, FastPathXDP)}
	compareRuns(t, off, on)
}

var (
	fpLANHost = netip.MustParseAddr("10.42.0.77")
	fpServer  = netip.MustParseAddr("198.51.100.9")
	fpWANAddr = netip.MustParseAddr("10.43.0.2")
	fpGateway = netip.MustParseAddr("10.43.0.1")
	fpGwMAC   = [6]byte{0x02, 0xfa, 0, 0, 0, 0x99}
)

// natRun runs the NAT conversations through an engine with fast path
// mode. The hosts' kernels have no addresses: the test's own sockets are
// the LAN host A (10.42.0.77) and the WAN gateway G, which also plays
// the server beyond it.
func natRun(t *testing.T, mode FastPathMode, checks ...func(*testing.T, *Engine)) fpRun {
	t.Helper()
	tp := quietTopo(t)
	for _, h := range tp.hosts {
		h.IP(t, "addr", "flush", "dev", "eth0")
	}
	cfg := &Config{
		Mode:     ModeNAT,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN, MTU: 1400}},
		FastPath: mode,
		Bridge:   Bridge{NoLoopProtect: true}, // no loop probes of random nonces on the LAN
		NAT: &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			Gateway: fpGateway},
	}
	e := tp.engine(cfg)
	lanMAC, wanMAC := linkMAC(t, tp.box, "p1"), linkMAC(t, tp.box, "p2")
	h1 := tp.hosts[0].OpenPackets(t, "eth0", true)
	h2 := tp.hosts[1].OpenPackets(t, "eth0", true)
	// The router learns A and G from their ARP requests for its addresses.
	h1.Send(t, frametest.ARPFrame(bcast, fpHostA, 1, fpHostA, fpLANHost.As4(), [6]byte{}, [4]byte{10, 42, 0, 254}))
	h2.Send(t, frametest.ARPFrame(bcast, fpGwMAC, 1, fpGwMAC, fpGateway.As4(), [6]byte{}, fpWANAddr.As4()))
	c := natConv{&conv{t: t, r: rand.New(rand.NewPCG(9, 9)), lanMAC: lanMAC, wanMAC: wanMAC, h1: h1, h2: h2,
		etherType: frame.EtherTypeIPv4, outIP: fpOutIP, inIP: fpInIP, echoReq: frame.ICMPEchoRequest, echoRe: frame.ICMPEchoReply, pad: true}}
	c.open()
	time.Sleep(2100 * time.Millisecond) // UDP becomes a stream (assured) with the next packets
	c.exchange(1)
	// A flow whose offer the manager judged before the connection was
	// assured (a busy machine delays the answer or the manager) is
	// offered again by its next packet after offload.Reoffer.
	time.Sleep(offload.Reoffer + 100*time.Millisecond)
	c.exchange(1)
	waitFast(t, e, 6)
	c.exchange(60)
	h2.Wait(100*time.Millisecond, 2*time.Second)
	for _, check := range checks {
		check(t, e)
	}
	c.exceptions()
	c.blast(300)
	c.close()
	h2.Wait(300*time.Millisecond, 5*time.Second)
	run := collect(t, e, h1, h2)
	// The router's ARP requests go out on its own timers (how many
	// retries before G's request taught it G's MAC varies between runs):
	// they are left out of the frames and the ports' TX counters.
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
	run.at1, run.at2 = noARP(run.at1, &run.ports[0]), noARP(run.at2, &run.ports[1])
	return run
}

// harvestTurns checks the harvest's two passes once the flows are quiet:
// Snapshot's port counters need no sync (the count pass runs for it), and
// within offload.MaxTurns harvests every flow's counts are in conntrack (the
// turn pass reached each), so that a sync then changes nothing.
func harvestTurns(t *testing.T, e *Engine) {
	t.Helper()
	ports := func() []PortStats {
		var out []PortStats
		for _, p := range e.Snapshot().Ports {
			p.Ring = RingStats{}
			out = append(out, p)
		}
		return out
	}
	conns := func() []Conn {
		page, err := ListConns(e.NAT(), ConnFilter{}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range page.Conns {
			page.Conns[i].ExpiresIn = 0
		}
		return page.Conns
	}
	before := ports()
	time.Sleep((offload.MaxTurns + 1) * offload.HarvestInterval)
	unsynced := conns()
	e.SyncFastPath()
	if diff := cmp.Diff(ports(), before); diff != "" {
		t.Errorf("Snapshot's port counters before a sync (-synced +before):\n%s", diff)
	}
	if diff := cmp.Diff(conns(), unsynced, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
		t.Errorf("connections %d harvests after the last frame (-synced +before the sync):\n%s", offload.MaxTurns+1, diff)
	}
}

// natConv is the NAT test's conversations (IPv4, padded frames).
type natConv struct{ *conv }

var (
	fpOutIP = frametest.IPv4{Src: fpLANHost.As4(), Dst: fpServer.As4(), TTL: 64}
	fpInIP  = frametest.IPv4{Src: fpServer.As4(), Dst: fpWANAddr.As4(), TTL: 50}
)

// exchange sends n rounds of data of every flow both ways, with UDP
// without a checksum among A's.
func (c natConv) exchange(n int) {
	c.conv.exchange(n, func() []byte { return c.out(fpOutIP.UDPPacketNoChecksum(5353, 53, c.payload(64))) })
}

// blast sends n damaged frames of the flows both ways.
func (c natConv) blast(n int) { c.conv.blast(n, blast) }

// exceptions sends frames of the established flows that the fast path
// must leave to the router.
func (c natConv) exceptions() {
	ttl1 := fpOutIP
	ttl1.TTL = 1
	opts := fpOutIP
	opts.Opts = []byte{1, 1, 1, 0}
	frag := fpOutIP
	frag.MF, frag.ID = true, 4242
	df := fpOutIP
	df.DF = true
	bad := c.out(fpOutIP.UDPPacket(5353, 53, c.payload(40)))
	bad[14+10] ^= 0xff // IPv4 header checksum
	other := c.out(fpOutIP.UDPPacket(5353, 53, c.payload(40)))
	other[0] ^= 0x02 // not the router's MAC
	c.step([][]byte{
		c.out(ttl1.UDPPacket(5353, 53, c.payload(40))),         // time exceeded
		c.out(opts.UDPPacket(5353, 53, c.payload(40))),         // options: forwarded by the router
		c.out(frag.UDPPacket(5353, 53, make([]byte, 64))),      // a first fragment
		c.out(df.UDPPacket(5353, 53, make([]byte, 1380))),      // over the WAN MTU of 1400 with DF: fragmentation needed
		c.out(fpOutIP.UDPPacket(5353, 53, make([]byte, 1380))), // without DF: dropped (too big)
		bad, other,
	}, nil)
}

// blast returns n frames made from good by random damage: truncated,
// bytes flipped in the headers, lengths and checksums wrong.
func blast(r *rand.Rand, good [][]byte, n int) [][]byte {
	out := make([][]byte, 0, n)
	for range n {
		b := slices.Clone(good[r.IntN(len(good))])
		switch r.IntN(4) {
		case 0: // truncated
			b = b[:14+r.IntN(len(b)-14)]
		case 1: // a header byte
			b[14+r.IntN(min(40, len(b)-14))] ^= byte(1 << r.IntN(8))
		case 2: // the IPv4 total length or the UDP length
			at := []int{16, 17, 38, 39}[r.IntN(4)]
			if at < len(b) {
				b[at] = byte(r.Uint32())
			}
		default: // two damages
			b[14+r.IntN(min(40, len(b)-14))] = byte(r.Uint32())
			b[14+r.IntN(min(40, len(b)-14))] = byte(r.Uint32())
		}
		if len(b) < 60 && r.IntN(2) == 0 {
			b = frametest.Pad(b)
		}
		out = append(out, b)
	}
	return out
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
