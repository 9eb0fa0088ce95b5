package frame

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The frames of testdata/kernel-frames.hex, captured from the kernel,
// decoded as tcpdump decoded them.

func readTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name))
}

// kernelSummary is what tcpdump says about a captured frame (the comment
// above it in kernel-frames.hex), to compare with our decoding.
type kernelSummary struct {
	EtherType     uint16
	Proto         uint8
	Fragment      bool
	LaterFragment bool
	L4            bool
	Exts          ExtHeaders
	DstPort       uint16 // TCP/UDP, or the quoted one for ICMP errors
	TCPFlags      uint8
	TCPDataOff    uint8
	ICMPType      uint8
	ICMPCode      uint8
	ARPOp         uint16
	FragOff       uint16
}

func summarize(t *testing.T, b []byte, f *Frame) kernelSummary {
	s := kernelSummary{EtherType: f.EtherType, Proto: f.Proto, Fragment: f.Fragment, LaterFragment: f.LaterFragment,
		L4: f.HasL4(), Exts: f.IPv6.Exts, ARPOp: f.ARP.Op, FragOff: f.IPv4.FragOff | f.IPv6.FragOff}
	switch {
	case !f.HasL4():
	case f.Proto == ProtoTCP:
		s.DstPort, s.TCPFlags, s.TCPDataOff = f.TCP.DstPort, f.TCP.Flags, f.TCP.DataOff
	case f.Proto == ProtoUDP:
		s.DstPort = f.UDP.DstPort
	case f.IsICMP():
		s.ICMPType, s.ICMPCode = f.ICMP.Type, f.ICMP.Code
		if f.ICMP.EmbeddedOff != 0 {
			var in Inner
			if err := ParseEmbedded(b, f, &in); err != nil {
				t.Errorf("ParseEmbedded: %v", err)
			}
			s.DstPort = in.DstPort
		}
	}
	return s
}

// TestCapturedKernelFrameFields compares our decoding of the captured frames
// with tcpdump's (the comments in kernel-frames.hex).
func TestCapturedKernelFrameFields(t *testing.T) {
	const v4, v6, arp = EtherTypeIPv4, EtherTypeIPv6, EtherTypeARP
	want := map[string]kernelSummary{
		"ipv6-ns-dad":              {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: 135},
		"mldv2-report-hop-by-hop":  {EtherType: v6, Proto: ProtoICMPv6, L4: true, Exts: ExtHopByHop, ICMPType: 143},
		"arp-request":              {EtherType: arp, ARPOp: 1},
		"arp-reply":                {EtherType: arp, ARPOp: 2},
		"icmp-echo-request":        {EtherType: v4, Proto: ProtoICMP, L4: true, ICMPType: ICMPEchoRequest},
		"icmp-echo-reply":          {EtherType: v4, Proto: ProtoICMP, L4: true, ICMPType: ICMPEchoReply},
		"ipv4-frag-first":          {EtherType: v4, Proto: ProtoICMP, L4: true, Fragment: true, ICMPType: ICMPEchoRequest},
		"ipv4-frag-reply-first":    {EtherType: v4, Proto: ProtoICMP, L4: true, Fragment: true, ICMPType: ICMPEchoReply},
		"ipv4-frag-later":          {EtherType: v4, Proto: ProtoICMP, Fragment: true, LaterFragment: true, FragOff: 1480 / 8},
		"ipv4-frag-last":           {EtherType: v4, Proto: ProtoICMP, Fragment: true, LaterFragment: true, FragOff: 2960 / 8},
		"ipv6-ns":                  {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: 135},
		"ipv6-na":                  {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: 136},
		"icmpv6-echo-request":      {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: ICMPv6EchoRequest},
		"icmpv6-echo-reply":        {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: ICMPv6EchoReply},
		"ipv6-frag-first":          {EtherType: v6, Proto: ProtoICMPv6, L4: true, Fragment: true, Exts: ExtFragment, ICMPType: ICMPv6EchoRequest},
		"ipv6-frag-later":          {EtherType: v6, Proto: ProtoICMPv6, Fragment: true, LaterFragment: true, Exts: ExtFragment, FragOff: 1448 / 8},
		"ipv6-frag-last":           {EtherType: v6, Proto: ProtoICMPv6, Fragment: true, LaterFragment: true, Exts: ExtFragment, FragOff: 2896 / 8},
		"ipv6-router-solicitation": {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: 133},
		"udp4":                     {EtherType: v4, Proto: ProtoUDP, L4: true, DstPort: 33434},
		"icmp-port-unreachable":    {EtherType: v4, Proto: ProtoICMP, L4: true, ICMPType: ICMPDestUnreach, ICMPCode: 3, DstPort: 33434},
		"udp6":                     {EtherType: v6, Proto: ProtoUDP, L4: true, DstPort: 33435},
		"icmpv6-port-unreachable":  {EtherType: v6, Proto: ProtoICMPv6, L4: true, ICMPType: ICMPv6DestUnreach, ICMPCode: 4, DstPort: 33435},
		"tcp4-syn":                 {EtherType: v4, Proto: ProtoTCP, L4: true, DstPort: 9, TCPFlags: TCPSyn, TCPDataOff: 10},
		"tcp4-rst-ack":             {EtherType: v4, Proto: ProtoTCP, L4: true, TCPFlags: TCPRst | TCPAck, TCPDataOff: 5},
		"tcp6-syn":                 {EtherType: v6, Proto: ProtoTCP, L4: true, DstPort: 9, TCPFlags: TCPSyn, TCPDataOff: 10},
		"tcp6-rst-ack":             {EtherType: v6, Proto: ProtoTCP, L4: true, TCPFlags: TCPRst | TCPAck, TCPDataOff: 5},
		"tcp4-syn-ack":             {EtherType: v4, Proto: ProtoTCP, L4: true, TCPFlags: TCPSyn | TCPAck, TCPDataOff: 10},
		"tcp4-ack-timestamps":      {EtherType: v4, Proto: ProtoTCP, L4: true, DstPort: 8080, TCPFlags: TCPAck, TCPDataOff: 8},
		"tcp4-data":                {EtherType: v4, Proto: ProtoTCP, L4: true, TCPFlags: TCPAck | TCPPsh, TCPDataOff: 8},
		"dhcp-discover":            {EtherType: v4, Proto: ProtoUDP, L4: true, DstPort: 67},
	}
	frames := capturedFrames(t)
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			b, ok := frames[name]
			if !ok {
				t.Fatalf("frame %q missing from testdata", name)
			}
			var f Frame
			if err := Parse(b, &f); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := summarize(t, b, &f)
			// Ports the kernel picked at random are not in the table.
			if w.DstPort == 0 {
				got.DstPort = 0
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("decoding differs from tcpdump's (-want +got):\n%s", diff)
			}
		})
	}
	if len(frames) != len(want) {
		t.Errorf("testdata has %d frames, the table %d", len(frames), len(want))
	}
}
