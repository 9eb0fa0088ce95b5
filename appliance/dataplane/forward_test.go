package dataplane

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/ingressdrop"
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
