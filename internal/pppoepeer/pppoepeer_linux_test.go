package pppoepeer

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestFraming: an IPv4 frame sent into a's end leaves in the session
// (b's capture shows the framed bytes), an ARP frame leaves as it is,
// and b's peer counts the session frame and the other one.
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
	ipv4, arp := frame(0x0800, ip), frame(0x0806, make([]byte, 28))
	ha.Send(t, ipv4, arp)
	got := hb.Wait(200*time.Millisecond, 3*time.Second)

	want := append(append(append([]byte(nil), dst...), src...), 0x88, 0x64, 0x11, 0, 0x12, 0x34)
	want = binary.BigEndian.AppendUint16(want, uint16(len(ip)+2))
	want = append(append(want, 0x00, 0x21), ip...)
	var framed, asIs bool
	for _, f := range got {
		framed = framed || bytes.Equal(f, want)
		asIs = asIs || bytes.Equal(f, arp)
	}
	if !framed || !asIs {
		t.Errorf("b received % x\nwant the IPv4 frame in the session % x and the ARP frame as it is", got, want)
	}
	if c, err := pb.Counts(); err != nil || c.Session != 1 || c.Other < 1 {
		t.Errorf("b's peer counted %+v (%v), want 1 session frame and the ARP frame among the others", c, err)
	}
}
