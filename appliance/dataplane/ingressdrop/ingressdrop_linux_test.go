package ingressdrop

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"github.com/google/go-cmp/cmp"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ping")
}

// pair makes namespaces A and B, IPv6 off, joined by a veth pair: va
// (10.199.0.1/24) in A, vb (10.199.0.2/24) in B.
func pair(t *testing.T) (a, b *netnstest.Namespace) {
	t.Helper()
	requireRoot(t)
	a, b = netnstest.New(t, "ind-a"), netnstest.New(t, "ind-b")
	for _, ns := range []*netnstest.Namespace{a, b} {
		ns.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	netnstest.Veth(t,
		netnstest.End{NS: a, Name: "va", Addrs: []string{"10.199.0.1/24"}, Up: true},
		netnstest.End{NS: b, Name: "vb", Addrs: []string{"10.199.0.2/24"}, Up: true})
	return a, b
}

// TestAttach joins namespaces A and B with a veth pair and checks, with a
// packet socket on B's end: before Attach the kernel in B answers A's
// ping; with the drop attached it does not, while the packet socket still
// receives A's frames; after Close the kernel answers again.
func TestAttach(t *testing.T) {
	a, b := pair(t)
	ping := func() error {
		out, err := a.Output("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.199.0.2")
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
		}
		return nil
	}
	flushARP := func() { a.IP(t, "neigh", "flush", "dev", "va") }
	if err := ping(); err != nil {
		t.Fatalf("before Attach: ping A→B: %v", err)
	}

	// This goroutine's thread enters B for the socket and the attachment.
	b.Do(t, func() { attachInB(t, ping, flushARP) })
}

// attachInB is the rest of TestAttach, run in namespace B.
func attachInB(t *testing.T, ping func() error, flushARP func()) {
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	d, err := Attach("vb", 0)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex(t, "vb")}); err != nil {
		t.Fatal(err)
	}
	flushARP()
	if err := ping(); err == nil {
		t.Errorf("with the drop attached, the kernel in B still answered A's ping")
	}
	if n := drain(sock); n == 0 {
		t.Errorf("with the drop attached, the packet socket on vb received no frame from A")
	} else {
		t.Logf("packet socket received %d frames while the kernel got none", n)
	}
	if _, err := Attach("nonexistent0", 0); err == nil {
		t.Errorf("Attach(nonexistent0) succeeded")
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	flushARP()
	if err := ping(); err != nil {
		t.Errorf("after Close: ping A→B: %v (the kernel should see vb's frames again)", err)
	}
}

func ifindex(t *testing.T, name string) int {
	t.Helper()
	ifi, err := net.InterfaceByName(name) // in this thread's namespace
	if err != nil {
		t.Fatal(err)
	}
	return ifi.Index
}

// drain counts the frames queued on a packet socket without blocking long.
func drain(fd int) int {
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	n := 0
	for {
		if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
			return n
		}
		n++
	}
}

// TestAttachDemote: with the demote attached to B's end, a socket bound to
// IPv4 there (not a tap: it sees frames after tcx) receives A's untagged
// IPv4 frames marked PACKET_OTHERHOST, while the kernel in B answers none
// of them; a socket bound to the marker's TPID receives every other frame
// (another EtherType, 802.1Q-tagged, 802.1ad over 802.1Q) with the marker
// in front, and Unmark gives back the frame A sent byte for byte (a frame
// of the marker's own VLAN 4095 too). With the plain drop the bound
// socket receives nothing, which is why the demote exists.
func TestAttachDemote(t *testing.T) {
	a, b := pair(t)
	vbMAC := macOf(t, b, "vb")
	// A static neighbour: B's kernel answers no ARP while demoted.
	a.IP(t, "neigh", "replace", "10.199.0.2", "lladdr", vbMAC.String(), "dev", "va", "nud", "permanent")
	ping := func() error {
		out, err := a.Output("ping", "-c", "3", "-i", "0.2", "-W", "1", "10.199.0.2")
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
		}
		return nil
	}
	// testFrame is a 64-byte frame to B with these tags and EtherType,
	// an IPv4 header to 10.199.5.2 after them when etype is IPv4.
	testFrame := func(tags []byte, etype uint16) []byte {
		f := make([]byte, 64)
		copy(f, vbMAC)
		copy(f[6:], []byte{2, 0, 0, 0, 0, 0xa})
		n := 12 + copy(f[12:], tags)
		f[n], f[n+1] = byte(etype>>8), byte(etype)
		if etype == unix.ETH_P_IP {
			ip := f[n+2:]
			ip[0], ip[8], ip[9] = 0x45, 64, 17
			ip[2], ip[3] = 0, 46
			copy(ip[12:], []byte{10, 199, 5, 1, 10, 199, 5, 2})
		} else {
			copy(f[n+2:], "e1kbox marker test")
		}
		return f
	}
	marked := [][]byte{
		testFrame(nil, 0x88b5), // IEEE local experimental
		testFrame([]byte{0x81, 0x00, 0x00, 0x05}, unix.ETH_P_IP),                         // VLAN 5
		testFrame([]byte{0x81, 0x00, 0xa0, 0x00}, unix.ETH_P_IP),                         // priority-tagged
		testFrame([]byte{0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x14}, unix.ETH_P_IP), // 802.1ad 10, 802.1Q 20
		testFrame([]byte{0x81, 0x00, 0x0f, 0xff}, unix.ETH_P_IP),                         // VLAN 4095, the marker's
		testFrame(nil, 0x9000), // a loop probe's EtherType
	}
	send := func(frames ...[]byte) { sendFrames(t, a, "va", frames...) }
	b.Do(t, func() {
		sockIP, sockMark := bound(t, "vb", unix.ETH_P_IP), bound(t, "vb", MarkerTPID)
		d, err := AttachDemote("vb", 0)
		if err != nil {
			t.Fatalf("AttachDemote: %v", err)
		}
		if !d.Demote {
			t.Errorf("AttachDemote's Drop has Demote false")
		}
		if err := ping(); err == nil {
			t.Errorf("with the demote attached, the kernel in B still answered A's ping")
		}
		send(marked...)
		var untagged, notOther int
		for _, r := range drainFrames(sockIP) {
			if net.IP(r.b[30:34]).String() != "10.199.0.2" {
				t.Errorf("the IPv4-bound socket got a frame that is not A's ping: %x", r.b)
				continue
			}
			untagged++
			if r.pkttype != unix.PACKET_OTHERHOST {
				notOther++
			}
		}
		if untagged == 0 || notOther != 0 {
			t.Errorf("the IPv4-bound socket got %d of A's pings, %d of them not PACKET_OTHERHOST; want some, none", untagged, notOther)
		}
		var got [][]byte
		for _, r := range drainFrames(sockMark) {
			f, ok := Unmark(r.b)
			if !ok {
				t.Errorf("the marker-bound socket got a frame without the marker: %x", r.b)
				continue
			}
			if r.pkttype != unix.PACKET_OTHERHOST {
				t.Errorf("a marked frame came as packet type %d, want PACKET_OTHERHOST", r.pkttype)
			}
			got = append(got, f)
		}
		if diff := cmp.Diff(marked, got); diff != "" {
			t.Errorf("frames A sent vs the marker-bound socket's, unmarked (-want +got):\n%s", diff)
		}
		d.Close()

		drop, err := Attach("vb", 0)
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		ping()
		send(marked...)
		if n := len(drainFrames(sockIP)) + len(drainFrames(sockMark)); n != 0 {
			t.Errorf("with the plain drop, the bound sockets got %d frames; want none (they see frames after tcx; TestDropPassesClientReplies has the frames it lets through)", n)
		}
		drop.Close()
		if err := ping(); err != nil {
			t.Errorf("after Close: ping A→B: %v", err)
		}
	})
}

// received is a frame read from a packet socket and its packet type.
type received struct {
	b       []byte
	pkttype uint8
}

// drainFrames reads the frames queued on a packet socket without blocking
// long.
func drainFrames(fd int) []received {
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var out []received
	for {
		buf := make([]byte, 2048)
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return out
		}
		if n < 34 {
			continue
		}
		r := received{b: buf[:n]}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok {
			r.pkttype = ll.Pkttype
		}
		out = append(out, r)
	}
}

// macOf returns the MAC address of ns's interface name.
func macOf(t *testing.T, ns *netnstest.Namespace, name string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		mac = ifi.HardwareAddr
	})
	return mac
}

// sendFrames sends frames out of ns's interface name from a packet socket.
func sendFrames(t *testing.T, ns *netnstest.Namespace, name string, frames ...[]byte) {
	t.Helper()
	ns.Do(t, func() {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		for _, f := range frames {
			if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifindex(t, name)}); err != nil {
				t.Errorf("sending a test frame: %v", err)
			}
		}
	})
}

// bound returns a packet socket bound to etype on interface name of the
// calling thread's namespace, closed when the test ends.
func bound(t *testing.T, name string, etype uint16) int {
	t.Helper()
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sock) })
	if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: htons(etype), Ifindex: ifindex(t, name)}); err != nil {
		t.Fatal(err)
	}
	return sock
}

// udpTo is a frame to dst carrying a UDP header to dport: over IPv4 with
// optWords 32-bit words of options, or over IPv6 (no extension header),
// and 8 bytes of payload.
func udpTo(dst net.HardwareAddr, v6 bool, optWords int, dport uint16) []byte {
	f := append(append([]byte(nil), dst...), 2, 0, 0, 0, 0, 0xa)
	var l3 []byte
	if v6 {
		f = append(f, 0x86, 0xdd)
		l3 = make([]byte, ipv6Len)
		l3[0], l3[5], l3[6], l3[7] = 0x60, udpLen+8, unix.IPPROTO_UDP, 64
		l3[8], l3[24] = 0xfe, 0xfe
	} else {
		f = append(f, 0x08, 0x00)
		l3 = make([]byte, ipv4Len+4*optWords)
		l3[0], l3[3], l3[8], l3[9] = 0x40|byte(5+optWords), byte(len(l3)+udpLen+8), 64, unix.IPPROTO_UDP
		copy(l3[12:], []byte{10, 199, 0, 1, 255, 255, 255, 255})
		for i := ipv4Len; i < len(l3); i++ {
			l3[i] = 1 // NOP options
		}
	}
	udp := []byte{0, 67, byte(dport >> 8), byte(dport), 0, udpLen + 8, 0, 0, 'e', '1', 'k', 'b', 'o', 'x', 0, 0}
	return append(append(f, l3...), udp...)
}

// TestDropPassesClientReplies: the plain drop lets the WAN clients'
// replies (IPv4/UDP to port 68, options or not, and IPv6/UDP to port 546)
// through to sockets bound to IPv4 and IPv6, demoted to PACKET_OTHERHOST,
// and nothing else: not UDP to other ports, not a later fragment, not TCP
// to port 68, not a tagged reply, not a reply cut short in its UDP header.
// The kernel's stack answers none of them (TestAttach: no ping answered).
func TestDropPassesClientReplies(t *testing.T) {
	a, b := pair(t)
	mac := macOf(t, b, "vb")
	edit := func(f []byte, fn func([]byte) []byte) []byte { return fn(append([]byte(nil), f...)) }
	v4 := udpTo(mac, false, 0, dhcpv4ClientPort)
	v4opts := udpTo(mac, false, 3, dhcpv4ClientPort)
	v6 := udpTo(mac, true, 0, dhcpv6ClientPort)
	pass := [][]byte{v4, v4opts, v6}
	dropped := [][]byte{
		udpTo(mac, false, 0, 69),
		udpTo(mac, true, 0, 547),
		udpTo(mac, true, 0, dhcpv4ClientPort),
		udpTo(mac, false, 0, dhcpv6ClientPort),
		edit(v4, func(f []byte) []byte { f[ethLen+7] = 1; return f }),                  // a later fragment
		edit(v4, func(f []byte) []byte { f[ethLen+9] = unix.IPPROTO_TCP; return f }),   // TCP to 68
		edit(v6, func(f []byte) []byte { f[ethLen+6] = unix.IPPROTO_TCP; return f }),   // TCP to 546
		edit(v4opts, func(f []byte) []byte { return f[:ethLen+ipv4Len+12+3] }),         // ends in the UDP header
		edit(v6, func(f []byte) []byte { return f[:ethLen+ipv6Len+3] }),                // ends before the port
		edit(v4, func(f []byte) []byte { return slices.Insert(f, 12, 0x81, 0, 0, 5) }), // VLAN 5
	}
	b.Do(t, func() {
		sock4, sock6 := bound(t, "vb", unix.ETH_P_IP), bound(t, "vb", unix.ETH_P_IPV6)
		d, err := Attach("vb", 0)
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		defer d.Close()
		sendFrames(t, a, "va", append(append([][]byte(nil), dropped...), pass...)...)
		var got [][]byte
		for _, sock := range []int{sock4, sock6} {
			for _, r := range drainFrames(sock) {
				if r.pkttype != unix.PACKET_OTHERHOST {
					t.Errorf("a frame came as packet type %d, want PACKET_OTHERHOST: %x", r.pkttype, r.b)
				}
				got = append(got, r.b)
			}
		}
		if diff := cmp.Diff(pass, got); diff != "" {
			t.Errorf("frames the bound sockets got behind the plain drop (-want +got):\n%s", diff)
		}
	})
}
