package frame

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestIncrementalUpdateProperty: for random data, updating the checksum
// with Update16/Update32/UpdateBytes after a change gives exactly the
// checksum computed from scratch.
func TestIncrementalUpdateProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		n := 2 * (2 + rng.IntN(400))
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%10 == 0 { // runs of 0xff and 0x00 stress the 0/0xffff corner
			for j := range b {
				b[j] = []byte{0, 0xff}[rng.IntN(2)]
			}
		}
		csum := frametest.Checksum(b)
		before := slices.Clone(b)
		at := 2 * rng.IntN(n/2)
		switch w := 2 << rng.IntN(4); { // 2, 4, 8 or 16 bytes changed
		case at+w > n:
			continue
		case w == 2:
			from := binary.BigEndian.Uint16(b[at:])
			to := uint16(rng.Uint32())
			if rng.IntN(8) == 0 {
				to = ^from
			}
			binary.BigEndian.PutUint16(b[at:], to)
			if got, want := Update16(csum, from, to), frametest.Checksum(b); !sameChecksum(got, want, before, b) {
				t.Fatalf("Update16(%#04x, %#04x, %#04x) = %#04x, full recompute %#04x", csum, from, to, got, want)
			}
		case w == 4:
			from := binary.BigEndian.Uint32(b[at:])
			to := rng.Uint32()
			binary.BigEndian.PutUint32(b[at:], to)
			if got, want := Update32(csum, from, to), frametest.Checksum(b); !sameChecksum(got, want, before, b) {
				t.Fatalf("Update32(%#04x, %#08x, %#08x) = %#04x, full recompute %#04x", csum, from, to, got, want)
			}
		default:
			from := slices.Clone(b[at : at+w])
			for j := range w {
				b[at+j] = byte(rng.Uint32())
			}
			if got, want := UpdateBytes(csum, from, b[at:at+w]), frametest.Checksum(b); !sameChecksum(got, want, before, b) {
				t.Fatalf("UpdateBytes(%#04x, %x, %x) = %#04x, full recompute %#04x", csum, from, b[at:at+w], got, want)
			}
		}
	}
}

// genPkt is a random packet with what the generator knows about it.
type genPkt struct {
	b       []byte
	l3, l4  int // l4 is 0 for a later fragment
	v6      bool
	proto   uint8
	ihl     int    // IPv4 header bytes
	tail    []byte // datagram bytes after this first fragment
	udpNone bool   // UDP over IPv4 without checksum
	echo    bool
}

func randAddr4(rng *rand.Rand) (a [4]byte) {
	binary.BigEndian.PutUint32(a[:], rng.Uint32())
	return a
}

func randAddr16(rng *rand.Rand) (a [16]byte) {
	binary.BigEndian.PutUint64(a[:], rng.Uint64())
	binary.BigEndian.PutUint64(a[8:], rng.Uint64())
	return a
}

func genPacket(rng *rand.Rand) genPkt {
	var p genPkt
	var tags []frametest.Tag
	for range rng.IntN(3) {
		tags = append(tags, frametest.Tag{TPID: EtherTypeVLAN, TCI: uint16(rng.IntN(4095))})
	}
	p.v6 = rng.IntN(2) == 0
	protos := []uint8{ProtoTCP, ProtoUDP, ProtoICMP}
	if p.v6 {
		protos[2] = ProtoICMPv6
	}
	p.proto = protos[rng.IntN(3)]
	payload := frametest.Payload(rng.IntN(300))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	frag := rng.IntN(5) // 0 first fragment, 1 later fragment, else whole
	h4 := frametest.IPv4{Src: randAddr4(rng), Dst: randAddr4(rng), Proto: p.proto, TTL: uint8(rng.IntN(256)), ID: uint16(rng.Uint32())}
	h4.ZeroTTL = h4.TTL == 0
	for range rng.IntN(4) {
		h4.Opts = append(h4.Opts, 1, 1, 1, 1)
	}
	h6 := frametest.IPv6{Src: randAddr16(rng), Dst: randAddr16(rng), NextHeader: p.proto, HopLimit: uint8(rng.IntN(256)), FlowLabel: rng.Uint32() & 0xfffff}
	h6.ZeroHopLimit = h6.HopLimit == 0
	var seg []byte
	switch p.proto {
	case ProtoTCP:
		t := frametest.TCP{SrcPort: uint16(rng.Uint32()), DstPort: uint16(rng.Uint32()), Seq: rng.Uint32(), Ack: rng.Uint32(), Flags: TCPAck, Window: 100}
		if p.v6 {
			seg = h6.TCP(t, payload)
		} else {
			seg = h4.TCP(t, payload)
		}
	case ProtoUDP:
		sp, dp := uint16(rng.Uint32()), uint16(rng.Uint32())
		switch {
		case p.v6:
			seg = h6.UDP(sp, dp, payload)
		case rng.IntN(4) == 0:
			seg, p.udpNone = frametest.UDPRaw(sp, dp, payload), true
		default:
			seg = h4.UDP(sp, dp, payload)
		}
	case ProtoICMP:
		typ := []uint8{ICMPEchoRequest, ICMPEchoReply, ICMPDestUnreach}[rng.IntN(3)]
		p.echo = typ != ICMPDestUnreach
		seg = frametest.ICMPv4(typ, 0, rng.Uint32(), payload)
	case ProtoICMPv6:
		typ := []uint8{ICMPv6EchoRequest, ICMPv6EchoReply, 135}[rng.IntN(3)]
		p.echo = typ != 135
		seg = h6.ICMP(typ, 0, rng.Uint32(), payload)
	}
	hdrLen := 8 // enough to hold every header
	if p.proto == ProtoTCP {
		hdrLen = 20
	}
	var l3payload []byte
	var extLen int
	if cut := (hdrLen + 7) / 8 * 8; frag == 0 && len(seg) > cut { // first fragment: a multiple of 8 holding the header
		cut += 8 * rng.IntN((len(seg)-1-cut)/8+1)
		p.tail = seg[cut:]
		seg = seg[:cut]
		h4.MF = true
		if p.v6 {
			h6.NextHeader = ProtoFragment
			seg = slices.Concat(frametest.Frag6(p.proto, 0, true, rng.Uint32()), seg)
			extLen = 8
		}
	} else if frag == 1 {
		seg = frametest.Payload(8 * (1 + rng.IntN(20)))
		h4.FragOff = uint16(1 + rng.IntN(100))
		if p.proto == ProtoTCP && h4.FragOff == 1 {
			h4.FragOff = 2
		}
		if p.v6 {
			h6.NextHeader = ProtoFragment
			seg = slices.Concat(frametest.Frag6(p.proto, h4.FragOff, false, rng.Uint32()), seg)
		}
	}
	if p.v6 && rng.IntN(3) == 0 { // a hop-by-hop header in front
		seg = slices.Concat(frametest.Ext6(h6.NextHeader, []byte{1, 4}), seg)
		h6.NextHeader = ProtoHopByHop
		extLen += 8
	}
	e := frametest.Eth(macB, macA, EtherTypeIPv4, tags...)
	if p.v6 {
		e = frametest.Eth(macB, macA, EtherTypeIPv6, tags...)
		l3payload = h6.Build(seg)
	} else {
		l3payload = h4.Build(seg)
	}
	p.b = slices.Concat(e, l3payload)
	p.l3 = len(e)
	if p.v6 {
		p.l4 = p.l3 + 40 + extLen
	} else {
		p.ihl = 20 + len(h4.Opts)
		p.l4 = p.l3 + p.ihl
	}
	if frag == 1 {
		p.l4 = 0
	}
	return p
}

// refFix recomputes every checksum of p's layout in b from scratch with the
// reference implementation.
func refFix(p genPkt, b []byte) {
	if !p.v6 {
		binary.BigEndian.PutUint16(b[p.l3+10:], 0)
		binary.BigEndian.PutUint16(b[p.l3+10:], frametest.Checksum(b[p.l3:p.l3+p.ihl]))
	}
	if p.l4 == 0 || p.udpNone {
		return
	}
	at := map[uint8]int{ProtoTCP: 16, ProtoUDP: 6, ProtoICMP: 2, ProtoICMPv6: 2}[p.proto] + p.l4
	binary.BigEndian.PutUint16(b[at:], 0)
	n := len(b) - p.l4 + len(p.tail)
	var ps []byte
	switch {
	case p.proto == ProtoICMP:
	case p.v6:
		var s, d [16]byte
		copy(s[:], b[p.l3+8:])
		copy(d[:], b[p.l3+24:])
		ps = frametest.Pseudo6(s, d, p.proto, n)
	default:
		var s, d [4]byte
		copy(s[:], b[p.l3+12:])
		copy(d[:], b[p.l3+16:])
		ps = frametest.Pseudo4(s, d, p.proto, n)
	}
	c := frametest.Checksum(ps, b[p.l4:], p.tail)
	if c == 0 && p.proto == ProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(b[at:], c)
}

// TestRewriteProperty applies random NAT rewrites to random packets with the
// Set* helpers (incremental checksum updates) and compares every byte with
// the same rewrite followed by a full reference recompute.
func TestRewriteProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		p := genPacket(rng)
		b := slices.Clone(p.b)
		shadow := slices.Clone(p.b)
		var f Frame
		if err := Parse(b, &f); err != nil {
			t.Fatalf("packet %d: Parse: %v\n%x", i, err, b)
		}
		if (f.L4Off != 0) != (p.l4 != 0) || f.L4Off != p.l4 {
			t.Fatalf("packet %d: L4Off %d, generator says %d", i, f.L4Off, p.l4)
		}
		for step := range 6 {
			var ok, wantOK bool
			var what string
			switch op := rng.IntN(6); op {
			case 0, 1: // source or destination address
				what = []string{"src addr", "dst addr"}[op]
				wantOK = true
				if p.v6 {
					a := randAddr16(rng)
					copy(shadow[p.l3+8+16*op:], a[:])
					if op == 0 {
						ok = SetIPv6Src(b, &f, a)
					} else {
						ok = SetIPv6Dst(b, &f, a)
					}
				} else {
					a := randAddr4(rng)
					copy(shadow[p.l3+12+4*op:], a[:])
					if op == 0 {
						ok = SetIPv4Src(b, &f, a)
					} else {
						ok = SetIPv4Dst(b, &f, a)
					}
				}
			case 2, 3: // source or destination port
				what = []string{"", "", "src port", "dst port"}[op]
				port := uint16(rng.Uint32())
				wantOK = p.l4 != 0 && (p.proto == ProtoTCP || p.proto == ProtoUDP)
				if wantOK {
					binary.BigEndian.PutUint16(shadow[p.l4+2*(op-2):], port)
				}
				if op == 2 {
					ok = SetSrcPort(b, &f, port)
				} else {
					ok = SetDstPort(b, &f, port)
				}
			case 4:
				what = "echo id"
				id := uint16(rng.Uint32())
				wantOK = p.l4 != 0 && p.echo
				if wantOK {
					binary.BigEndian.PutUint16(shadow[p.l4+4:], id)
				}
				ok = SetICMPEchoID(b, &f, id)
			case 5:
				what = "ttl"
				at := p.l3 + 8
				if p.v6 {
					at = p.l3 + 7
				}
				wantOK = shadow[at] > 1
				if wantOK {
					shadow[at]--
				}
				ok = DecTTL(b, &f)
			}
			if ok != wantOK {
				t.Fatalf("packet %d step %d %s: ok = %v, want %v", i, step, what, ok, wantOK)
			}
			refFix(p, shadow)
			if !slices.Equal(b, shadow) {
				t.Fatalf("packet %d step %d %s: incremental and full recompute differ\n incr %x\n full %x", i, step, what, b, shadow)
			}
			var again Frame
			if err := Parse(b, &again); err != nil {
				t.Fatalf("packet %d step %d %s: reparse: %v", i, step, what, err)
			}
			if diff := cmp.Diff(again, f); diff != "" {
				t.Fatalf("packet %d step %d %s: f out of step with the bytes (-reparsed +kept):\n%s", i, step, what, diff)
			}
			if err := VerifyChecksums(b, &f); err != nil {
				t.Fatalf("packet %d step %d %s: %v", i, step, what, err)
			}
		}
	}
}

func TestRewriteRefusals(t *testing.T) {
	arp := slices.Concat(frametest.Eth(macBcast, macA, EtherTypeARP), frametest.ARP(1, macA, ip4A, mac{}, ip4B))
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 1}
	unreach := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPDestUnreach, 1, 0, frametest.Payload(28))))
	ip6 := frametest.IPv6{Src: ip6A, Dst: ip6B, NextHeader: ProtoUDP, ZeroHopLimit: true}
	udp6 := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6), ip6.Build(ip6.UDP(1, 2, nil)))
	for _, tc := range []struct {
		name string
		b    []byte
		fn   func(b []byte, f *Frame) bool
	}{
		{"ipv4 src on arp", arp, func(b []byte, f *Frame) bool { return SetIPv4Src(b, f, ip4B) }},
		{"ipv6 dst on arp", arp, func(b []byte, f *Frame) bool { return SetIPv6Dst(b, f, ip6B) }},
		{"ttl on arp", arp, DecTTL},
		{"port on icmp", unreach, func(b []byte, f *Frame) bool { return SetSrcPort(b, f, 1) }},
		{"echo id on unreachable", unreach, func(b []byte, f *Frame) bool { return SetICMPEchoID(b, f, 1) }},
		{"ttl 1", unreach, DecTTL},
		{"ipv4 dst on ipv6", udp6, func(b []byte, f *Frame) bool { return SetIPv4Dst(b, f, ip4B) }},
		{"hop limit 0", udp6, DecTTL},
		{"echo id on udp", udp6, func(b []byte, f *Frame) bool { return SetICMPEchoID(b, f, 1) }},
		{"short buffer", udp6, func(b []byte, f *Frame) bool { return SetDstPort(b[:40], f, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Frame
			if err := Parse(tc.b, &f); err != nil {
				t.Fatal(err)
			}
			b := slices.Clone(tc.b)
			before := f
			if tc.fn(b, &f) {
				t.Error("rewrite reported success")
			}
			if !slices.Equal(b, tc.b) || f != before {
				t.Error("refused rewrite changed the frame")
			}
		})
	}
}

// TestICMPAllZeroEcho: an ICMPv4 echo reply that ends up all zero (type 0,
// code 0, id 0, seq 0, no data) needs checksum 0xffff, not the 0x0000 a
// plain RFC 1624 update gives. Found by FuzzParse.
func TestICMPAllZeroEcho(t *testing.T) {
	ip := frametest.IPv4{Src: ip4A, Dst: ip4B, Proto: ProtoICMP, TTL: 64}
	b := slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4), ip.Build(frametest.ICMPv4(ICMPEchoReply, 0, 0x0005<<16, nil)))
	var f Frame
	if err := Parse(b, &f); err != nil {
		t.Fatal(err)
	}
	if !SetICMPEchoID(b, &f, 0) {
		t.Fatal("SetICMPEchoID refused")
	}
	if got := u16(b, f.L4Off+2); got != 0xffff || f.ICMP.Checksum != 0xffff {
		t.Errorf("checksum = %#04x (f says %#04x), want 0xffff", got, f.ICMP.Checksum)
	}
	if err := VerifyChecksums(b, &f); err != nil {
		t.Error(err)
	}
	if c, _ := L4Checksum(b, &f); c != 0xffff {
		t.Errorf("L4Checksum of all-zero ICMP = %#04x, want 0xffff", c)
	}
	// And back: a non-zero identifier gives an ordinary checksum again.
	if !SetICMPEchoID(b, &f, 5) || u16(b, f.L4Off+2) != ^uint16(5) {
		t.Errorf("checksum after id 5 = %#04x, want %#04x", u16(b, f.L4Off+2), ^uint16(5))
	}
}
