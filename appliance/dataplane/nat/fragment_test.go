package nat

import (
	"encoding/binary"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// reassembled is a datagram put together from fragments by the test's
// own reading of RFC 791.
type reassembled struct {
	id      uint16
	src     [4]byte
	payload []byte // IP payload
	proto   uint8
}

// reassemble checks every fragment (length <= mtu, header checksum, no DF,
// one ID, the options they carry) and puts the datagram together; holes,
// overlaps and a missing last fragment fail the test.
func reassemble(t *testing.T, frags [][]byte, mtu int, firstOpts, laterOpts []byte) reassembled {
	t.Helper()
	var r reassembled
	var end = -1
	have := map[int]int{} // offset → length
	buf := make([]byte, 65536)
	for i, b := range frags {
		ip := b[14:]
		ihl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total > mtu || frametest.Sum(ip[:ihl]) != 0xffff {
			t.Fatalf("fragment %d: %d bytes (mtu %d), header sum %#x", i, total, mtu, frametest.Sum(ip[:ihl]))
		}
		fo := binary.BigEndian.Uint16(ip[6:])
		off, mf := int(fo&0x1fff)*8, fo&0x2000 != 0
		if fo&0x4000 != 0 {
			t.Fatalf("fragment %d has DF", i)
		}
		wantOpts := laterOpts
		if off == 0 {
			wantOpts = firstOpts
		}
		if got := ip[20:ihl]; !slices.Equal(got, wantOpts) {
			t.Errorf("fragment %d (offset %d) options % x, want % x", i, off, got, wantOpts)
		}
		id := binary.BigEndian.Uint16(ip[4:])
		if i == 0 {
			r.id, r.proto = id, ip[9]
			copy(r.src[:], ip[12:16])
		} else if id != r.id {
			t.Fatalf("fragment %d has ID %d, want %d", i, id, r.id)
		}
		data := ip[ihl:total]
		if mf && len(data)%8 != 0 {
			t.Fatalf("fragment %d: %d data bytes with MF, not a multiple of 8", i, len(data))
		}
		if _, dup := have[off]; dup {
			t.Fatalf("fragment %d: offset %d twice", i, off)
		}
		have[off] = len(data)
		copy(buf[off:], data)
		if !mf {
			end = off + len(data)
		}
	}
	if end < 0 {
		t.Fatal("no last fragment")
	}
	for at := 0; at < end; {
		n, ok := have[at]
		if !ok {
			t.Fatalf("hole at %d of %d", at, end)
		}
		at += n
	}
	r.payload = buf[:end]
	return r
}

// collect sends b and returns the forwarded frame and the outbox's frames
// for port.
func collect(t *testing.T, w *Worker, now int64, in int, b []byte, port int) [][]byte {
	t.Helper()
	res := w.Handle(now, in, slices.Clone(b))
	if res.Action != routing.Forward || res.Port != port {
		t.Fatalf("got %v/%v on %d, want forward on %d", res.Action, res.Reason, res.Port, port)
	}
	out := [][]byte{slices.Clone(res.Frame)}
	for _, o := range drain(w) {
		if o.port != port {
			t.Fatalf("outbox frame for port %d, want %d", o.port, port)
		}
		out = append(out, o.b)
	}
	return out
}

func TestFragmentation(t *testing.T) {
	payload := make([]byte, 2972) // a 3000-byte UDP datagram
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	// A security option (130, copied) and a record route (7, not copied).
	opts := slices.Concat([]byte{130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{7, 7, 4, 0, 0, 0, 0}, []byte{0, 0})
	tests := []struct {
		name      string
		wanMTU    int
		opts      []byte
		laterOpts []byte
		frags     int // how the LAN host sends it: 0 whole, else fragments of this size
	}{
		{name: "3000 bytes into 1400", wanMTU: 1400},
		{name: "3000 bytes into 576", wanMTU: 576},
		{name: "1500-byte fragments into 1400", wanMTU: 1400, frags: 1500},
		{name: "options: only copied ones in later fragments", wanMTU: 1400, opts: opts, laterOpts: []byte{130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.WAN.MTU = tt.wanMTU })
			h := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: 4242, Opts: tt.opts}
			whole := h.UDPPacket(5000, 6000, payload)
			var sent [][]byte
			if tt.frags == 0 {
				sent = [][]byte{fromLAN(hostA, whole)}
			} else {
				sent = lanFragments(whole, tt.frags)
			}
			var out [][]byte
			made := 0 // frames the box fragmented into
			for _, b := range sent {
				o := collect(t, e.lan, e.now, lanPort, b, wanPort)
				if len(o) > 1 {
					made += len(o)
				}
				out = append(out, o...)
			}
			if want := (len(whole) - 20 - len(tt.opts) + tt.wanMTU - 1) / (tt.wanMTU - 40); len(out) < want {
				t.Errorf("%d fragments, want at least %d", len(out), want)
			}
			r := reassemble(t, out, tt.wanMTU, tt.opts, tt.laterOpts)
			if r.id != 4242 || r.src != a4(wanAddr) || r.proto != frame.ProtoUDP {
				t.Errorf("datagram id %d from %v proto %d, want 4242 from %v udp", r.id, r.src, r.proto, wanAddr)
			}
			udp := r.payload
			if s := frametest.Sum(frametest.Pseudo4(a4(wanAddr), a4(remote), frame.ProtoUDP, len(udp)), udp); s != 0xffff {
				t.Errorf("UDP checksum of the reassembled datagram wrong (sum %#x)", s)
			}
			if !slices.Equal(udp[8:], payload) {
				t.Errorf("payload changed")
			}
			if got := e.lan.Stats().FragmentsOut; got != uint64(made) {
				t.Errorf("FragmentsOut %d, want %d", got, made)
			}
		})
	}
}

// lanFragments splits the IP packet ip into fragments of at most size bytes
// as a LAN host's stack would, each in a frame to the router.
func lanFragments(ip []byte, size int) [][]byte {
	ihl := int(ip[0]&0xf) * 4
	data := ip[ihl:]
	step := (size - ihl) &^ 7
	var out [][]byte
	for at := 0; at < len(data); at += step {
		end := min(at+step, len(data))
		h := slices.Clone(ip[:ihl])
		binary.BigEndian.PutUint16(h[2:], uint16(ihl+end-at))
		fo := uint16(at / 8)
		if end < len(data) {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(h[6:], fo)
		h[10], h[11] = 0, 0
		c := frametest.Checksum(h)
		h[10], h[11] = byte(c>>8), byte(c)
		out = append(out, fromLAN(hostA, slices.Concat(h, data[at:end])))
	}
	return out
}

// TestFragmentationPaths: an echo request (ping -s 3000) from the WAN side
// into a smaller LAN, a packet that waited for ARP, and an outbox too
// small for the fragments.
func TestFragmentationPaths(t *testing.T) {
	t.Run("ping -s 3000 through a 1400-byte WAN and back into a 1000-byte LAN", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.WAN.MTU, c.LAN.MTU = 1400, 1000 })
		echo := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: 9}.ICMPPacket(8, 0, 0x00070001, make([]byte, 3000))
		out := collect(t, e.lan, e.now, lanPort, fromLAN(hostA, echo), wanPort)
		if r := reassemble(t, out, 1400, nil, nil); frametest.Sum(r.payload) != 0xffff || len(r.payload) != 3008 {
			t.Errorf("echo request: %d bytes, ICMP sum %#x", len(r.payload), frametest.Sum(r.payload))
		}
		var f frame.Frame
		if err := frame.Parse(out[0], &f); err != nil {
			t.Fatal(err)
		}
		reply := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr), ID: 10}.ICMPPacket(0, 0, uint32(f.ICMP.ID)<<16|1, make([]byte, 3000))
		var back [][]byte
		for _, b := range lanFragments(reply, 1400) {
			b = slices.Concat(frametest.Frame(wanMAC, gwMAC, frame.EtherTypeIPv4, nil)[:14], b[14:])
			back = append(back, collect(t, e.wan, e.now, wanPort, b, lanPort)...)
		}
		if r := reassemble(t, back, 1000, nil, nil); frametest.Sum(r.payload) != 0xffff || r.src != a4(remote) {
			t.Errorf("echo reply: from %v, ICMP sum %#x", r.src, frametest.Sum(r.payload))
		}
	})
	t.Run("a packet that waited for ARP", func(t *testing.T) {
		cfg := testConfig()
		cfg.WAN.MTU = 1400
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lan, wan := r.NewWorker(nil), r.NewWorker(nil)
		pkt := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: 77}.UDPPacket(5000, 6000, make([]byte, 2972)))
		if res := lan.Handle(t0, lanPort, pkt); res.Action != routing.Queued {
			t.Fatalf("%v/%v, want queued", res.Action, res.Reason)
		}
		drain(lan) // the ARP request
		wan.Handle(t0+1, wanPort, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)))
		lan.Tick(t0 + 2)
		var out [][]byte
		for _, o := range drain(lan) {
			out = append(out, o.b)
		}
		if rd := reassemble(t, out, 1400, nil, nil); len(rd.payload) != 2980 || rd.id != 77 {
			t.Errorf("released datagram %d bytes id %d", len(rd.payload), rd.id)
		}
	})
	t.Run("an outbox too small", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.WAN.MTU, c.OutboxFrames = 576, 8 })
		res := e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, make([]byte, 8000))))
		if res.Action != routing.Drop || res.Reason != ReasonQueueFull {
			t.Errorf("%v/%v, want queue_full", res.Action, res.Reason)
		}
	})
}

// fragments splits a UDP datagram from A to remote into IP fragments of
// the given payload sizes (multiples of 8 but the last).
func fragments(id uint16, sizes ...int) (frags [][]byte, whole []byte) {
	total := 0
	for _, n := range sizes {
		total += n
	}
	payload := make([]byte, total-8)
	for i := range payload {
		payload[i] = byte(i)
	}
	ip := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: id}.UDPPacket(4000, 4001, payload)
	l4 := ip[20:]
	off := 0
	for i, n := range sizes {
		h := frametest.IPv4{Src: a4(ipA), Dst: a4(remote), ID: id, Proto: frame.ProtoUDP, FragOff: uint16(off / 8), MF: i < len(sizes)-1}
		frags = append(frags, fromLAN(hostA, h.Build(l4[off:off+n])))
		off += n
	}
	return frags, ip
}

func TestFragments(t *testing.T) {
	e := newEnv(t, nil)
	// Give A's port 4000 to B first so A's fragments get a new port.
	e.forward(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote)}.UDPPacket(4000, 4001, nil)), wanPort)
	frags, whole := fragments(77, 24, 16, 13)
	first, f := e.forward(LAN, frags[0], wanPort)
	natPort := f.UDP.SrcPort
	if natPort == 4000 || f.IPv4.SrcAddr() != wanAddr {
		t.Fatalf("first fragment: %v:%d", f.IPv4.SrcAddr(), natPort)
	}
	// Reassemble what the router sends and check the UDP checksum over it.
	outs := [][]byte{first}
	for _, fr := range frags[1:] {
		b, g := e.forward(LAN, fr, wanPort)
		if g.IPv4.SrcAddr() != wanAddr || g.IPv4.DstAddr() != remote || g.IPv4.TTL != 63 {
			t.Errorf("later fragment: %v > %v ttl %d", g.IPv4.SrcAddr(), g.IPv4.DstAddr(), g.IPv4.TTL)
		}
		outs = append(outs, append([]byte(nil), b...))
	}
	var l4 []byte
	for _, o := range outs {
		l4 = append(l4, o[14+20:14+int(binary.BigEndian.Uint16(o[16:]))]...)
	}
	if len(l4) != len(whole)-20 {
		t.Fatalf("reassembled %d bytes, want %d", len(l4), len(whole)-20)
	}
	if s := frametest.Sum(frametest.Pseudo4(a4(wanAddr), a4(remote), frame.ProtoUDP, len(l4)), l4); s != 0xffff {
		t.Errorf("reassembled datagram's UDP checksum wrong (sum %#x)", s)
	}
	if binary.BigEndian.Uint16(l4[0:]) != natPort {
		t.Errorf("reassembled source port %d, want %d", binary.BigEndian.Uint16(l4[0:]), natPort)
	}
	// Overlap: a fragment repeating units is dropped.
	frags2, _ := fragments(78, 24, 16, 13)
	e.forward(LAN, frags2[0], wanPort)
	if res := e.send(LAN, frags2[0][:0:0]); res.Action != routing.Drop {
		t.Errorf("empty frame: %v", res.Action)
	}
	e.forward(LAN, frags2[1], wanPort)
	for i, fr := range frags2[:2] {
		if res := e.send(LAN, fr); res.Action != routing.Drop || res.Reason != ReasonFragment {
			t.Errorf("fragment %d again: %v/%v, want drop fragment", i, res.Action, res.Reason)
		}
	}
	// A later fragment without its first is dropped.
	frags3, _ := fragments(79, 24, 16, 13)
	if res := e.send(LAN, frags3[2]); res.Action != routing.Drop || res.Reason != ReasonFragment {
		t.Errorf("fragment without first: %v/%v, want drop fragment", res.Action, res.Reason)
	}
}
