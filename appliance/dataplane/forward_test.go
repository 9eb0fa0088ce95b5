package dataplane

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/rules"
)

// got lists the port ids that received a frame.
func got(out [][]byte) []int {
	ids := []int{}
	for id, b := range out {
		if b != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestForwarding(t *testing.T) {
	// Three data ports (1..3) and the host port (4).
	tag10 := frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 10}
	tests := []struct {
		name     string
		rules    string
		mutate   func(*Config)
		setup    func(b *testBridge)
		in       uint16
		frame    func(t testing.TB) []byte
		stripped *frame.VLANTag
		wantOut  []int
		wantDrop map[Drop]uint64
	}{
		{name: "broadcast floods every other port", in: 1,
			frame: func(testing.TB) []byte { return arpFrame(bcast, macA) }, wantOut: []int{2, 3, 4}},
		{name: "unknown unicast floods", in: 2,
			frame: func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) }, wantOut: []int{1, 3, 4}},
		{name: "known unicast goes to its port only", in: 1,
			setup: func(b *testBridge) { b.rx(3, arpFrame(bcast, macB), false, frame.VLANTag{}) },
			frame: func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) }, wantOut: []int{3}},
		{name: "destination on the ingress port is filtered", in: 1,
			setup:   func(b *testBridge) { b.rx(1, arpFrame(bcast, macB), false, frame.VLANTag{}) },
			frame:   func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) },
			wantOut: []int{}, wantDrop: map[Drop]uint64{DropLocal: 1}},
		{name: "a MAC that moves is followed", in: 1,
			setup: func(b *testBridge) {
				b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
				b.rx(3, arpFrame(bcast, macB), false, frame.VLANTag{})
			},
			frame: func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) }, wantOut: []int{3}},
		{name: "the host port's traffic is bridged like any other", in: 4,
			setup: func(b *testBridge) { b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{}) },
			frame: func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) }, wantOut: []int{2}},
		{name: "stripped VLAN tag learned per VLAN", in: 1, stripped: &tag10,
			setup: func(b *testBridge) { b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{}) }, // macB in VLAN 0 only
			frame: func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) }, wantOut: []int{2, 3, 4}},
		{name: "link-local multicast is not forwarded", in: 1,
			frame: func(testing.TB) []byte {
				return frametest.Frame([6]byte{0x01, 0x80, 0xc2, 0, 0, 0}, macA, 0x0026, make([]byte, 46))
			},
			wantOut: []int{}, wantDrop: map[Drop]uint64{DropLinkLocal: 1}},
		{name: "multicast source is dropped", in: 1,
			frame:   func(testing.TB) []byte { return arpFrame(bcast, [6]byte{0x01, 0, 0x5e, 0, 0, 1}) },
			wantOut: []int{}, wantDrop: map[Drop]uint64{DropBadSource: 1}},
		{name: "VID 4095 is a bad VLAN", in: 1,
			frame: func(testing.TB) []byte {
				return frametest.Frame(bcast, macA, frame.EtherTypeARP, make([]byte, 28), frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 0xfff})
			},
			wantOut: []int{}, wantDrop: map[Drop]uint64{Drop(frame.ReasonBadVLAN): 1}},
		{name: "runt is truncated", in: 1,
			frame: func(testing.TB) []byte { return macA[:] }, wantOut: []int{}, wantDrop: map[Drop]uint64{Drop(frame.ReasonTruncated): 1}},
		{name: "oversize on ingress", in: 1,
			frame:   func(testing.TB) []byte { return udpFrame(bcast, macA, 9, 1500) },
			wantOut: []int{}, wantDrop: map[Drop]uint64{DropOversize: 1}},
		{name: "jumbo forwarded between jumbo ports, dropped towards a small MTU", in: 1,
			mutate: func(c *Config) { c.Ports[0].MTU = 9000; c.Ports[2].MTU = 9000 },
			frame:  func(testing.TB) []byte { return udpFrame(bcast, macA, 9, 8000) },
			// port 2 (1500) and the host port (1500) are too small
			wantOut: []int{3}, wantDrop: map[Drop]uint64{DropOversize: 2}},
		// Forward-chain rules do not see the host port's copy (chain input).
		{name: "rule drop", in: 1, rules: "ip daddr 10.0.0.2 tcp dport 22 drop",
			frame:   func(testing.TB) []byte { return tcpFrame(bcast, macA, 1000, 22, frame.TCPSyn) },
			wantOut: []int{4}, wantDrop: map[Drop]uint64{DropRule: 2}},
		{name: "rule per out port on a flood", in: 1, rules: "oif p3 drop",
			frame:   func(testing.TB) []byte { return arpFrame(bcast, macA) },
			wantOut: []int{2, 4}, wantDrop: map[Drop]uint64{DropRule: 1}},
		{name: "input chain guards the host port", in: 1, rules: "chain input\nether type arp drop",
			frame:   func(testing.TB) []byte { return arpFrame(bcast, macA) },
			wantOut: []int{2, 3}, wantDrop: map[Drop]uint64{DropRule: 1}},
		{name: "output chain guards what the host sends", in: 4, rules: "chain output\niif host oif p2 drop",
			frame:   func(testing.TB) []byte { return arpFrame(bcast, macA) },
			wantOut: []int{1, 3}, wantDrop: map[Drop]uint64{DropRule: 1}},
		{name: "vlan rule sees the stripped tag", in: 1, rules: "vlan id 10 drop", stripped: &tag10,
			frame:   func(testing.TB) []byte { return arpFrame(bcast, macA) },
			wantOut: []int{4}, wantDrop: map[Drop]uint64{DropRule: 2}},
		{name: "reject of a broadcast is not answered", in: 1, rules: "tcp dport 23 reject",
			frame:   func(testing.TB) []byte { return tcpFrame(bcast, macA, 1000, 23, frame.TCPSyn) },
			wantOut: []int{4}, wantDrop: map[Drop]uint64{DropReject: 2}},
		{name: "reject of a flooded unknown unicast answers once", in: 1, rules: "tcp dport 23 reject",
			frame:   func(testing.TB) []byte { return tcpFrame(macC, macA, 1000, 23, frame.TCPSyn) },
			wantOut: []int{1, 4}, wantDrop: map[Drop]uint64{DropReject: 2}},
		{name: "reject of a unicast answers the source", in: 1, rules: "tcp dport 23 reject",
			setup:   func(b *testBridge) { b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{}) },
			frame:   func(testing.TB) []byte { return tcpFrame(macB, macA, 1000, 23, frame.TCPSyn) },
			wantOut: []int{1}, wantDrop: map[Drop]uint64{DropReject: 1}},
		{name: "link down: unicast dropped, floods skip it", in: 1,
			setup: func(b *testBridge) {
				b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
				b.ports[2].up.Store(false)
			},
			frame:   func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) },
			wantOut: []int{}, wantDrop: map[Drop]uint64{DropPortDown: 1}},
		{name: "noFlood port gets no floods", in: 1,
			mutate:  func(c *Config) { c.Ports[2].NoFlood = true },
			frame:   func(testing.TB) []byte { return arpFrame(bcast, macA) },
			wantOut: []int{2, 4}},
		{name: "noLearn port's sources are not learned", in: 1,
			mutate:  func(c *Config) { c.Ports[2].NoLearn = true },
			setup:   func(b *testBridge) { b.rx(3, arpFrame(bcast, macB), false, frame.VLANTag{}) },
			frame:   func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) },
			wantOut: []int{2, 3, 4}},
		{name: "TX ring full", in: 1,
			setup: func(b *testBridge) {
				b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
				f := b.tx[1][2]
				f.stuck = true
				f.n = len(f.slots)
			},
			frame:    func(testing.TB) []byte { return tcpFrame(macB, macA, 1, 2, frame.TCPSyn) },
			wantOut:  []int{},
			wantDrop: map[Drop]uint64{DropTxFull: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBridge(t, 3, true, tt.rules, false, tt.mutate)
			if tt.setup != nil {
				tt.setup(b)
			}
			before := b.drops()
			data := tt.frame(t)
			var out [][]byte
			if tt.stripped != nil {
				out = b.rx(tt.in, data, true, *tt.stripped)
			} else {
				out = b.rx(tt.in, data, false, frame.VLANTag{})
			}
			if diff := cmp.Diff(tt.wantOut, got(out)); diff != "" {
				t.Errorf("out ports (-want +got):\n%s", diff)
			}
			after := b.drops()
			gotDrop := map[Drop]uint64{}
			for r := range after {
				if d := after[r] - before[r]; d != 0 {
					gotDrop[Drop(r)] = d
				}
			}
			want := tt.wantDrop
			if want == nil {
				want = map[Drop]uint64{}
			}
			if diff := cmp.Diff(want, gotDrop); diff != "" {
				t.Errorf("drops (-want +got):\n%s", diff)
			}
			// Forwarded copies are the frame, with a stripped tag back in.
			for id, o := range out {
				if o == nil || id == int(tt.in) {
					continue
				}
				want := data
				if tt.stripped != nil {
					want = append(append(append([]byte(nil), data[:12]...), 0x81, 0, byte(tt.stripped.TCI>>8), byte(tt.stripped.TCI)), data[12:]...)
				}
				if !bytes.Equal(o, want) {
					t.Errorf("port %d got % x\nwant % x", id, o, want)
				}
			}
		})
	}
}

func TestRejectAnswer(t *testing.T) {
	b := newTestBridge(t, 2, false, "tcp dport 23 reject\nudp dport 9 reject", false, nil)
	tag := frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 0x2007}
	out := b.rx(1, tcpFrame(macB, macA, 1000, 23, frame.TCPSyn), true, tag)
	ans := out[1]
	if ans == nil {
		t.Fatalf("no answer on the ingress port; out %v", got(out))
	}
	var f frame.Frame
	if err := frame.Parse(ans, &f); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	if f.NTags != 1 || f.Tags[0] != tag {
		t.Errorf("answer tags %v, want the frame's %v in the bytes", f.Tags[:f.NTags], tag)
	}
	if f.Dst != macA || f.Src != macB || f.IPv4.Src != ipB || f.IPv4.Dst != ipA {
		t.Errorf("answer %v>%v %v>%v, want the frame's reversed", f.Src, f.Dst, f.IPv4.Src, f.IPv4.Dst)
	}
	// SYN seq 1000 with 5 payload bytes: RST|ACK acking 1000+5+1.
	if f.TCP.Flags != frame.TCPRst|frame.TCPAck || f.TCP.Ack != 1006 || f.TCP.SrcPort != 23 || f.TCP.DstPort != 1000 {
		t.Errorf("answer TCP %+v", f.TCP)
	}
	if err := frame.VerifyChecksums(ans, &f); err != nil {
		t.Errorf("answer checksums: %v", err)
	}
	st := b.fwds[1].c
	if st.rejectsSent != 1 || st.drops[DropReject] != 1 {
		t.Errorf("rejectsSent %d, reject drops %d; want 1, 1", st.rejectsSent, st.drops[DropReject])
	}
}

func TestBuildReject(t *testing.T) {
	v6a := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	v6b := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	big := make([]byte, 1400)
	tests := []struct {
		name   string
		frame  []byte
		answer bool
		check  func(t *testing.T, f *frame.Frame, n int)
	}{
		{"tcp with ack gets a bare RST at its ack",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPAck | frame.TCPPsh, Seq: 10, Ack: 777}, []byte("x"))), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.TCP.Flags != frame.TCPRst || f.TCP.Seq != 777 || f.TCP.Ack != 0 {
					t.Errorf("TCP %+v", f.TCP)
				}
				if n != frame.MinFrameLen {
					t.Errorf("length %d, want padded to %d", n, frame.MinFrameLen)
				}
			}},
		{"udp over IPv4 gets port unreachable quoting the datagram",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, []byte("data"))), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.Proto != frame.ProtoICMP || f.ICMP.Type != 3 || f.ICMP.Code != 3 || f.ICMP.EmbeddedOff == 0 {
					t.Errorf("ICMP %+v", f.ICMP)
				}
				if f.IPv4.TotalLen != 20+8+20+8+4 {
					t.Errorf("total length %d", f.IPv4.TotalLen)
				}
			}},
		{"a big datagram is quoted up to 576 bytes",
			frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, big)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.IPv4.TotalLen != 576 {
					t.Errorf("total length %d, want 576", f.IPv4.TotalLen)
				}
			}},
		{"udp over IPv6 gets ICMPv6 port unreachable",
			frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: v6a, Dst: v6b}.UDPPacket(5, 9, big)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.Proto != frame.ProtoICMPv6 || f.ICMP.Type != 1 || f.ICMP.Code != 4 {
					t.Errorf("ICMPv6 %+v", f.ICMP)
				}
				if int(f.IPv6.PayloadLen)+40 != 1280 {
					t.Errorf("IPv6 packet %d bytes, want 1280", int(f.IPv6.PayloadLen)+40)
				}
			}},
		{"tcp over IPv6 gets a RST",
			frametest.Frame(macB, macA, frame.EtherTypeIPv6, frametest.IPv6{Src: v6a, Dst: v6b}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn, Seq: 5}, nil)), true,
			func(t *testing.T, f *frame.Frame, n int) {
				if f.TCP.Flags != frame.TCPRst|frame.TCPAck || f.TCP.Ack != 6 || f.IPv6.Src != v6b {
					t.Errorf("TCP %+v src %x", f.TCP, f.IPv6.Src)
				}
			}},
		{"broadcast is not answered", frametest.Frame(bcast, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.UDPPacketNoChecksum(5, 9, nil)), false, nil},
		{"an IP broadcast is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: [4]byte{255, 255, 255, 255}}.UDPPacketNoChecksum(5, 9, nil)), false, nil},
		{"a RST is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPRst, Seq: 5}, nil)), false, nil},
		{"an ICMP error is not answered", frametest.Frame(macB, macA, frame.EtherTypeIPv4, frametest.IPv4{Src: ipA, Dst: ipB}.ICMPPacket(3, 3, 0, nil)), false, nil},
		{"ARP is not answered", arpFrame(macB, macA), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in frame.Frame
			if err := frame.Parse(tt.frame, &in); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			dst := make([]byte, 2048)
			n := buildReject(dst, tt.frame, &in, 1500)
			if (n > 0) != tt.answer {
				t.Fatalf("buildReject = %d, want answer %v", n, tt.answer)
			}
			if n == 0 {
				return
			}
			var f frame.Frame
			if err := frame.Parse(dst[:n], &f); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
			if err := frame.VerifyChecksums(dst[:n], &f); err != nil {
				t.Errorf("answer checksums: %v", err)
			}
			if f.Dst != in.Src || f.Src != in.Dst {
				t.Errorf("answer MACs %v>%v", f.Src, f.Dst)
			}
			tt.check(t, &f, n)
		})
	}
	// Too small a buffer: no answer, no panic.
	var in frame.Frame
	fr := tcpFrame(macB, macA, 1, 2, frame.TCPSyn)
	frame.Parse(fr, &in)
	if n := buildReject(make([]byte, 20), fr, &in, 1500); n != 0 {
		t.Errorf("buildReject into 20 bytes = %d", n)
	}
}

func TestFlushOncePerBatch(t *testing.T) {
	b := newTestBridge(t, 2, false, "", true, nil)
	w := b.fwds[1]
	w.begin(time.Now().UnixNano(), 1)
	for i := range 5 {
		fr := tcpFrame(bcast, macA, uint16(i), 2, frame.TCPSyn)
		w.handle(fr, len(fr), false, frame.VLANTag{})
	}
	w.flush()
	f := b.tx[1][2]
	if f.flushes != 1 || len(f.sent) != 5 {
		t.Errorf("flushes %d, sent %d; want 1 flush of 5 frames", f.flushes, len(f.sent))
	}
	if b.tx[1][1].flushes != 0 {
		t.Errorf("the ingress ring was flushed without frames")
	}
	// A failing flush keeps the port marked, so the next batch retries.
	f.stuck = true
	w.begin(time.Now().UnixNano(), 2)
	fr := tcpFrame(bcast, macA, 9, 2, frame.TCPSyn)
	w.handle(fr, len(fr), false, frame.VLANTag{})
	w.flush()
	w.begin(time.Now().UnixNano(), 3)
	w.flush()
	if f.flushes != 3 || w.c.txFlushErrors != 2 {
		t.Errorf("flushes %d, errors %d; want a retry of the stuck ring (3, 2)", f.flushes, w.c.txFlushErrors)
	}
}

func TestSettingsSwap(t *testing.T) {
	b := newTestBridge(t, 3, false, "", false, nil)
	out := b.rx(1, arpFrame(bcast, macA), false, frame.VLANTag{})
	if diff := cmp.Diff([]int{2, 3}, got(out)); diff != "" {
		t.Fatalf("before (-want +got):\n%s", diff)
	}
	cfg := *b.cfg
	cfg.Ports = slices.Clone(cfg.Ports)
	cfg.Ports[1].NoFlood = true
	b.cur.Store(newSettings(&cfg))
	out = b.rx(1, arpFrame(bcast, macA), false, frame.VLANTag{})
	if diff := cmp.Diff([]int{3}, got(out)); diff != "" {
		t.Errorf("after the swap (-want +got):\n%s", diff)
	}
}

// TestZeroAllocs proves the per-frame path allocates nothing, for every
// kind of frame it handles.
func TestZeroAllocs(t *testing.T) {
	b := newTestBridge(t, 3, true, "tcp dport 23 reject\nudp dport 7 drop\noif p3 ip daddr 10.9.9.9 drop", false, nil)
	b.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
	frames := []struct {
		name     string
		data     []byte
		stripped bool
		marked   bool // from a ring behind the demote (fwd.marked)
	}{
		{"known unicast", tcpFrame(macB, macA, 1, 80, frame.TCPAck), false, false},
		{"unknown unicast", tcpFrame(macC, macA, 1, 80, frame.TCPAck), false, false},
		{"broadcast", arpFrame(bcast, macA), false, false},
		{"stripped tag", tcpFrame(macB, macA, 1, 80, frame.TCPAck), true, false},
		{"in-band tag", tcpFrame(macB, macA, 1, 80, frame.TCPAck, frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 5}), false, false},
		{"rule drop", udpFrame(macB, macA, 7, 10), false, false},
		{"reject", tcpFrame(macB, macA, 1, 23, frame.TCPSyn), false, false},
		{"bad frame", macA[:], false, false},
		{"marked, tagged", tcpFrame(macB, macA, 1, 80, frame.TCPAck, frametest.Tag{TPID: ingressdrop.MarkerTPID, TCI: ingressdrop.MarkerTCI}, frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 5}), false, true},
	}
	w := b.fwds[1]
	buf := make([]byte, 2048)
	for _, fr := range frames {
		t.Run(fr.name, func(t *testing.T) {
			w.marked = fr.marked
			defer func() { w.marked = false }()
			n := 0
			allocs := testing.AllocsPerRun(500, func() {
				n++
				w.begin(int64(n), int64(n)*int64(time.Millisecond))
				data := buf[:copy(buf, fr.data)] // handle unmarks in place
				w.handle(data, len(data), fr.stripped, frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 10})
				for _, f := range b.tx[1] {
					if f != nil {
						f.n = 0
					}
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per frame", allocs)
			}
		})
	}
}

func TestHostStage(t *testing.T) {
	var written [][]byte
	fail := false
	s := newHostStage(func(b []byte) error {
		if fail {
			return fmt.Errorf("refused")
		}
		written = append(written, append([]byte(nil), b...))
		return nil
	}, 1522)
	fr := arpFrame(bcast, macA)
	if !s.Append(fr) || !s.AppendTagged(fr, frame.EtherTypeVLAN, 3) {
		t.Fatal("Append failed on an empty stage")
	}
	if s.Append(make([]byte, 1600)) {
		t.Errorf("Append of a frame larger than a slot succeeded")
	}
	slot := s.TxSlot()
	copy(slot, fr)
	if !s.TxCommit(len(fr)) {
		t.Fatal("TxCommit failed")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 || !bytes.Equal(written[0], fr) || len(written[1]) != len(fr)+4 ||
		binary.BigEndian.Uint16(written[1][12:]) != frame.EtherTypeVLAN || !bytes.Equal(written[2], fr) {
		t.Errorf("written %d frames: % x", len(written), written)
	}
	for range hostStageFrames {
		s.Append(fr)
	}
	if s.Append(fr) {
		t.Errorf("Append succeeded on a full stage")
	}
	fail = true
	if err := s.Flush(); err == nil || s.errs.Load() != hostStageFrames {
		t.Errorf("Flush = %v with %d errors, want an error per frame", err, s.errs.Load())
	}
}

func TestDropsJSON(t *testing.T) {
	var d Drops
	d[DropRule] = 3
	d[frame.ReasonTruncated] = 1
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"truncated":1,"rule_drop":3}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back Drops
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Errorf("round trip %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"nope":1}`), &back); err == nil {
		t.Errorf("unknown reason accepted")
	}
	for r := Drop(1); r < NumDrops; r++ {
		if s := r.String(); s == "" || s == "none" || s[0] == 'd' && s[1] == 'r' {
			t.Errorf("Drop(%d) has no name: %q", r, s)
		}
	}
	if d.Total() != 4 {
		t.Errorf("Total = %d", d.Total())
	}
}

// TestConfigCheck covers the engine's own invariants; a user's config is
// validated by package config (appliance/config), whose tests cover every
// refusal with its JSON path.
func TestConfigCheck(t *testing.T) {
	ok := func() *Config {
		return &Config{Ports: []Port{{Name: "lan", Interface: "eth1"}, {Interface: "eth2"}}, HostPort: &HostPort{}}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		errs   []string
	}{
		{"valid", func(*Config) {}, nil},
		{"no ports", func(c *Config) { c.Ports = nil }, []string{"no data ports"}},
		{"nat mode without a router", func(c *Config) { c.Mode = ModeNAT; c.Ports[0].Role = RoleWAN }, []string{"NAT mode without a router configuration"}},
		{"unknown mode", func(c *Config) { c.Mode = "router" }, []string{`mode "router"`}},
		{"duplicate name", func(c *Config) { c.Ports[1].Name = "lan" }, []string{"port names are not unique"}},
		{"static to unknown port", func(c *Config) {
			c.Bridge.Static = []StaticEntry{{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Port: "wan"}}
		}, []string{`static FDB entry 02:00:00:00:00:01: unknown port "wan"`}},
		{"rule with unknown port", func(c *Config) {
			c.Rules = &rules.Ruleset{Rules: []rules.Rule{{Match: rules.Match{InPort: "wan"}, Action: rules.Drop}}}
		}, []string{`rules: `, `unknown port "wan"`}},
		{"rule with the host port", func(c *Config) {
			c.Rules = &rules.Ruleset{Rules: []rules.Rule{{Chain: rules.Input, Match: rules.Match{InPort: "lan", OutPort: "host"}, Action: rules.Drop}}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok()
			tt.mutate(c)
			err := c.Check()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Errorf("Check = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = nil, want %q", tt.errs)
			}
			for _, want := range tt.errs {
				if !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Errorf("Check = %v, want it to contain %q", err, want)
				}
			}
		})
	}
	c := ok()
	if diff := cmp.Diff(map[string]uint16{"lan": 1, "eth2": 2, "host": 3}, c.PortNames()); diff != "" {
		t.Errorf("PortNames (-want +got):\n%s", diff)
	}
}

// TestUnmark: a frame from a ring behind the demote reaches handle as a
// tap would have delivered it: the marker gone, the outer tag (which the
// kernel had offloaded before tcx) stripped into tag, inner tags in place.
func TestUnmark(t *testing.T) {
	a, b := [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}
	marker := frametest.Tag{TPID: ingressdrop.MarkerTPID, TCI: ingressdrop.MarkerTCI}
	q5 := frametest.Tag{TPID: frame.EtherTypeVLAN, TCI: 0x2005}
	ad10 := frametest.Tag{TPID: frame.EtherTypeQinQ, TCI: 10}
	payload := []byte("payload of the test frame")
	type out struct {
		Data     []byte
		OrigLen  int
		Stripped bool
		Tag      frame.VLANTag
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want out
	}{
		{"another EtherType, untagged", frametest.Frame(b, a, 0x88b5, payload, marker),
			out{frametest.Frame(b, a, 0x88b5, payload), 14 + len(payload), false, frame.VLANTag{}}},
		{"802.1Q", frametest.Frame(b, a, frame.EtherTypeIPv4, payload, marker, q5),
			out{frametest.Frame(b, a, frame.EtherTypeIPv4, payload), 14 + len(payload), true, frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 0x2005}}},
		{"802.1ad over 802.1Q: the inner tag stays", frametest.Frame(b, a, frame.EtherTypeIPv4, payload, marker, ad10, q5),
			out{frametest.Frame(b, a, frame.EtherTypeIPv4, payload, q5), 18 + len(payload), true, frame.VLANTag{TPID: frame.EtherTypeQinQ, TCI: 10}}},
		{"not marked: as it is", frametest.Frame(b, a, frame.EtherTypeIPv4, payload, q5),
			out{frametest.Frame(b, a, frame.EtherTypeIPv4, payload, q5), 18 + len(payload), false, frame.VLANTag{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got out
			got.Data, got.OrigLen, got.Stripped, got.Tag = unmark(bytes.Clone(tc.in), len(tc.in))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unmark (-want +got):\n%s", diff)
			}
		})
	}
}
