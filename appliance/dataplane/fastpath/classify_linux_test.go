package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/internal/testenv"
)

var (
	lanHost = [4]byte{192, 168, 1, 10}
	server  = [4]byte{198, 51, 100, 9}
	wanAddr = [4]byte{203, 0, 113, 1}
)

// natUDP is a UDP frame of the flow natFlow installs.
func natUDP(mod func(*frametest.IPv4), payload int) []byte {
	return natUDPFrom(40000, mod, payload)
}

// natUDPFrom is natUDP's frame from source port sport.
func natUDPFrom(sport uint16, mod func(*frametest.IPv4), payload int) []byte {
	h := frametest.IPv4{Src: lanHost, Dst: server, TTL: 64}
	if mod != nil {
		mod(&h)
	}
	return frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, h.UDPPacket(sport, 53, make([]byte, payload))))
}

func natTCP(flags uint8) []byte {
	h := frametest.IPv4{Src: lanHost, Dst: server, TTL: 64}
	return frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4,
		h.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: 1000, Ack: 2000, Flags: flags, Window: 512}, nil)))
}

func natFlow() NATFlow {
	return NATFlow{DstMAC: gwMAC, SrcMAC: routerWAN, InDstMAC: routerLAN, InSrcMAC: hostMAC, CheckSrcMAC: true,
		Src: wanAddr, Dst: server, SrcPort: 1024, DstPort: 53, OutIfindex: 3, Slot: 5, MaxFrame: 1514, MaxIP: 1500}
}

// TestPunts checks that the frames the slow path must see (it drops them,
// answers them or changes the connection's state for them) are left to it,
// each counted under its reason, and that the others are forwarded.
func TestPunts(t *testing.T) {
	udpKey := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	tcpKey := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	setCsum := func(b []byte, v uint16) []byte { binary.BigEndian.PutUint16(b[14+10:], v); return b }
	setMAC := func(b []byte, at int, m [6]byte) []byte { copy(b[at:], m[:]); return b }
	tagged := func(b []byte) []byte {
		return frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, b[14:], frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 5})
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		flow  func(*NATFlow)
		want  Punt // -1: forwarded
	}{
		{"udp", natUDP(nil, 10), nil, -1},
		{"tcp ack", natTCP(frame.TCPAck), nil, -1},
		{"tcp psh ack ece", natTCP(frame.TCPAck | frame.TCPPsh | frame.TCPEce), nil, -1},
		{"tcp syn", natTCP(frame.TCPSyn), nil, PuntTCP},
		{"tcp syn ack", natTCP(frame.TCPSyn | frame.TCPAck), nil, PuntTCP},
		{"tcp fin ack", natTCP(frame.TCPFin | frame.TCPAck), nil, PuntTCP},
		{"tcp rst", natTCP(frame.TCPRst), nil, PuntTCP},
		{"tcp rst ack", natTCP(frame.TCPRst | frame.TCPAck), nil, PuntTCP},
		{"tcp no ack", natTCP(frame.TCPPsh), nil, PuntTCP},
		{"ttl 1", natUDP(func(h *frametest.IPv4) { h.TTL = 1 }, 10), nil, PuntTTL},
		{"ttl 0", natUDP(func(h *frametest.IPv4) { h.ZeroTTL = true }, 10), nil, PuntTTL},
		// Without a fixed header the program does not look for a NAT
		// flow: the frame is no flow's (a miss).
		{"ip options", natUDP(func(h *frametest.IPv4) { h.Opts = []byte{1, 1, 1, 0} }, 10), nil, PuntMiss},
		{"first fragment", natUDP(func(h *frametest.IPv4) { h.MF = true }, 16), nil, PuntFrag},
		{"later fragment", natUDP(func(h *frametest.IPv4) { h.FragOff = 3 }, 16), nil, PuntFrag},
		{"bad header checksum", setCsum(natUDP(nil, 10), 0x1234), nil, PuntChecksum},
		{"total length past the frame", natUDP(func(h *frametest.IPv4) { h.TotalLen = 200 }, 10), nil, PuntIP},
		{"total length under the header", natUDP(func(h *frametest.IPv4) { h.TotalLen = 19 }, 10), nil, PuntIP},
		{"bad version", natUDP(func(h *frametest.IPv4) { h.Version = 5 }, 10), nil, PuntMiss},
		{"too big for the egress", natUDP(nil, 100), func(f *NATFlow) { f.MaxIP = 120 }, PuntMTU},
		{"too big for the ingress", natUDP(nil, 100), func(f *NATFlow) { f.MaxFrame = 100 }, PuntMTU},
		{"at the egress MTU", natUDP(nil, 92), func(f *NATFlow) { f.MaxIP = 120 }, -1},
		{"not the router's MAC", setMAC(natUDP(nil, 10), 0, [6]byte{2, 1, 2, 3, 4, 5}), nil, PuntMAC},
		{"another source MAC", setMAC(natUDP(nil, 10), 6, [6]byte{2, 1, 2, 3, 4, 5}), nil, PuntMAC},
		{"another source MAC, unchecked", setMAC(natUDP(nil, 10), 6, [6]byte{2, 1, 2, 3, 4, 5}), func(f *NATFlow) { f.CheckSrcMAC = false }, -1},
		{"group source MAC", setMAC(natUDP(nil, 10), 6, [6]byte{3, 1, 2, 3, 4, 5}), func(f *NATFlow) { f.CheckSrcMAC = false }, PuntEther},
		{"zero source MAC", setMAC(natUDP(nil, 10), 6, [6]byte{}), func(f *NATFlow) { f.CheckSrcMAC = false }, PuntEther},
		{"inline VLAN tag", tagged(natUDP(nil, 10)), nil, PuntEther},
		{"other flow", natUDP(func(h *frametest.IPv4) { h.Dst = [4]byte{1, 1, 1, 1} }, 10), nil, PuntMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, ModeTCX)
			fl := natFlow()
			if tc.flow != nil {
				tc.flow(&fl)
			}
			for _, k := range []NATKey{udpKey, tcpKey} {
				fl.DstPort = k.DstPort
				if err := p.PutNAT(k, fl); err != nil {
					t.Fatal(err)
				}
			}
			ret, out := run(t, p.progs.TCX, tc.frame)
			punts, err := p.Punts()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want < 0 {
				if ret != retRedirect {
					t.Fatalf("returned %d, want a redirect; punts %v", int32(ret), punts)
				}
				return
			}
			if ret != retTCXNext {
				t.Fatalf("returned %d, want TCX_NEXT (slow path)", int32(ret))
			}
			if !bytes.Equal(out, tc.frame) {
				t.Errorf("a punted frame was changed:\nin  % x\nout % x", tc.frame, out)
			}
			want := [NumPunts]uint64{}
			want[tc.want] = 1
			if punts != want {
				t.Errorf("punts %v, want one %s", punts, tc.want)
			}
		})
	}
}

// TestStatsAndTracking checks the per-flow counters and the TCP tracking
// a forwarded frame leaves.
func TestStatsAndTracking(t *testing.T) {
	p := load(t, ModeTCX)
	k := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	fl := natFlow()
	if err := p.ResetStats(fl.Slot); err != nil {
		t.Fatal(err)
	}
	if err := p.PutNAT(k, fl); err != nil {
		t.Fatal(err)
	}
	fr := natTCP(frame.TCPAck)
	for range 3 {
		if ret, _ := run(t, p.progs.TCX, fr); ret != retRedirect {
			t.Fatalf("returned %d", int32(ret))
		}
	}
	st := make([]Stats, p.Slots())
	if err := p.NewStatsReader().Read(st); err != nil {
		t.Fatal(err)
	}
	s := st[fl.Slot]
	if s.Packets != 3 || s.Bytes != 3*uint64(len(fr)) || s.L3Bytes != 3*40 || s.Last == 0 {
		t.Errorf("slot %d: %+v, want 3 packets, %d bytes, 120 IP bytes, a last time", fl.Slot, s, 3*len(fr))
	}
	tr, ok, err := p.NATTrack(k)
	if err != nil || !ok || tr != (TCPTrack{Seen: true, Ack: 2000, Win: 512}) {
		t.Errorf("NATTrack = %+v, %v, %v; want ack 2000 window 512", tr, ok, err)
	}
	if err := p.ResetStats(fl.Slot); err != nil {
		t.Fatal(err)
	}
	if err := p.NewStatsReader().Read(st); err != nil || st[fl.Slot] != (Stats{}) {
		t.Errorf("after ResetStats: %+v, %v", st[fl.Slot], err)
	}
}

// TestStatsPerCPU checks the stats array's layout: a CPU counts a slot's
// frames in its own part of the array, Read sums the parts (the latest
// time wins) and ResetStats zeroes every part.
func TestStatsPerCPU(t *testing.T) {
	p := load(t, ModeTCX)
	k := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	fl := natFlow()
	if err := p.PutNAT(k, fl); err != nil {
		t.Fatal(err)
	}
	fr := natTCP(frame.TCPAck)
	cpus := min(p.ncpu, runtime.NumCPU())
	if cpus < 2 {
		testenv.Unavailable(t, "the test needs two CPUs")
	}
	// CPU c forwards c+1 frames.
	for c := range cpus {
		err := onCPU(c, func() error {
			for range c + 1 {
				if ret, _, err := tryRun(p.progs.TCX, fr); err != nil || ret != retRedirect {
					return fmt.Errorf("returned %d, %v; want a redirect", int32(ret), err)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("CPU %d: %v", c, err)
		}
	}
	want := uint64(0)
	for c := range cpus {
		got := p.stats.flow[c*p.slots+int(fl.Slot)]
		if got.Packets != uint64(c+1) || got.Bytes != uint64((c+1)*len(fr)) {
			t.Errorf("CPU %d's part: %d packets, %d bytes; want %d, %d", c, got.Packets, got.Bytes, c+1, (c+1)*len(fr))
		}
		want += uint64(c + 1)
	}
	// Slot 0 of each CPU's part is nobody's.
	for c := range p.ncpu {
		if got := p.stats.flow[c*p.slots]; got != (fastpathFlowStats{}) {
			t.Errorf("CPU %d's slot 0: %+v, want zero", c, got)
		}
	}
	st := make([]Stats, p.Slots())
	if err := p.NewStatsReader().Read(st); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for c := range cpus {
		last = max(last, p.stats.flow[c*p.slots+int(fl.Slot)].Last)
	}
	if s := st[fl.Slot]; s.Packets != want || s.Bytes != want*uint64(len(fr)) || s.L3Bytes != want*40 || s.Last != int64(last) {
		t.Errorf("Read: %+v; want %d packets, %d bytes, %d IP bytes, last %d", s, want, want*uint64(len(fr)), want*40, last)
	}
	if err := p.ResetStats(fl.Slot); err != nil {
		t.Fatal(err)
	}
	for c := range p.ncpu {
		if got := p.stats.flow[c*p.slots+int(fl.Slot)]; got != (fastpathFlowStats{}) {
			t.Errorf("after ResetStats, CPU %d's part: %+v", c, got)
		}
	}
	if err := p.ResetStats(uint32(p.Slots())); err == nil {
		t.Error("ResetStats(Slots()) succeeded, want an error")
	}
}

// onCPU runs f on a thread pinned to cpu and returns its error.
func onCPU(cpu int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pinning to CPU %d: %w", cpu, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// TestBridge checks pairs and microflows: a pair forwards frames of its
// MACs as they are (L2Only), or only those of its installed microflows;
// frames the slow path's parser refuses stay with the slow path.
func TestBridge(t *testing.T) {
	a, b := [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}
	v4 := frametest.IPv4{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, TTL: 1} // TTL 1 is the NAT's business, not the bridge's
	v6 := frametest.IPv6{Src: [16]byte{0xfd, 15: 1}, Dst: [16]byte{0xfd, 15: 2}}
	udp4 := frametest.Pad(frametest.Frame(b, a, frame.EtherTypeIPv4, v4.UDPPacket(1000, 2000, []byte("hello"))))
	udp4other := frametest.Pad(frametest.Frame(b, a, frame.EtherTypeIPv4, v4.UDPPacket(1000, 2001, []byte("hello"))))
	udp6 := frametest.Frame(b, a, frame.EtherTypeIPv6, v6.UDPPacket(1000, 2000, []byte("hello")))
	icmp4 := frametest.Pad(frametest.Frame(b, a, frame.EtherTypeIPv4, v4.ICMPPacket(8, 0, 1, nil)))
	badUDP := bytes.Clone(udp4)
	binary.BigEndian.PutUint16(badUDP[14+20+4:], 200) // UDP length past the packet
	arp := frametest.Pad(frametest.ARPFrame(b, a, 2, a, [4]byte{10, 0, 0, 1}, b, [4]byte{10, 0, 0, 2}))
	pk := PairKey{Ifindex: 1, Dst: b, Src: a}
	micro := MicroKey{Pair: 9, EtherType: frame.EtherTypeIPv4, Proto: frame.ProtoUDP, SrcPort: 1000, DstPort: 2000,
		Src: [16]byte{10, 0, 0, 1}, Dst: [16]byte{10, 0, 0, 2}}
	for _, tc := range []struct {
		name   string
		l2only bool
		frame  []byte
		want   Punt // -1: forwarded
	}{
		{"l2only udp4", true, udp4, -1},
		{"l2only udp6", true, udp6, -1},
		{"l2only icmp", true, icmp4, -1},
		{"l2only arp", true, arp, PuntEther},
		{"l2only bad udp length", true, badUDP, PuntIP},
		{"microflow", false, udp4, -1},
		{"other microflow", false, udp4other, PuntMiss},
		{"no microflow for icmp", false, icmp4, PuntMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, ModeTCX)
			if err := p.PutPair(pk, Pair{OutIfindex: 4, Slot: 9, MaxWire: 1514, L2Only: tc.l2only}); err != nil {
				t.Fatal(err)
			}
			if err := p.PutMicro(micro, 10); err != nil {
				t.Fatal(err)
			}
			ret, out := run(t, p.progs.TCX, tc.frame)
			punts, _ := p.Punts()
			if tc.want < 0 {
				if ret != retRedirect || !bytes.Equal(out, tc.frame) {
					t.Fatalf("returned %d (punts %v), frame changed %v; want a redirect of the frame as it is", int32(ret), punts, !bytes.Equal(out, tc.frame))
				}
				st := make([]Stats, 11)
				p.NewStatsReader().Read(st)
				if st[9].Packets != 1 || tc.l2only == (st[10].Packets == 1) {
					t.Errorf("pair slot %+v, microflow slot %+v", st[9], st[10])
				}
				return
			}
			want := [NumPunts]uint64{}
			want[tc.want] = 1
			if ret != retTCXNext || punts != want {
				t.Errorf("returned %d, punts %v; want the slow path, one %s", int32(ret), punts, tc.want)
			}
		})
	}
}

// TestTrackingStartsFromTheRouters: a flow installed with the router's
// highest acknowledgment (NATFlow.Ack) tracks on from it, as the router
// would: a frame whose acknowledgment is behind it does not lower it, and
// one ahead raises it; without one, the first frame's counts.
func TestTrackingStartsFromTheRouters(t *testing.T) {
	p := load(t, ModeTCX)
	k := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 443, Proto: frame.ProtoTCP}
	withAck := func(ack uint32) []byte {
		h := frametest.IPv4{Src: lanHost, Dst: server, TTL: 64}
		return frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4,
			h.TCPPacket(frametest.TCP{SrcPort: 40000, DstPort: 443, Seq: 1000, Ack: ack, Flags: frame.TCPAck, Window: 512}, nil)))
	}
	for _, tc := range []struct {
		name   string
		seeded uint32
		acks   []uint32
		want   uint32
	}{
		{"none: the first frame's", 0, []uint32{2000}, 2000},
		{"behind the router's", 5000, []uint32{2000}, 5000},
		{"far behind (a damaged frame), then ahead", 5000, []uint32{5000 + 1<<31 + 7, 6000}, 6000},
		{"ahead", 5000, []uint32{5500, 5400}, 5500},
		// Further ahead than the other side can have sent (its window
		// is 512 here; at least nat.AckAdvance): damaged, not taken.
		{"too far ahead (a damaged frame), then ahead", 5000, []uint32{5000 + 1<<20, 5100}, 5100},
		{"as far ahead as the router takes", 5000, []uint32{5000 + nat.AckAdvance}, 5000 + nat.AckAdvance},
	} {
		fl := natFlow()
		fl.Ack = tc.seeded
		if err := p.PutNAT(k, fl); err != nil {
			t.Fatal(err)
		}
		for _, a := range tc.acks {
			if ret, _ := run(t, p.progs.TCX, withAck(a)); ret != retRedirect {
				t.Fatalf("%s: returned %d", tc.name, int32(ret))
			}
		}
		tr, ok, err := p.NATTrack(k)
		if err != nil || !ok || tr != (TCPTrack{Seen: true, Ack: tc.want, Win: 512}) {
			t.Errorf("%s: NATTrack = %+v, %v, %v; want ack %d window 512", tc.name, tr, ok, err, tc.want)
		}
	}
}

// TestLiveGate: the programs look up the NAT and IPv6 flow maps only once
// userspace has put a flow of that kind (the live map), so that a bridge's
// frames skip them; a closed gate leaves even an installed flow's frames
// to the slow path, an open one forwards them.
func TestLiveGate(t *testing.T) {
	natKey := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	r6Key := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	for _, tc := range []struct {
		name  string
		put   func(p *Program) error
		frame []byte
		open  liveFlags
	}{
		{"nat", func(p *Program) error { return p.PutNAT(natKey, natFlow()) }, natUDP(nil, 10), liveFlags{NAT: 1}},
		{"ipv6", func(p *Program) error { return p.PutIPv6(r6Key, r6Flow()) }, r6UDP(nil, 10), liveFlags{IPv6: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, ModeTCX)
			var got liveFlags
			if err := p.maps.Live.Lookup(uint32(0), &got); err != nil || got != (liveFlags{}) {
				t.Fatalf("live map after Load: %+v, %v; want closed", got, err)
			}
			if err := tc.put(p); err != nil {
				t.Fatal(err)
			}
			if err := p.maps.Live.Lookup(uint32(0), &got); err != nil || got != tc.open {
				t.Fatalf("live map after the first flow: %+v, %v; want %+v", got, err, tc.open)
			}
			if ret, _ := run(t, p.progs.TCX, tc.frame); ret != retRedirect {
				t.Errorf("gate open: returned %d, want a redirect", int32(ret))
			}
			if err := p.maps.Live.Put(uint32(0), &liveFlags{}); err != nil {
				t.Fatal(err)
			}
			ret, _ := run(t, p.progs.TCX, tc.frame)
			punts, _ := p.Punts()
			if ret != retTCXNext || punts[PuntMiss] != 1 {
				t.Errorf("gate closed: returned %d, punts %v; want the slow path, one miss", int32(ret), punts)
			}
		})
	}
}
