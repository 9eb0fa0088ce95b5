package nat

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"

	"github.com/google/go-cmp/cmp"
)

// TestPeekKey checks the key Prefetch computes from raw bytes against the
// one the lookup path computes (flowKey of frame.Parse), and that frames
// the router does not look up get none.
func TestPeekKey(t *testing.T) {
	tcp := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, nil)
	vlan := func(b []byte) []byte { // insert an 802.1Q tag (VID 10)
		return slices.Concat(b[:12], []byte{0x81, 0x00, 0x00, 0x0a}, b[12:])
	}
	mod := func(b []byte, f func([]byte)) []byte { b = slices.Clone(b); f(b); return b }
	for _, tc := range []struct {
		name   string
		side   Side
		b      []byte
		lookup bool // the lookup path computes a key for it
	}{
		{"tcp lan", LAN, fromLAN(hostA, tcp), true},
		{"tcp wan", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 20000, Flags: frame.TCPAck}, nil)), true},
		{"tcp ip options", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Opts: []byte{1, 1, 1, 0}}.TCPPacket(frametest.TCP{SrcPort: 7, DstPort: 9, Flags: frame.TCPSyn}, nil)), true},
		{"udp lan", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(5353, 53, []byte("q"))), true},
		{"udp wan", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacketNoChecksum(53, 20001, nil)), true},
		{"udp first fragment", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP, ID: 5, MF: true}.Build(slices.Concat([]byte{0, 1, 0, 2, 0, 100, 0, 0}, make([]byte, 8)))), true},
		{"echo request", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.ICMPPacket(frame.ICMPEchoRequest, 0, 0x1234<<16|1, []byte("ping"))), true},
		{"echo reply", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(frame.ICMPEchoReply, 0, 0x4321<<16|1, []byte("ping"))), true},
		{"gre", WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr), Proto: 47}.Build(make([]byte, 8))), true},
		{"icmp error", WAN, fromWAN(frametest.IPv4{Src: a4(router1), Dst: a4(wanAddr)}.ICMPPacket(frame.ICMPTimeExceeded, 0, 0, tcp[:28])), false},
		{"icmp timestamp", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.ICMPPacket(13, 0, 0, make([]byte, 12))), false},
		{"later fragment", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP, ID: 5, FragOff: 2}.Build(make([]byte, 8))), false},
		{"vlan", LAN, vlan(fromLAN(hostA, tcp)), false},
		{"other mac", LAN, mod(fromLAN(hostA, tcp), func(b []byte) { b[5] ^= 0x40 }), false},
		{"broadcast", LAN, frametest.Pad(frametest.Frame(bcast, hostA, frame.EtherTypeIPv4, tcp)), false},
		{"lan frame on wan", WAN, fromLAN(hostA, tcp), false},
		{"arp", LAN, frametest.ARPFrame(lanMAC, hostA, 1, hostA, a4(ipA), [6]byte{}, a4(lanAddr)), false},
		{"ipv6", LAN, frametest.Pad(frametest.Frame(lanMAC, hostA, frame.EtherTypeIPv6, make([]byte, 60))), false},
		{"ip version 6 in ipv4", LAN, mod(fromLAN(hostA, tcp), func(b []byte) { b[14] = 0x65 }), false},
		{"ihl 4", LAN, mod(fromLAN(hostA, tcp), func(b []byte) { b[14] = 0x44 }), false},
		{"total length past the frame", LAN, mod(fromLAN(hostA, tcp), func(b []byte) { b[16], b[17] = 0x05, 0xdc }), false},
		{"total length under ihl", LAN, mod(fromLAN(hostA, tcp), func(b []byte) { b[16], b[17] = 0, 16 }), false},
		{"tcp header cut", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoTCP}.Build(make([]byte, 12))), false},
		{"udp header cut", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoUDP}.Build(make([]byte, 6))), false},
		{"icmp header cut", LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), Proto: frame.ProtoICMP}.Build([]byte{8, 0, 0, 0})), false},
		{"ethernet only", LAN, fromLAN(hostA, nil)[:14], false},
		{"empty", LAN, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mac := &lanMAC
			if tc.side == WAN {
				mac = &wanMAC
			}
			got, ok := peekKey(tc.b, tc.side, mac)
			if ok != tc.lookup {
				t.Fatalf("peekKey ok = %v, want %v", ok, tc.lookup)
			}
			var f frame.Frame
			if !ok {
				if frame.Parse(tc.b, &f) == nil && lookedUp(&f, tc.side, mac) {
					t.Fatalf("peekKey found no key, but the lookup path looks this frame up")
				}
				return
			}
			if err := frame.Parse(tc.b, &f); err != nil {
				t.Fatalf("test frame does not parse: %v", err)
			}
			want, class := flowKey(&f, tc.side)
			if class != 0 {
				t.Fatalf("flowKey class %d, want a connection packet", class)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
				t.Errorf("peekKey (-want +got):\n%s", diff)
			}
		})
	}
}

// lookedUp reports whether the lookup path computes a connection key for
// the parsed frame f arriving on side at a port with MAC mac.
func lookedUp(f *frame.Frame, side Side, mac *[6]byte) bool {
	if f.NTags != 0 || f.Dst != *mac || f.EtherType != frame.EtherTypeIPv4 || f.LaterFragment {
		return false
	}
	_, class := flowKey(f, side)
	return class == 0
}

// TestPrefetchSelectsEntry checks the second prefetch stage: for every key
// of a full table whose slot lies within prefetchProbe of its home,
// entryFor finds the entry the locked lookup finds.
func TestPrefetchSelectsEntry(t *testing.T) {
	r, keys := filledRouter(t, 1<<14, 1<<14)
	ct := r.ct
	near := 0
	for i, k := range keys {
		h := ct.hash(k)
		st := &ct.stripes[ct.stripeOf(h)]
		idx, _, pos, ok := ct.find(st, k, h)
		if !ok {
			t.Fatalf("key %d not found", i)
		}
		if d := pos - homeOf(h>>32, len(st.slots)); d < 0 || d >= prefetchProbe {
			continue
		}
		near++
		if got := ct.entryFor(h); got != uint64(idx) {
			t.Errorf("key %d: entryFor = %d, want %d", i, got, idx)
		}
	}
	// Most keys lie within the probe window, or the prefetch is useless.
	if near < len(keys)*9/10 {
		t.Errorf("only %d of %d keys within %d slots of their home", near, len(keys), prefetchProbe)
	}
	// Keys not in the table: entryFor stays in range (no panic).
	for i := range 10000 {
		_ = ct.entryFor(ct.hash(mkKey(uint32(i), 1, 2, 3, frame.ProtoUDP, WAN)))
	}
}

// TestEntryLayout checks that an entry is one cache line and that the
// table's entries start on one for every table size (prefetchPipe fetches
// one line per entry), and that an entry and its cold part stay within
// the 128-byte budget.
func TestEntryLayout(t *testing.T) {
	if size := reflect.TypeFor[entry]().Size(); size != 64 {
		t.Fatalf("entry is %d bytes, want 64 (one cache line)", size)
	}
	if size := reflect.TypeFor[entry]().Size() + reflect.TypeFor[entryCold]().Size(); size > 128 {
		t.Fatalf("entry and entryCold are %d bytes, want at most 128", size)
	}
	for _, n := range []int{1, 2, 3, 7, 100, 1000, 4096} {
		for range 20 { // different heap positions
			e := alignedEntries(n)
			if len(e) != n {
				t.Fatalf("alignedEntries(%d) has %d entries", n, len(e))
			}
			if p := uintptr(unsafe.Pointer(&e[0])); p%64 != 0 {
				t.Fatalf("alignedEntries(%d) starts at %#x, not on a cache line", n, p)
			}
			_ = make([]byte, n%48+1) // move the next allocation
		}
	}
}

// tableState is everything of a Router that a packet or a sweep can
// change: the table (entries, index, free list, counters), the NAT
// mappings and the counters of its workers.
type tableState struct {
	Entries []entryState
	Slots   []uint64
	Used    []int
	Free    []uint32
	Maps    [3][]mapping
	Index   [3][]uint64
	Conns   []Conn
	Stats   Stats
}

type entryState struct {
	Keys                          [2]key
	Created                       uint32
	Kind                          uint8
	Gen, Stripes, State, Deadline uint32
	Pkts, Bytes                   [2]uint64
}

func snapshotOf(r *Router, now int64) tableState {
	t := r.ct
	var s tableState
	for i := range t.entries {
		e, c := &t.entries[i], &t.cold[i]
		s.Entries = append(s.Entries, entryState{e.keys, c.created, c.kind, c.gen.Load(), c.stripes.Load(), e.state.Load(), e.deadline.Load(), e.packets(c), e.byteCounts(c)})
	}
	for i := range t.slots {
		s.Slots = append(s.Slots, t.slots[i].Load())
	}
	for i := range t.stripes {
		s.Used = append(s.Used, t.stripes[i].used)
	}
	s.Free = slices.Clone(t.free)
	for c, p := range r.maps.class {
		s.Maps[c] = slices.Clone(p.byNAT[:])
		s.Index[c] = slices.Clone(p.index)
	}
	s.Conns, _ = r.Conns(Filter{}, 0, 0, now, nil)
	s.Stats = r.Stats()
	return s
}

// prefetchFrames are frames of connections the env knows and of none,
// valid and not.
func prefetchFrames() [][]byte {
	return [][]byte{
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, nil)),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPAck}, nil)),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(2000, 53, []byte("q"))),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, 2000, []byte("a"))),
		fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote2)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 2, Flags: frame.TCPSyn}, nil)),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(1, 5004, []byte("fwd"))),
		fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.ICMPPacket(8, 0, 9<<16, []byte("ping"))),
		fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.ICMPPacket(0, 0, 9<<16, []byte("ping"))),
		frametest.ARPFrame(bcast, hostA, 1, hostA, a4(ipA), [6]byte{}, a4(lanAddr)),
		{0xff},
	}
}

// TestPrefetchChangesNothing runs Prefetch on known, unknown and random
// frames on both workers and checks that the table, the mappings and all
// counters are as before, and that the connections still forward.
func TestPrefetchChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	frames := prefetchFrames()
	// Connections: TCP (answered), UDP, ICMP echo.
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPSyn}, nil)), wanPort)
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
	e.forward(LAN, frames[2], wanPort)
	e.forward(LAN, frames[6], wanPort)
	e.now += 2 * sec // let an expiry matter if anything recomputed it
	before := snapshotOf(e.r, e.now)
	if len(before.Conns) != 3 {
		t.Fatalf("%d connections, want 3", len(before.Conns))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	garbage := make([]byte, 128)
	for range 2000 {
		for _, b := range frames {
			e.lan.Prefetch(lanPort, b)
			e.wan.Prefetch(wanPort, b)
			e.wan.Prefetch(99, b) // no such port
		}
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		copy(garbage, lanMAC[:])
		garbage[12], garbage[13], garbage[14] = 0x08, 0x00, 0x45
		e.lan.Prefetch(lanPort, garbage[:rng.IntN(len(garbage))])
	}
	after := snapshotOf(e.r, e.now)
	// The big arrays first (cmp is slow on them), then the rest with a diff.
	for i := range before.Entries {
		if before.Entries[i] != after.Entries[i] {
			t.Errorf("entry %d changed:\n%+v\n%+v", i, before.Entries[i], after.Entries[i])
		}
	}
	for c := range before.Maps {
		if !slices.Equal(before.Maps[c], after.Maps[c]) || !slices.Equal(before.Index[c], after.Index[c]) {
			t.Errorf("NAT mappings of class %d changed", c)
		}
	}
	if !slices.Equal(before.Slots, after.Slots) {
		t.Errorf("index slots changed")
	}
	before.Entries, before.Maps, before.Index, before.Slots = nil, [3][]mapping{}, [3][]uint64{}, nil
	after.Entries, after.Maps, after.Index, after.Slots = nil, [3][]mapping{}, [3][]uint64{}, nil
	opts := cmp.Options{cmp.AllowUnexported(key{}), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })}
	if diff := cmp.Diff(before, after, opts); diff != "" {
		t.Errorf("state changed by Prefetch (-want +got):\n%s", diff)
	}
	e.forward(LAN, frames[0], wanPort)
	e.forward(WAN, frames[1], lanPort)
}

func TestPrefetchZeroAllocs(t *testing.T) {
	e := newEnv(t, nil)
	frames := prefetchFrames()
	e.forward(LAN, frames[2], wanPort)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		e.lan.Prefetch(lanPort, frames[i%len(frames)])
		e.wan.Prefetch(wanPort, frames[i%len(frames)])
		i++
	}); n != 0 {
		t.Errorf("Prefetch: %v allocations, want 0", n)
	}
}

// FuzzPrefetch feeds arbitrary frames to Prefetch on both sides of a router
// with live connections: it must not panic, and for frames that parse, the
// key it computes must be the lookup path's.
func FuzzPrefetch(f *testing.F) {
	for i, s := range slices.Concat(fuzzSeeds(), prefetchFrames()) {
		f.Add(s, i%2 == 0)
	}
	e := newEnv(f, nil)
	frames := prefetchFrames()
	e.lan.Handle(e.now, lanPort, slices.Clone(frames[2]))
	e.lan.Handle(e.now, lanPort, slices.Clone(frames[6]))
	var fr frame.Frame
	f.Fuzz(func(t *testing.T, b []byte, lan bool) {
		side, mac, w, port := WAN, &wanMAC, e.wan, wanPort
		if lan {
			side, mac, w, port = LAN, &lanMAC, e.lan, lanPort
		}
		w.Prefetch(port, b)
		k, ok := peekKey(b, side, mac)
		if frame.Parse(b, &fr) != nil {
			return
		}
		if want := lookedUp(&fr, side, mac); ok != want {
			t.Fatalf("peekKey ok = %v, lookup path looks it up: %v", ok, want)
		}
		if want, _ := flowKey(&fr, side); ok && k != want {
			t.Fatalf("peekKey = %+v, lookup path's key %+v", k, want)
		}
	})
}

// TestEntryCounters checks that a direction's packet and byte counts
// carry from the hot line's 16 and 32 bits into the cold part.
func TestEntryCounters(t *testing.T) {
	tests := []struct {
		name         string
		start, bytes uint64 // packets and bytes before, direction 1
		add          int
		want         [2]uint64
		wantBytes    [2]uint64
	}{
		{"zero", 0, 0, 3, [2]uint64{0, 3}, [2]uint64{0, 300}},
		{"packet carry", 1<<16 - 2, 0, 3, [2]uint64{0, 1<<16 + 1}, [2]uint64{0, 300}},
		{"second packet carry", 2<<16 - 1, 0, 1, [2]uint64{0, 2 << 16}, [2]uint64{0, 100}},
		{"past 2^32 packets", 1<<32 - 1, 0, 2, [2]uint64{0, 1<<32 + 1}, [2]uint64{0, 200}},
		{"byte carry", 5, 1<<32 - 150, 2, [2]uint64{0, 7}, [2]uint64{0, 1<<32 + 50}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e entry
			var c entryCold
			e.pkts[1], c.pktsHi[1] = uint16(tc.start), uint32(tc.start>>16)
			e.bytes[1], c.bytesHi[1] = uint32(tc.bytes), uint32(tc.bytes>>32)
			for range tc.add {
				e.count(&c, 1, 100)
			}
			if diff := cmp.Diff(tc.want, e.packets(&c)); diff != "" {
				t.Errorf("packets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBytes, e.byteCounts(&c)); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
		})
	}
	if n := unsafe.Sizeof(entry{}); n != 64 {
		t.Errorf("the hot part of an entry is %d bytes, want one 64-byte line", n)
	}
	if n := unsafe.Sizeof(entryCold{}); n > 32 {
		t.Errorf("the cold part of an entry is %d bytes, want at most 32", n)
	}
}
