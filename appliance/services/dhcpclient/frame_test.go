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

// TestMarshalChecksums checks the headers and checksums Marshal writes
// against refChecksum (the UDP checksum over the pseudo-header of RFC 768
// or RFC 8200 section 8.1), and the round trip through the decoder.
func TestMarshalChecksums(t *testing.T) {
	for _, fam := range []struct {
		name             string
		srcIP, dstIP     netip.Addr
		srcPort, dstPort uint16
		ipLen, maxLen    int // header and the largest payload of a 1514-byte frame
		decode           func(b []byte) (Frame, string)
		pseudo           func(ip []byte, n int) []byte
	}{
		{"IPv4", leaseIP, serverIP, 68, 67, ipv4Len, 1471,
			func(b []byte) (Frame, string) { return DecodeIPv4(b, 67, false) },
			func(ip []byte, n int) []byte {
				return append(append([]byte(nil), ip[12:20]...), 0, frame.ProtoUDP, byte(n>>8), byte(n))
			}},
		{"IPv6", serverLL, clientLL, 547, 546, ipv6Len, 1431,
			func(b []byte) (Frame, string) { return DecodeIPv6(b, clientMAC, clientLL, 546, false) },
			func(ip []byte, n int) []byte {
				return append(append([]byte(nil), ip[8:40]...), 0, 0, byte(n>>8), byte(n), 0, 0, 0, frame.ProtoUDP)
			}},
	} {
		for _, n := range []int{0, 1, 2, 3, 300, fam.maxLen} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i*7 + 3)
			}
			f := Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: fam.srcIP, DstIP: fam.dstIP, SrcPort: fam.srcPort, DstPort: fam.dstPort, Payload: payload}
			b := f.Marshal()
			ip := b[ethLen : ethLen+fam.ipLen]
			switch {
			case fam.ipLen == ipv4Len && refChecksum(ip) != 0:
				t.Errorf("%s, payload %d: IPv4 header checksum does not verify (%#04x)", fam.name, n, refChecksum(ip))
			case fam.ipLen == ipv6Len && (ip[0] != 0x60 || ip[6] != frame.ProtoUDP || ip[7] != hopLimit || int(ip[4])<<8|int(ip[5]) != udpLen+n):
				t.Errorf("%s, payload %d: IPv6 header %x", fam.name, n, ip)
			}
			udp := b[ethLen+fam.ipLen:]
			if got := refChecksum(append(fam.pseudo(ip, len(udp)), udp...)); got != 0 {
				t.Errorf("%s, payload %d: UDP checksum does not verify (%#04x)", fam.name, n, got)
			}
			got, why := fam.decode(b)
			if why != "" {
				t.Fatalf("%s, payload %d: decode: %s", fam.name, n, why)
			}
			if diff := cmp.Diff(f, got, addrCmp); diff != "" {
				t.Errorf("%s, payload %d: round trip (-want +got):\n%s", fam.name, n, diff)
			}
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
