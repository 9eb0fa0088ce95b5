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

// udp6Verifies reports whether the UDP checksum of a udpFrame6 verifies.
func udp6Verifies(f []byte) bool {
	udp := f[sportOff6:]
	return frametest.Checksum(frametest.Pseudo6([16]byte(f[22:38]), [16]byte(f[38:54]), frametest.ProtoUDP, len(udp)), udp) == 0 &&
		binary.BigEndian.Uint16(f[udpSumOff6:]) != 0
}

func TestUDPFrame6(t *testing.T) {
	for _, tc := range []struct{ size, want int }{{64, 62}, {66, 62}, {67, 63}, {512, 508}, {1518, 1514}} {
		f, err := udpFrame6(tc.size, macG0, macB0, ipv6GenIP, ipv6ServerIP, firstSport, udpDport)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) != tc.want {
			t.Errorf("size %d: frame of %d bytes, want %d", tc.size, len(f), tc.want)
		}
		var pf frame.Frame
		if err := frame.Parse(f, &pf); err != nil {
			t.Fatalf("size %d: %v", tc.size, err)
		}
		got := fmt.Sprintf("%x %x %v %v %v>%v hops %d", pf.Dst, pf.Src, pf.IsIPv6(), pf.Proto == frame.ProtoUDP,
			netip.AddrFrom16(pf.IPv6.Src), netip.AddrFrom16(pf.IPv6.Dst), f[21])
		want := fmt.Sprintf("%x %x true true %v>%v hops 64", [6]byte(macB0), [6]byte(macG0), ipv6GenIP, ipv6ServerIP)
		if got != want {
			t.Errorf("size %d: parsed %s, want %s", tc.size, got, want)
		}
		if pl := int(binary.BigEndian.Uint16(f[18:])); pl != tc.want-54 {
			t.Errorf("size %d: payload length %d, want %d", tc.size, pl, tc.want-54)
		}
		if !udp6Verifies(f) {
			t.Errorf("size %d: the UDP checksum does not verify", tc.size)
		}
		for _, n := range []int{0, 1, 1000, maxFlows - 1} {
			setFlow6(f, n)
			if sp := binary.BigEndian.Uint16(f[sportOff6:]); sp != uint16(firstSport+n) || !udp6Verifies(f) {
				t.Errorf("size %d, setFlow6(%d): source port %d, checksum verifies %v", tc.size, n, sp, udp6Verifies(f))
			}
			setDport6(f, n)
			if dp := binary.BigEndian.Uint16(f[sportOff6+2:]); dp != uint16(firstSport+n) || !udp6Verifies(f) {
				t.Errorf("size %d, setDport6(%d): destination port %d, checksum verifies %v", tc.size, n, dp, udp6Verifies(f))
			}
		}
	}
	for _, tc := range []struct {
		name     string
		size     int
		sip, dip netip.Addr
	}{
		{"too big", 1519, ipv6GenIP, ipv6ServerIP},
		{"IPv4 source", 64, genIP, ipv6ServerIP},
		{"IPv4-mapped destination", 64, ipv6GenIP, netip.MustParseAddr("::ffff:10.0.0.1")},
	} {
		if _, err := udpFrame6(tc.size, macG0, macB0, tc.sip, tc.dip, firstSport, udpDport); err == nil {
			t.Errorf("%s: udpFrame6 succeeded", tc.name)
		}
	}
}

// FuzzSetFlow6 checks that the port rewrites keep any frame's UDP
// checksum valid, whatever its payload and ports.
func FuzzSetFlow6(f *testing.F) {
	f.Add(0, 0, 100, byte(0))
	f.Add(maxFlows-1, 12345, 0, byte(0xff))
	f.Add(7, 1, 1400, byte(0x5a))
	f.Fuzz(func(t *testing.T, n, m, payload int, fill byte) {
		n, m = int(uint(n)%maxFlows), int(uint(m)%maxFlows)
		size := minFrame6 + int(uint(payload)%(maxFrame-minFrame6+1))
		fr, err := udpFrame6(size, macG0, macB0, ipv6GenIP, ipv6ServerIP, firstSport, udpDport)
		if err != nil {
			t.Fatal(err)
		}
		for i := sportOff6 + udpLen; i < len(fr); i++ {
			fr[i] = fill ^ byte(i)
		}
		// A fresh checksum over the new payload, then the rewrites.
		binary.BigEndian.PutUint16(fr[udpSumOff6:], 0)
		sum := frametest.Checksum(frametest.Pseudo6(ipv6GenIP.As16(), ipv6ServerIP.As16(), frametest.ProtoUDP, len(fr)-sportOff6), fr[sportOff6:])
		if sum == 0 {
			sum = 0xffff
		}
		binary.BigEndian.PutUint16(fr[udpSumOff6:], sum)
		setFlow6(fr, n)
		setDport6(fr, m)
		if !udp6Verifies(fr) {
			t.Fatalf("setFlow6(%d), setDport6(%d) on %d bytes: the checksum does not verify", n, m, size)
		}
	})
}
