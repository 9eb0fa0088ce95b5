//go:build linux

package frame

// A live cross-check against the Linux kernel: two throw-away network
// namespaces joined by a veth pair (TX checksum offload off, so the kernel
// computes every checksum in software), real traffic from kernel sockets,
// frames captured with AF_PACKET on B's end (plus PACKET_AUXDATA for the
// VLAN tags the kernel strips on receive), then parsed and checked here.
// The kernel under test has no 802.1Q devices, so tagged frames are built
// here and injected through AF_PACKET; what is checked for them is the
// kernel's tag stripping and our re-insertion.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame/frametest"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	kIP4A = [4]byte{192, 168, 77, 1}
	kIP4B = [4]byte{192, 168, 77, 2}
	kIP6A = [16]byte{0xfd, 0, 0, 0x77, 14: 0, 15: 1}
	kIP6B = [16]byte{0xfd, 0, 0, 0x77, 14: 0, 15: 2}
)

// kernelTraffic sets up the namespaces, sends the traffic and returns what
// the capture saw on A's end, plus the local UDP ports it used.
type kernelRun struct {
	frames         []captured
	udp4Port       int
	udp6Port       int
	tcpPayload     []byte
	pingData       []byte
	bigUDP4, big6  int // local ports of the fragmented datagrams
	tcpClientPort4 int
	tagged         [][]byte // VLAN-tagged frames injected from A
}

func runKernelTraffic(t *testing.T) *kernelRun {
	if os.Geteuid() != 0 {
		needPrivilege(t, "the kernel cross-check needs root (network namespaces, AF_PACKET)")
	}
	a, b := newNSThread(t), newNSThread(t)
	var nsB int
	if err := b.run(func() (err error) {
		nsB, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatalf("open netns: %v", err)
	}
	defer unix.Close(nsB)
	if err := a.run(func() error {
		veth := &netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: "v0", HardwareAddr: net.HardwareAddr(macA[:])},
			PeerName:  "v1", PeerHardwareAddr: net.HardwareAddr(macB[:]), PeerNamespace: netlink.NsFd(nsB),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth: %w", err)
		}
		return nsSetup("v0", "192.168.77.1/24", "fd00:77::1/64")
	}); err != nil {
		t.Fatalf("namespace A: %v", err)
	}
	if err := b.run(func() error { return nsSetup("v1", "192.168.77.2/24", "fd00:77::2/64") }); err != nil {
		t.Fatalf("namespace B: %v", err)
	}

	// A TCP server in B that sends a greeting and closes.
	r := &kernelRun{tcpPayload: []byte("e1kbox-tcp greeting"), pingData: []byte("e1kbox-ping payload")}
	var ln net.Listener
	if err := b.run(func() (err error) {
		ln, err = net.Listen("tcp4", "192.168.77.2:8080")
		return err
	}); err != nil {
		t.Fatalf("listen in B: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write(r.tcpPayload)
		_ = c.Close()
	}()
	t.Cleanup(func() {
		ln.Close()
		<-served
	})

	// Capture on B's veth end: A's frames arrive, B's leave.
	var fd int
	if err := b.run(func() error {
		link, err := netlink.LinkByName("v1")
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: link.Attrs().Index}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return fmt.Errorf("PACKET_AUXDATA: %w", err)
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}); err != nil {
		t.Fatalf("capture socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	stop := make(chan struct{})
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		capture(fd, stop, &r.frames, &mu)
	}()
	stopCapture := sync.OnceFunc(func() {
		close(stop)
		<-done
	})
	t.Cleanup(stopCapture) // before fd's close: cleanups run last first

	err := a.run(func() error { return sendTraffic(r) })
	if err == nil {
		time.Sleep(300 * time.Millisecond) // let the last replies arrive
	}
	stopCapture()
	if err != nil {
		t.Fatalf("traffic: %v", err)
	}
	return r
}

// sendTraffic runs in namespace A.
func sendTraffic(r *kernelRun) error {
	deadline := time.Now().Add(5 * time.Second)
	// ICMP echo over a raw socket; the kernel builds the reply.
	ic, err := net.ListenPacket("ip4:icmp", "192.168.77.1")
	if err != nil {
		return fmt.Errorf("icmp socket: %w", err)
	}
	defer ic.Close()
	echo := frametest.WithChecksum(frametest.ICMPRaw(ICMPEchoRequest, 0, 0x4242<<16|1, r.pingData), 2, nil)
	if _, err := ic.WriteTo(echo, &net.IPAddr{IP: net.IP(kIP4B[:])}); err != nil {
		return fmt.Errorf("icmp write: %w", err)
	}
	_ = ic.SetReadDeadline(deadline)
	if _, _, err := ic.ReadFrom(make([]byte, 1500)); err != nil {
		return fmt.Errorf("icmp echo reply: %w", err)
	}
	// ICMPv6 echo over a raw socket: the kernel fills in the checksum.
	ic6, err := net.ListenPacket("ip6:ipv6-icmp", "fd00:77::1")
	if err != nil {
		return fmt.Errorf("icmpv6 socket: %w", err)
	}
	defer ic6.Close()
	if _, err := ic6.WriteTo(frametest.ICMPRaw(ICMPv6EchoRequest, 0, 0x4343<<16|1, r.pingData), &net.IPAddr{IP: net.IP(kIP6B[:])}); err != nil {
		return fmt.Errorf("icmpv6 write: %w", err)
	}
	// UDP to closed ports: the kernel answers port unreachable.
	send := func(network string, raddr string, n int) (int, error) {
		c, err := net.Dial(network, raddr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		if _, err := c.Write(bytes.Repeat([]byte("e1kbox-udp "), n)[:n]); err != nil {
			return 0, err
		}
		// The port unreachable comes back as ECONNREFUSED.
		if _, err := c.Read(make([]byte, 16)); err == nil {
			return 0, fmt.Errorf("%s %s: read succeeded on a closed port", network, raddr)
		}
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	steps := []struct {
		port    *int
		network string
		raddr   string
		n       int
	}{
		{&r.udp4Port, "udp4", "192.168.77.2:33434", 11},
		{&r.udp6Port, "udp6", "[fd00:77::2]:33435", 12},
		{&r.bigUDP4, "udp4", "192.168.77.2:33436", 3000},
		{&r.big6, "udp6", "[fd00:77::2]:33436", 3000},
	}
	for _, s := range steps {
		if *s.port, err = send(s.network, s.raddr, s.n); err != nil {
			return fmt.Errorf("udp %s: %w", s.raddr, err)
		}
	}
	// TCP: a handshake and a greeting, and a reset from a closed IPv6 port.
	c, err := net.DialTimeout("tcp4", "192.168.77.2:8080", 5*time.Second)
	if err != nil {
		return fmt.Errorf("tcp dial: %w", err)
	}
	r.tcpClientPort4 = c.LocalAddr().(*net.TCPAddr).Port
	_ = c.SetDeadline(deadline)
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || !bytes.Equal(got, r.tcpPayload) {
		return fmt.Errorf("tcp read %q: %v", got, err)
	}
	if c, err := net.DialTimeout("tcp6", "[fd00:77::2]:9", 5*time.Second); err == nil {
		c.Close()
		return fmt.Errorf("tcp6 connect to a closed port succeeded")
	}
	return injectTagged(r)
}

// injectTagged sends VLAN-tagged frames from A through AF_PACKET.
func injectTagged(r *kernelRun) error {
	link, err := netlink.LinkByName("v0")
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	ip4 := frametest.IPv4{Src: kIP4A, Dst: kIP4B, Proto: ProtoUDP, TTL: 64, ID: 0x100}
	ip6 := frametest.IPv6{Src: kIP6A, Dst: kIP6B, NextHeader: ProtoTCP, HopLimit: 64}
	r.tagged = [][]byte{
		slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv4, frametest.Tag{TPID: EtherTypeVLAN, TCI: 3<<13 | 100}),
			ip4.Build(ip4.UDP(40100, 33437, frametest.Payload(20)))),
		slices.Concat(frametest.Eth(macB, macA, EtherTypeIPv6, frametest.Tag{TPID: EtherTypeQinQ, TCI: 200}, frametest.Tag{TPID: EtherTypeVLAN, TCI: 5<<13 | 300}),
			ip6.Build(ip6.TCP(frametest.TCP{SrcPort: 40200, DstPort: 443, Flags: TCPSyn, Opts: synOpts}, nil))),
	}
	for _, fr := range r.tagged {
		sa := &unix.SockaddrLinklayer{Ifindex: link.Attrs().Index, Halen: 6}
		copy(sa.Addr[:], macB[:])
		if err := unix.Sendto(fd, fr, 0, sa); err != nil {
			return fmt.Errorf("inject: %w", err)
		}
	}
	return nil
}

func TestKernelCrossCheck(t *testing.T) {
	r := runKernelTraffic(t)
	type parsed struct {
		c captured
		f Frame
	}
	var all []parsed
	verified := 0
	for _, c := range r.frames {
		var f Frame
		var err error
		if c.hasVLAN {
			err = ParseWithTag(c.data, VLANTag{TPID: c.tpid, TCI: c.tci}, &f)
		} else {
			err = Parse(c.data, &f)
		}
		if err != nil {
			t.Errorf("kernel frame does not parse: %v\n%x", err, c.data)
			continue
		}
		if c.status&unix.TP_STATUS_CSUMNOTREADY != 0 {
			t.Errorf("frame with a partial checksum (offload still on): %x", c.data)
			continue
		}
		if err := VerifyChecksums(c.data, &f); err != nil {
			t.Errorf("kernel-built frame fails VerifyChecksums: %v\n%+v\n%x", err, f, c.data)
		} else if f.HasL4() && !f.Fragment {
			verified++
		}
		all = append(all, parsed{c, f})
	}
	t.Logf("captured %d frames, %d transport checksums verified", len(r.frames), verified)
	if verified < 10 {
		t.Errorf("only %d transport checksums verified", verified)
	}
	find := func(what string, pred func(b []byte, f *Frame) bool) *parsed {
		t.Helper()
		for i := range all {
			if pred(all[i].c.data, &all[i].f) {
				return &all[i]
			}
		}
		t.Errorf("no captured frame: %s", what)
		return nil
	}
	fromA4 := func(f *Frame) bool { return f.IsIPv4() && f.IPv4.Src == kIP4A && f.IPv4.Dst == kIP4B }
	fromB4 := func(f *Frame) bool { return f.IsIPv4() && f.IPv4.Src == kIP4B && f.IPv4.Dst == kIP4A }
	fromA6 := func(f *Frame) bool { return f.IsIPv6() && f.IPv6.Src == kIP6A && f.IPv6.Dst == kIP6B }
	fromB6 := func(f *Frame) bool { return f.IsIPv6() && f.IPv6.Src == kIP6B && f.IPv6.Dst == kIP6A }
	payload := func(b []byte, f *Frame) []byte { return b[f.PayloadOff:f.L3End] }

	find("ARP request from A", func(_ []byte, f *Frame) bool {
		return f.EtherType == EtherTypeARP && f.ARP.Op == 1 && f.ARP.SenderMAC == macA && f.ARP.SenderIP == kIP4A && f.ARP.TargetIP == kIP4B && f.Dst == macBcast
	})
	find("ARP reply from B", func(_ []byte, f *Frame) bool {
		return f.EtherType == EtherTypeARP && f.ARP.Op == 2 && f.ARP.SenderMAC == macB && f.ARP.TargetMAC == macA && f.ARP.SenderIP == kIP4B
	})
	find("neighbour solicitation from A", func(_ []byte, f *Frame) bool {
		return f.IsICMP() && f.IsIPv6() && f.ICMP.Type == 135 && f.IPv6.HopLimit == 255 && f.Src == macA
	})
	find("neighbour advertisement from B", func(_ []byte, f *Frame) bool {
		return f.IsICMP() && fromB6(f) && f.ICMP.Type == 136
	})
	find("ICMP echo reply built by B", func(b []byte, f *Frame) bool {
		return fromB4(f) && f.IsICMP() && f.ICMP.Type == ICMPEchoReply && f.ICMP.ID == 0x4242 && f.ICMP.Seq == 1 && bytes.Equal(payload(b, f), r.pingData)
	})
	find("ICMPv6 echo request checksummed by A's kernel", func(b []byte, f *Frame) bool {
		return fromA6(f) && f.IsICMP() && f.ICMP.Type == ICMPv6EchoRequest && f.ICMP.ID == 0x4343 && bytes.Equal(payload(b, f), r.pingData)
	})
	find("ICMPv6 echo reply built by B", func(_ []byte, f *Frame) bool {
		return fromB6(f) && f.IsICMP() && f.ICMP.Type == ICMPv6EchoReply && f.ICMP.ID == 0x4343
	})
	find("UDP from A", func(b []byte, f *Frame) bool {
		return fromA4(f) && f.Proto == ProtoUDP && f.HasL4() && int(f.UDP.SrcPort) == r.udp4Port && f.UDP.DstPort == 33434 &&
			f.UDP.Length == 8+11 && bytes.Equal(payload(b, f), []byte("e1kbox-udp "))
	})
	find("UDPv6 from A", func(b []byte, f *Frame) bool {
		return fromA6(f) && f.Proto == ProtoUDP && int(f.UDP.SrcPort) == r.udp6Port && f.UDP.DstPort == 33435 && f.UDP.Length == 8+12
	})
	embedded := func(b []byte, f *Frame, family func(*Frame) bool, typ, code uint8, sport, dport int) bool {
		if !family(f) || !f.IsICMP() || f.ICMP.Type != typ || f.ICMP.Code != code {
			return false
		}
		var in Inner
		if err := ParseEmbedded(b, f, &in); err != nil {
			t.Errorf("ParseEmbedded of the kernel's ICMP error: %v", err)
			return false
		}
		return in.Proto == ProtoUDP && int(in.SrcPort) == sport && int(in.DstPort) == dport
	}
	find("ICMP port unreachable from B quoting the UDP header", func(b []byte, f *Frame) bool {
		return embedded(b, f, fromB4, ICMPDestUnreach, 3, r.udp4Port, 33434)
	})
	find("ICMPv6 port unreachable from B quoting the UDP header", func(b []byte, f *Frame) bool {
		return embedded(b, f, fromB6, ICMPv6DestUnreach, 4, r.udp6Port, 33435)
	})
	find("ICMP port unreachable for the reassembled big datagram", func(b []byte, f *Frame) bool {
		return embedded(b, f, fromB4, ICMPDestUnreach, 3, r.bigUDP4, 33436)
	})
	find("TCP SYN with options from A", func(_ []byte, f *Frame) bool {
		return fromA4(f) && f.Proto == ProtoTCP && f.TCP.Flags == TCPSyn && f.TCP.DataOff > 5 && int(f.TCP.SrcPort) == r.tcpClientPort4 && f.TCP.DstPort == 8080
	})
	find("TCP SYN-ACK from B", func(_ []byte, f *Frame) bool {
		return fromB4(f) && f.Proto == ProtoTCP && f.TCP.Flags&^TCPEce == TCPSyn|TCPAck && f.TCP.SrcPort == 8080 && f.TCP.ValidFlags()
	})
	find("TCP greeting from B", func(b []byte, f *Frame) bool {
		return fromB4(f) && f.Proto == ProtoTCP && f.TCP.SrcPort == 8080 && bytes.Equal(payload(b, f), r.tcpPayload)
	})
	find("TCPv6 RST from B's closed port", func(_ []byte, f *Frame) bool {
		return fromB6(f) && f.Proto == ProtoTCP && f.TCP.Flags == TCPRst|TCPAck && f.TCP.SrcPort == 9 && f.TCP.DataOff == 5
	})

	// Fragmented datagrams: reassemble them with the offsets Parse gives
	// and check the kernel's UDP checksum over the whole datagram.
	reassemble := func(what string, family func(*Frame) bool, id func(*Frame) uint32, off func(*Frame) uint16, more func(*Frame) bool) {
		var frags []*parsed
		for i := range all {
			if f := &all[i].f; family(f) && f.Fragment && f.Proto == ProtoUDP {
				frags = append(frags, &all[i])
			}
		}
		if len(frags) < 2 {
			t.Errorf("%s: %d fragments captured", what, len(frags))
			return
		}
		slices.SortFunc(frags, func(x, y *parsed) int { return int(off(&x.f)) - int(off(&y.f)) })
		first := &frags[0].f
		if first.LaterFragment || !first.HasL4() || int(first.UDP.SrcPort) == 0 || first.UDP.Length != 3008 {
			t.Errorf("%s: first fragment %+v", what, first)
			return
		}
		var dgram []byte
		for i, p := range frags {
			f := &p.f
			if id(f) != id(first) || int(off(f))*8 != len(dgram) || f.LaterFragment != (i > 0) || more(f) != (i < len(frags)-1) {
				t.Errorf("%s: fragment %d out of sequence: %+v", what, i, f)
				return
			}
			start := f.PayloadOff
			if i == 0 {
				start = f.L4Off
			}
			dgram = append(dgram, p.c.data[start:f.L3End]...)
		}
		if len(dgram) != 3008 {
			t.Errorf("%s: reassembled %d bytes, want 3008", what, len(dgram))
			return
		}
		var ps uint16
		if first.IsIPv4() {
			ps = PseudoSumIPv4(first.IPv4.Src, first.IPv4.Dst, ProtoUDP, uint16(len(dgram)))
		} else {
			ps = PseudoSumIPv6(first.IPv6.Src, first.IPv6.Dst, ProtoUDP, uint32(len(dgram)))
		}
		if s := Sum(dgram, ps); s != 0xffff {
			t.Errorf("%s: reassembled datagram checksum does not verify (sum %#04x)", what, s)
		}
	}
	reassemble("IPv4 fragments", fromA4, func(f *Frame) uint32 { return uint32(f.IPv4.ID) },
		func(f *Frame) uint16 { return f.IPv4.FragOff }, func(f *Frame) bool { return f.IPv4.MF })
	reassemble("IPv6 fragments", fromA6, func(f *Frame) uint32 { return f.IPv6.FragID },
		func(f *Frame) uint16 { return f.IPv6.FragOff }, func(f *Frame) bool { return f.IPv6.MF })

	// Tagged frames: the kernel strips the outer tag into the aux data.
	// ParseWithTag on what it delivers must agree with Parse of the frame
	// as sent, and InsertVLAN must rebuild the exact bytes.
	for i, sent := range r.tagged {
		var want Frame
		if err := Parse(sent, &want); err != nil {
			t.Fatalf("injected frame %d: %v", i, err)
		}
		p := find(fmt.Sprintf("injected tagged frame %d", i), func(_ []byte, f *Frame) bool {
			return f.Stripped && f.Tags[0] == want.Tags[0] && f.L4Off != 0 && f.L4Off+VLANTagLen == want.L4Off && f.TCP == want.TCP && f.UDP == want.UDP
		})
		if p == nil {
			continue
		}
		if diff := cmp.Diff(want, shifted(p.f)); diff != "" {
			t.Errorf("tagged frame %d: Parse as sent vs ParseWithTag as received (-want +got):\n%s", i, diff)
		}
		dst := make([]byte, len(p.c.data)+VLANTagLen)
		n, err := InsertVLAN(dst, p.c.data, p.f.Tags[0])
		if err != nil || !bytes.Equal(dst[:n], sent) {
			t.Errorf("tagged frame %d: InsertVLAN of the kernel's tag = %x, %v; sent %x", i, dst[:n], err, sent)
		}
	}
}
