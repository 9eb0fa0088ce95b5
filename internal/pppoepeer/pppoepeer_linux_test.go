package pppoepeer

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestFraming: an IPv4 and an IPv6 frame sent into a's end leave in the
// session (b's capture shows the framed bytes, PPP protocol 0x0021 and
// 0x0057), an ARP frame leaves as it is, and b's peer counts the session
// frames by protocol and the other one.
func TestFraming(t *testing.T) {
	testenv.Require(t, "root", "ip")
	a, b := netnstest.New(t, "ppa"), netnstest.New(t, "ppb")
	netnstest.Veth(t, netnstest.End{NS: a, Name: "a0"}, netnstest.End{NS: b, Name: "b0"})
	In(t, a, "a0", 0x1234)
	pb := In(t, b, "b0", 0x1234)
	a.IP(t, "link", "set", "a0", "up")
	b.IP(t, "link", "set", "b0", "up")
	ha := a.OpenPackets(t, "a0", false)
	hb := b.OpenPackets(t, "b0", true)

	dst, src := []byte{0x02, 0, 0, 0, 0, 0xb}, []byte{0x02, 0, 0, 0, 0, 0xa}
	ip := []byte{0x45, 0, 0, 24, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2, 0, 1, 0, 2}
	frame := func(etype uint16, payload []byte) []byte {
		f := append(append(append([]byte(nil), dst...), src...), byte(etype>>8), byte(etype))
		return append(f, payload...)
	}
	ip6 := append([]byte{0x60, 0, 0, 0, 0, 8, 17, 64}, make([]byte, 32+8)...)
	ip6[8], ip6[24] = 0x20, 0x20
	ipv4, ipv6, arp := frame(0x0800, ip), frame(0x86dd, ip6), frame(0x0806, make([]byte, 28))
	ha.Send(t, ipv4, ipv6, arp)
	got := hb.Wait(200*time.Millisecond, 3*time.Second)

	framed := func(proto uint16, ip []byte) []byte {
		w := append(append(append([]byte(nil), dst...), src...), 0x88, 0x64, 0x11, 0, 0x12, 0x34)
		w = binary.BigEndian.AppendUint16(w, uint16(len(ip)+2))
		w = binary.BigEndian.AppendUint16(w, proto)
		return append(w, ip...)
	}
	want4, want6 := framed(0x0021, ip), framed(0x0057, ip6)
	var got4, got6, asIs bool
	for _, f := range got {
		got4 = got4 || bytes.Equal(f, want4)
		got6 = got6 || bytes.Equal(f, want6)
		asIs = asIs || bytes.Equal(f, arp)
	}
	if !got4 || !got6 || !asIs {
		t.Errorf("b received % x\nwant the IPv4 frame in the session % x, the IPv6 one % x and the ARP frame as it is", got, want4, want6)
	}
	if c, err := pb.Counts(); err != nil || c.Session != 1 || c.Session6 < 1 || c.Other < 1 {
		t.Errorf("b's peer counted %+v (%v), want 1 IPv4 session frame, the IPv6 one (and the kernel's own) and the ARP frame among the others", c, err)
	}
}
