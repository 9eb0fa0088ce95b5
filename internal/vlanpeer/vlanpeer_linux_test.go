package vlanpeer

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestPing: two namespaces, each with a peer on VLAN 7 (priorities 3 and
// 5), ping each other untagged while the wire between them carries the
// tag, as tcpdump on one end shows and the other end's counts say.
func TestPing(t *testing.T) {
	testenv.Require(t, "root", "ip", "ping", "tcpdump")
	a, b := netnstest.New(t, "vpa"), netnstest.New(t, "vpb")
	netnstest.Veth(t,
		netnstest.End{NS: a, Name: "a0", Addrs: []string{"192.0.2.1/24", "2001:db8::1/64"}, Up: true},
		netnstest.End{NS: b, Name: "b0", Addrs: []string{"192.0.2.2/24", "2001:db8::2/64"}, Up: true})
	pa := In(t, a, "a0", 7, 3)
	pb := In(t, b, "b0", 7, 5)

	var dump netnstest.Buffer
	td := b.Command("tcpdump", "-e", "-n", "-l", "-i", "b0")
	td.Stdout, td.Stderr = &dump, &dump
	netnstest.Start(t, td)
	netnstest.WaitFor(t, 10*time.Second, "tcpdump listening", func() bool {
		return strings.Contains(dump.String(), "listening on")
	})

	a.Run(t, "ping", "-c", "3", "-i", "0.2", "-W", "2", "192.0.2.2")
	a.Run(t, "ping", "-c", "2", "-i", "0.2", "-W", "2", "2001:db8::2")

	for _, tc := range []struct {
		name string
		p    *Peer
		key  Key
		min  uint64
	}{
		{"b saw a's echo requests with priority 3", pb, Key{Tagged: 1, VID: 7, PCP: 3, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_ICMP, Port: 8}, 3},
		{"a saw b's echo replies with priority 5", pa, Key{Tagged: 1, VID: 7, PCP: 5, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_ICMP}, 3},
		{"b saw a's ARP with priority 3", pb, Key{Tagged: 1, VID: 7, PCP: 3, EtherType: unix.ETH_P_ARP}, 1},
		{"b saw a's ICMPv6 echo requests", pb, Key{Tagged: 1, VID: 7, PCP: 3, EtherType: unix.ETH_P_IPV6, Proto: unix.IPPROTO_ICMPV6, Port: 128}, 2},
		{"b saw a's neighbour solicitations", pb, Key{Tagged: 1, VID: 7, PCP: 3, EtherType: unix.ETH_P_IPV6, Proto: unix.IPPROTO_ICMPV6, Port: 135}, 1},
	} {
		if got := tc.p.Frames(t, tc.key); got < tc.min {
			seen, _ := tc.p.Seen()
			t.Errorf("%s: %d frames with %+v, want at least %d; seen %+v", tc.name, got, tc.key, tc.min, seen)
		}
	}
	for _, p := range []*Peer{pa, pb} {
		if n, err := p.Dropped(); err != nil || n != 0 {
			t.Errorf("%s dropped %d frames (%v), want 0", p.Iface, n, err)
		}
	}
	netnstest.WaitFor(t, 5*time.Second, "tcpdump showing the tags", func() bool {
		s := dump.String()
		return strings.Contains(s, "vlan 7, p 3, ethertype IPv4") && strings.Contains(s, "ICMP echo request")
	})
}

// TestDrops: a raw socket on the wire side sends echo requests untagged,
// tagged VLAN 8 and tagged VLAN 7 (in the frame, as a switch would); only
// the last reach the namespace, and are answered tagged.
func TestDrops(t *testing.T) {
	testenv.Require(t, "root", "ip")
	a, b := netnstest.New(t, "vpa"), netnstest.New(t, "vpb")
	macA, macB := "02:00:00:00:00:0a", "02:00:00:00:00:0b"
	netnstest.Veth(t,
		netnstest.End{NS: a, Name: "a0", MAC: macA, Addrs: []string{"192.0.2.1/24"}, Up: true},
		netnstest.End{NS: b, Name: "b0", MAC: macB, Up: true})
	a.IP(t, "neigh", "add", "192.0.2.2", "lladdr", macB, "dev", "a0")
	pa := In(t, a, "a0", 7, 2)
	raw := b.OpenPackets(t, "b0", true)

	hwA, _ := net.ParseMAC(macA)
	hwB, _ := net.ParseMAC(macB)
	untagged := echo(hwA, hwB, -1, 1)
	vlan8 := echo(hwA, hwB, 8, 2)
	vlan7 := echo(hwA, hwB, 7, 3)
	raw.Send(t, untagged, untagged, vlan8, vlan7, vlan7)

	netnstest.WaitFor(t, 5*time.Second, "two echo replies", func() bool {
		return pa.Frames(t, Key{Tagged: 1, VID: 7, PCP: 0, EtherType: unix.ETH_P_IP, Port: 8}) == 2 && len(replies(raw.Frames())) == 2
	})
	if got := pa.Frames(t, Key{Tagged: 0, EtherType: unix.ETH_P_IP}); got != 2 {
		t.Errorf("untagged frames counted %d, want 2", got)
	}
	if got := pa.Frames(t, Key{Tagged: 1, VID: 8, EtherType: unix.ETH_P_IP}); got != 1 {
		t.Errorf("VLAN 8 frames counted %d, want 1", got)
	}
	if n, err := pa.Dropped(); err != nil || n != 3 {
		t.Errorf("Dropped() = %d, %v; want 3", n, err)
	}
	// The sequence numbers say which requests were answered.
	if diff := cmp.Diff([]uint16{3, 3}, replies(raw.Frames())); diff != "" {
		t.Errorf("echo replies' sequence numbers (-want +got):\n%s", diff)
	}
}

// echo is an ICMP echo request from src to dst (192.0.2.2 to 192.0.2.1),
// tagged vid in the frame unless vid < 0.
func echo(dst, src net.HardwareAddr, vid int, seq uint16) []byte {
	f := append(append([]byte{}, dst...), src...)
	if vid >= 0 {
		f = binary.BigEndian.AppendUint16(f, unix.ETH_P_8021Q)
		f = binary.BigEndian.AppendUint16(f, uint16(vid))
	}
	f = binary.BigEndian.AppendUint16(f, unix.ETH_P_IP)
	ip := []byte{0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, unix.IPPROTO_ICMP, 0, 0, 192, 0, 2, 2, 192, 0, 2, 1}
	binary.BigEndian.PutUint16(ip[10:], sum(ip))
	icmp := []byte{8, 0, 0, 0, 0, 1, byte(seq >> 8), byte(seq)}
	binary.BigEndian.PutUint16(icmp[2:], sum(icmp))
	return append(append(f, ip...), icmp...)
}

func sum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// replies are the sequence numbers of the echo replies among frames (the
// kernel took their tag out before the raw socket saw them).
func replies(frames [][]byte) []uint16 {
	var seqs []uint16
	for _, f := range frames {
		if len(f) >= 42 && binary.BigEndian.Uint16(f[12:]) == unix.ETH_P_IP && f[23] == unix.IPPROTO_ICMP && f[34] == 0 {
			seqs = append(seqs, binary.BigEndian.Uint16(f[40:]))
		}
	}
	return seqs
}
