package dhcpclient

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane/frame"
)

var (
	clientMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	serverMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe}
	serverIP  = netip.MustParseAddr("192.0.2.1")
	leaseIP   = netip.MustParseAddr("192.0.2.100")
	clientLL  = netip.MustParseAddr("fe80::ff:fe00:1")
	serverLL  = netip.MustParseAddr("fe80::ff:fe00:fe")
)

// addrCmp compares netip values with ==.
var addrCmp = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// refChecksum is the Internet checksum computed the slow, obvious way,
// as a check on the one Marshal and the decoders use.
func refChecksum(b []byte) uint16 {
	var s uint64
	for i := 0; i < len(b); i += 2 {
		w := uint64(b[i]) << 8
		if i+1 < len(b) {
			w |= uint64(b[i+1])
		}
		s += w
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestMarshalChecksums(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 300, 1471} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*7 + 3)
		}
		f := Frame{DstMAC: serverMAC, SrcMAC: clientMAC, SrcIP: leaseIP, DstIP: serverIP, SrcPort: 68, DstPort: 67, Payload: payload}
		b := f.Marshal()
		ip := b[ethLen : ethLen+ipv4Len]
		if got := refChecksum(ip); got != 0 {
			t.Errorf("payload %d: IPv4 header checksum does not verify (%#04x)", n, got)
		}
		udp := b[ethLen+ipv4Len:]
		pseudo := append(append(append([]byte(nil), ip[12:20]...), 0, frame.ProtoUDP), byte(len(udp)>>8), byte(len(udp)))
		if got := refChecksum(append(pseudo, udp...)); got != 0 {
			t.Errorf("payload %d: UDP checksum does not verify (%#04x)", n, got)
		}
		got, why := DecodeIPv4(b, 67, false)
		if why != "" {
			t.Fatalf("payload %d: decode: %s", n, why)
		}
		if diff := cmp.Diff(f, got, addrCmp); diff != "" {
			t.Errorf("payload %d: round trip (-want +got):\n%s", n, diff)
		}
	}
}

// TestMarshalIPv6 checks an IPv6 frame's header and UDP checksum (over the
// pseudo-header of RFC 8200 section 8.1) and the round trip through
// DecodeIPv6.
func TestMarshalIPv6(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 300, 1431} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*5 + 1)
		}
		f := Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverLL, DstIP: clientLL, SrcPort: 547, DstPort: 546, Payload: payload}
		b := f.Marshal()
		ip := b[ethLen : ethLen+ipv6Len]
		if ip[0] != 0x60 || ip[6] != frame.ProtoUDP || ip[7] != hopLimit || int(ip[4])<<8|int(ip[5]) != udpLen+n {
			t.Errorf("payload %d: IPv6 header %x", n, ip)
		}
		udp := b[ethLen+ipv6Len:]
		pseudo := append(append([]byte(nil), ip[8:40]...), 0, 0, byte(len(udp)>>8), byte(len(udp)), 0, 0, 0, frame.ProtoUDP)
		if got := refChecksum(append(pseudo, udp...)); got != 0 {
			t.Errorf("payload %d: UDP checksum does not verify (%#04x)", n, got)
		}
		got, why := DecodeIPv6(b, clientMAC, clientLL, 546, false)
		if why != "" {
			t.Fatalf("payload %d: decode: %s", n, why)
		}
		if diff := cmp.Diff(f, got, addrCmp); diff != "" {
			t.Errorf("payload %d: round trip (-want +got):\n%s", n, diff)
		}
	}
}

// TestZeroChecksum: a UDP checksum of 0 means none over IPv4 and is wrong
// over IPv6, unless the kernel vouches for the datagram.
func TestZeroChecksum(t *testing.T) {
	zero := func(b []byte, ipLen int) []byte {
		b[ethLen+ipLen+6], b[ethLen+ipLen+7] = 0, 0
		return b
	}
	v4 := zero((&Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverIP, DstIP: leaseIP, SrcPort: 67, DstPort: 68, Payload: []byte("x")}).Marshal(), ipv4Len)
	v6 := zero((&Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverLL, DstIP: clientLL, SrcPort: 547, DstPort: 546, Payload: []byte("x")}).Marshal(), ipv6Len)
	for _, tc := range []struct {
		name      string
		csumValid bool
		decode    func([]byte, bool) (Frame, string)
		b         []byte
		want      string
	}{
		{"IPv4", false, func(b []byte, v bool) (Frame, string) { return DecodeIPv4(b, 68, v) }, v4, ""},
		{"IPv6", false, func(b []byte, v bool) (Frame, string) { return DecodeIPv6(b, clientMAC, clientLL, 546, v) }, v6, DropBadUDPChecksum},
		{"IPv6, vouched", true, func(b []byte, v bool) (Frame, string) { return DecodeIPv6(b, clientMAC, clientLL, 546, v) }, v6, ""},
	} {
		if _, why := tc.decode(tc.b, tc.csumValid); why != tc.want {
			t.Errorf("%s: why %q, want %q", tc.name, why, tc.want)
		}
	}
}
