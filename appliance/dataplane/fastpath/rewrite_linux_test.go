package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/testenv"
)

// load loads the fast path in mode for a test (root; a kernel that
// refuses it fails the test).
func load(t testing.TB, mode Mode) *Program {
	t.Helper()
	testenv.Require(t, "root")
	p, err := Load(Options{Mode: mode, NATFlows: 1024, Pairs: 256, Micro: 1024})
	if err != nil {
		t.Fatalf("Load(%s): %v", mode, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// skbCtx is the start of struct __sk_buff as BPF_PROG_TEST_RUN takes it:
// the fields before ifindex must be zero.
type skbCtx struct {
	_       [40]byte
	Ifindex uint32
	_       [4]byte
	Cb      [5]uint32
}

// Program return values the tests see.
const (
	retTCXNext  = tcxNext
	retRedirect = tcRedirect
	retXDPPass  = xdpPass
	retXDPRedir = xdpRedirect
)

// run runs prog on frame arriving on interface 1 (the test namespace's
// loopback) and returns its verdict and the frame it left.
func run(t testing.TB, prog *ebpf.Program, data []byte) (uint32, []byte) {
	t.Helper()
	ret, out, err := tryRun(prog, data)
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, out
}

// tryRun is run that returns BPF_PROG_TEST_RUN's error (it refuses an
// IPv4 or IPv6 frame too short for the IP header).
func tryRun(prog *ebpf.Program, data []byte) (uint32, []byte, error) {
	out := make([]byte, len(data)+64)
	opts := &ebpf.RunOptions{Data: data, DataOut: out}
	if prog.Type() == ebpf.SchedCLS {
		opts.Context = skbCtx{Ifindex: 1}
	}
	ret, err := prog.Run(opts)
	return ret, opts.DataOut, err
}

var (
	routerLAN = [6]byte{0x02, 0xe1, 0, 0, 0, 1}
	routerWAN = [6]byte{0x02, 0xe1, 0, 0, 0, 2}
	hostMAC   = [6]byte{0x02, 0x42, 0, 0, 0, 9}
	gwMAC     = [6]byte{0x02, 0x99, 0, 0, 0, 7}
)

// natCase is a NAT flow and a frame of it.
type natCase struct {
	name  string
	key   NATKey
	flow  NATFlow
	frame []byte
}

// slowRewrite is what package nat's emit does to a frame of an
// established connection, with package frame's helpers, in its order.
func slowRewrite(t testing.TB, b []byte, fl NATFlow) []byte {
	t.Helper()
	b = bytes.Clone(b)
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if f.IPv4.Src != fl.Src {
		frame.SetIPv4Src(b, &f, fl.Src)
	}
	if f.IPv4.Dst != fl.Dst {
		frame.SetIPv4Dst(b, &f, fl.Dst)
	}
	switch f.Proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		sp, dp := f.TCP.SrcPort, f.TCP.DstPort
		if f.Proto == frame.ProtoUDP {
			sp, dp = f.UDP.SrcPort, f.UDP.DstPort
		}
		if fl.SrcPort != sp {
			frame.SetSrcPort(b, &f, fl.SrcPort)
		}
		if fl.DstPort != dp {
			frame.SetDstPort(b, &f, fl.DstPort)
		}
	case frame.ProtoICMP:
		id := fl.SrcPort
		if f.ICMP.Type == frame.ICMPEchoReply {
			id = fl.DstPort
		}
		if id != f.ICMP.ID {
			frame.SetICMPEchoID(b, &f, id)
		}
	}
	frame.DecTTL(b, &f)
	copy(b[0:6], fl.DstMAC[:])
	copy(b[6:12], fl.SrcMAC[:])
	return b
}

// randomNAT makes a NAT flow of random addresses and ports (some kept)
// and a frame of it with a random transport checksum.
func randomNAT(r *rand.Rand, i int) natCase {
	ip := func() [4]byte {
		return [4]byte{byte(r.IntN(224) + 1), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
	}
	maybe := func(a, b [4]byte) [4]byte {
		if r.IntN(3) == 0 {
			return a
		}
		return b
	}
	port := func() uint16 {
		if r.IntN(8) == 0 {
			return 0
		}
		return uint16(r.Uint32())
	}
	src, dst := ip(), ip()
	sp, dp := port(), port()
	h := frametest.IPv4{Src: src, Dst: dst, TTL: uint8(2 + r.IntN(250)), ID: uint16(r.Uint32()), DF: r.IntN(2) == 0}
	payload := make([]byte, r.IntN(40))
	for j := range payload {
		if r.IntN(4) != 0 {
			payload[j] = byte(r.Uint32())
		}
	}
	var pkt []byte
	proto := []uint8{frame.ProtoTCP, frame.ProtoUDP, frame.ProtoICMP}[r.IntN(3)]
	key := NATKey{Ifindex: 1, Src: src, Dst: dst, Proto: proto}
	fl := NATFlow{DstMAC: gwMAC, SrcMAC: routerWAN, InDstMAC: routerLAN, InSrcMAC: hostMAC, CheckSrcMAC: true,
		Src: maybe(src, ip()), Dst: maybe(dst, ip()), OutIfindex: 7, Slot: uint32(i % 64), MaxFrame: 1514, MaxIP: 1500}
	var l4c int
	switch proto {
	case frame.ProtoTCP:
		flags := []uint8{frame.TCPAck, frame.TCPAck | frame.TCPPsh, frame.TCPAck | frame.TCPEce, frame.TCPAck | frame.TCPUrg | frame.TCPCwr}[r.IntN(4)]
		pkt = h.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: dp, Seq: r.Uint32(), Ack: r.Uint32(), Flags: flags, Window: uint16(r.Uint32())}, payload)
		key.SrcPort, key.DstPort = sp, dp
		fl.SrcPort, fl.DstPort = maybe16(r, sp), maybe16(r, dp)
		l4c = 20 + 16
	case frame.ProtoUDP:
		if r.IntN(5) == 0 {
			pkt = h.UDPPacketNoChecksum(sp, dp, payload)
		} else {
			pkt = h.UDPPacket(sp, dp, payload)
		}
		key.SrcPort, key.DstPort = sp, dp
		fl.SrcPort, fl.DstPort = maybe16(r, sp), maybe16(r, dp)
		l4c = 20 + 6
	default:
		id := uint16(r.Uint32())
		typ := uint8(frame.ICMPEchoRequest)
		if r.IntN(2) == 0 {
			typ = frame.ICMPEchoReply
			key.DstPort, fl.DstPort = id, maybe16(r, id)
		} else {
			key.SrcPort, fl.SrcPort = id, maybe16(r, id)
		}
		fl.ICMPType = typ
		pkt = h.ICMPPacket(typ, 0, uint32(id)<<16|uint32(r.Uint32()&0xffff), payload)
		l4c = 20 + 2
	}
	// Any transport checksum, valid or not: both paths update it
	// incrementally and keep a bad one bad.
	switch r.IntN(4) {
	case 0:
		binary.BigEndian.PutUint16(pkt[l4c:], uint16(r.Uint32()))
	case 1:
		binary.BigEndian.PutUint16(pkt[l4c:], []uint16{0, 0xffff, 1, 0xfffe}[r.IntN(4)])
	}
	fr := frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, pkt))
	return natCase{name: fmt.Sprintf("random %d proto %d", i, proto), key: key, flow: fl, frame: fr}
}

func maybe16(r *rand.Rand, v uint16) uint16 {
	if r.IntN(3) == 0 {
		return v
	}
	return uint16(r.Uint32())
}

// TestRewriteMatchesSlowPath runs the tcx and the XDP program on frames
// of installed NAT flows and compares what they leave with what package
// nat's rewrite (package frame's helpers) makes of the same frames, byte
// for byte: random addresses, ports, identifiers and checksums (zero,
// 0xffff, wrong), kept or changed.
func TestRewriteMatchesSlowPath(t *testing.T) {
	for _, mode := range []Mode{ModeTCX, ModeXDP} {
		t.Run(string(mode), func(t *testing.T) {
			p := load(t, mode)
			prog, redirect := p.progs.TCX, uint32(retRedirect)
			if mode == ModeXDP {
				prog, redirect = p.progs.XDP, retXDPRedir
			}
			r := rand.New(rand.NewPCG(20, uint64(len(mode))))
			punted := 0
			for i := range 3000 {
				c := randomNAT(r, i)
				if err := p.PutNAT(c.key, c.flow); err != nil {
					t.Fatal(err)
				}
				want := slowRewrite(t, c.frame, c.flow)
				ret, got := run(t, prog, c.frame)
				if mode == ModeTCX {
					// The filter keeps out of the rings exactly
					// the frames the tcx program forwards: one it
					// kept out that tcx refused would go back to
					// ingress, meet the filter again and go round.
					if fret, _ := run(t, p.progs.Filter, asTapped(c.frame)); (fret == 0) != (ret == redirect) {
						t.Fatalf("%s: the filter returned %d (0: kept out of the rings), the tcx program %d\nframe % x", c.name, fret, ret, c.frame)
					}
				}
				if err := p.DeleteNAT(c.key); err != nil {
					t.Fatal(err)
				}
				if ret != redirect {
					// Only an ICMP echo whose checksum the
					// identifier change makes zero goes to the
					// slow path (which sums the message).
					if c.key.Proto == frame.ProtoICMP && binary.BigEndian.Uint16(want[14+20+2:]) == 0 ||
						c.key.Proto == frame.ProtoICMP && binary.BigEndian.Uint16(want[14+20+2:]) == 0xffff {
						punted++
						continue
					}
					t.Fatalf("%s: program returned %d, want redirect %d\nframe % x", c.name, ret, redirect, c.frame)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: rewrite differs\nframe % x\nslow  % x\nfast  % x", c.name, c.frame, want, got)
				}
			}
			t.Logf("3000 frames, %d left to the slow path (ICMP checksum 0)", punted)
		})
	}
}

// TestICMPZeroChecksumPunted: an echo whose identifier change makes its
// checksum zero is the slow path's (frame.SetICMPEchoID sums the whole
// message then). The socket filter must leave it to the rings as the tcx
// program does: a frame the filter kept out that tcx refused would go back
// to ingress, meet the filter again, and go round for ever.
func TestICMPZeroChecksumPunted(t *testing.T) {
	p := load(t, ModeTCX)
	h := frametest.IPv4{Src: lanHost, Dst: server, TTL: 64}
	const from = 0x1234
	f := frametest.Pad(frametest.Frame(routerLAN, hostMAC, frame.EtherTypeIPv4, h.ICMPPacket(frame.ICMPEchoRequest, 0, from<<16|7, []byte("ping"))))
	csum := binary.BigEndian.Uint16(f[14+20+2:])
	to := -1
	for v := range 1 << 16 {
		if frame.UpdateBytes(csum, []byte{from >> 8, from & 0xff}, []byte{byte(v >> 8), byte(v)}) == 0 {
			to = v
			break
		}
	}
	if to < 0 {
		t.Fatalf("no identifier makes checksum %#04x zero", csum)
	}
	fl := natFlow()
	fl.SrcPort, fl.DstPort, fl.ICMPType = uint16(to), 0, frame.ICMPEchoRequest
	key := NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: from, Proto: frame.ProtoICMP}
	if err := p.PutNAT(key, fl); err != nil {
		t.Fatal(err)
	}
	if fret, _ := run(t, p.progs.Filter, asTapped(f)); fret == 0 {
		t.Errorf("the filter kept the echo out of the rings (identifier %#04x → %#04x, checksum %#04x → 0)", from, to, csum)
	}
	if ret, _ := run(t, p.progs.TCX, f); ret != retTCXNext {
		t.Errorf("the tcx program returned %d, want TCX_NEXT", ret)
	}
	// The control: another identifier is forwarded by both.
	fl.SrcPort = uint16(to + 1)
	if err := p.PutNAT(key, fl); err != nil {
		t.Fatal(err)
	}
	if fret, _ := run(t, p.progs.Filter, asTapped(f)); fret != 0 {
		t.Errorf("the filter left an echo of identifier %#04x to the rings (%d)", to+1, fret)
	}
	if ret, _ := run(t, p.progs.TCX, f); ret != retRedirect {
		t.Errorf("the tcx program returned %d for identifier %#04x, want redirect", ret, to+1)
	}
}
