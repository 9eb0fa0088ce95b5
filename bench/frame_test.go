package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

func TestUDPFrame(t *testing.T) {
	for _, size := range []int{64, 512, 1518} {
		f, err := udpFrame(size, macG0, macS0, genIP, sinkIP)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) != size-4 {
			t.Errorf("size %d: frame of %d bytes, want %d (no FCS)", size, len(f), size-4)
		}
		if got := [6]byte(f[0:6]); got != [6]byte(macS0) {
			t.Errorf("dst %x", got)
		}
		if got := [6]byte(f[6:12]); got != [6]byte(macG0) {
			t.Errorf("src %x", got)
		}
		if et := binary.BigEndian.Uint16(f[12:]); et != 0x0800 {
			t.Errorf("ethertype %#x", et)
		}
		ip := f[14:34]
		if frametest.Checksum(ip) != 0 {
			t.Errorf("size %d: IP header checksum does not verify", size)
		}
		if tl := int(binary.BigEndian.Uint16(ip[2:])); tl != size-4-14 {
			t.Errorf("IP total length %d, want %d", tl, size-18)
		}
		if s, d := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])); s != genIP || d != sinkIP {
			t.Errorf("addresses %v -> %v", s, d)
		}
		if ul := int(binary.BigEndian.Uint16(f[38:])); ul != size-4-34 {
			t.Errorf("UDP length %d, want %d", ul, size-38)
		}
		setFlow(f, 1000)
		if sp := binary.BigEndian.Uint16(f[34:]); sp != firstSport+1000 {
			t.Errorf("source port %d after setFlow(1000)", sp)
		}
		if frametest.Checksum(ip) != 0 {
			t.Errorf("setFlow broke the IP checksum")
		}
	}
	for _, size := range []int{63, 1519} {
		if _, err := udpFrame(size, macG0, macS0, genIP, sinkIP); err == nil {
			t.Errorf("udpFrame(%d) succeeded", size)
		}
	}
	if _, err := udpFrame(64, macG0, macS0, netip.MustParseAddr("::1"), sinkIP); err == nil {
		t.Error("udpFrame with an IPv6 address succeeded")
	}
}

func TestLearnFrame(t *testing.T) {
	f := learnFrame(macS0)
	if len(f) != 60 || [6]byte(f[0:6]) != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} || [6]byte(f[6:12]) != [6]byte(macS0) {
		t.Errorf("learn frame %x", f)
	}
}

func TestRuleAddr(t *testing.T) {
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "10.128.0.1"}, {254, "10.128.0.255"}, {255, "10.128.1.0"}, {9999, "10.128.39.16"}} {
		if got := ruleAddr(tc.i).String(); got != tc.want {
			t.Errorf("ruleAddr(%d) = %s, want %s", tc.i, got, tc.want)
		}
	}
	// No rule address ever matches the generator's source.
	block := netip.MustParsePrefix("10.128.0.0/9")
	for _, i := range []int{0, 1 << 20} {
		if a := ruleAddr(i); !block.Contains(a) || a == genIP {
			t.Errorf("ruleAddr(%d) = %v outside %v", i, a, block)
		}
	}
	if block.Contains(genIP) {
		t.Errorf("the generator's %v is inside the rules' %v", genIP, block)
	}
}

// TestSetFresh: every fresh tuple differs, and its IPv4 header checksum
// verifies.
func TestSetFresh(t *testing.T) {
	f, err := udpFrame(64, macG0, macB0, natGenIP, natServerIP)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range []uint64{0, 1, 249, 250, 251, 250 * 16, 250*16 + 1, 250*16*64000 - 1, 1<<40 + 3} {
		setFresh(f, n)
		var pf frame.Frame
		if err := frame.Parse(f, &pf); err != nil || !frame.IPv4HeaderValid(f, &pf) {
			t.Fatalf("tuple %d: parse %v, header checksum valid %v", n, err, frame.IPv4HeaderValid(f, &pf))
		}
		k := fmt.Sprint(pf.IPv4.Src, pf.UDP.SrcPort, pf.UDP.DstPort)
		if seen[k] {
			t.Errorf("tuple %d repeats %s", n, k)
		}
		seen[k] = true
		if pf.IPv4.Src[3] < 2 || pf.IPv4.Src[3] > 251 || [3]byte(pf.IPv4.Src[:3]) != [3]byte{192, 168, 60} {
			t.Errorf("tuple %d: source %v outside the LAN hosts", n, pf.IPv4.Src)
		}
	}
}

// TestStamp: a stamp reads back; an unstamped frame has none.
func TestStamp(t *testing.T) {
	f, err := udpFrame(64, macG0, macB0, genIP, sinkIP)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readStamp(f); ok {
		t.Error("an unstamped frame has a stamp")
	}
	putStamp(f, 1234567890123)
	if ns, ok := readStamp(f); !ok || ns != 1234567890123 {
		t.Errorf("readStamp = %d, %v", ns, ok)
	}
	if _, ok := readStamp(f[:stampOff+8]); ok {
		t.Error("a short frame has a stamp")
	}
}
