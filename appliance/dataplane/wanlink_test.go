package dataplane

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// setWANVLAN swaps the test router's settings to a WAN on VLAN v, as
// Engine.Apply does.
func (tr *testRouter) setWANVLAN(v WANVLAN) {
	cfg := *tr.cfg
	n := *cfg.NAT
	n.WANVLAN = v
	cfg.NAT = &n
	tr.cur.Store(newSettings(&cfg))
}

// rxTag is rx with a tag the kernel stripped.
func (tr *testRouter) rxTag(in uint16, data []byte, tag frame.VLANTag) [][][]byte {
	tr.now += 1e6
	tr.clock += 1e6
	w := tr.fwds[in]
	w.begin(tr.now, tr.clock)
	w.handle(data, len(data), true, tag)
	w.natTick()
	w.dirty = 0
	return tr.sent(in)
}

// outerTCI is the 802.1Q tag of a frame the router sent; false: untagged.
func outerTCI(b []byte) (uint16, bool) {
	if binary.BigEndian.Uint16(b[12:]) != frame.EtherTypeVLAN {
		return 0, false
	}
	return binary.BigEndian.Uint16(b[14:]), true
}

func TestWANVLAN(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	natPort := parsed(t, out[idWAN][0]).TCP.SrcPort
	tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0))
	tr.setWANVLAN(WANVLAN{ID: 7, PCP: 2, ControlPCP: 6})

	q := func(tci uint16) frame.VLANTag { return frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: tci} }
	reply := tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, 10)
	t.Run("ingress", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			data     []byte
			stripped *frame.VLANTag
			want     []int // frames per port
			drop     Drop  // counted, if not 0
		}{
			{name: "VLAN 7 in the frame", data: tagged(reply, q(0x2007)), want: []int{1, 0, 0, 0}},
			{name: "VLAN 7 stripped by the kernel", data: reply, stripped: &[]frame.VLANTag{q(0xe007)}[0], want: []int{1, 0, 0, 0}},
			{name: "untagged", data: reply, want: []int{0, 0, 0, 0}, drop: DropWANLink},
			{name: "VLAN 8", data: tagged(reply, q(8)), want: []int{0, 0, 0, 0}, drop: DropWANLink},
			{name: "VLAN 8 stripped", data: reply, stripped: &[]frame.VLANTag{q(8)}[0], want: []int{0, 0, 0, 0}, drop: DropWANLink},
			{name: "802.1ad outer tag of VLAN 7", data: tagged(reply, frame.VLANTag{TPID: frame.EtherTypeQinQ, TCI: 7}), want: []int{0, 0, 0, 0}, drop: DropWANLink},
			{name: "VLAN 7 with another tag inside", data: tagged(tagged(reply, q(9)), q(7)), want: []int{0, 0, 0, 0}, drop: DropWANLink},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := tr.drops()
				var out [][][]byte
				if tc.stripped != nil {
					out = tr.rxTag(idWAN, append([]byte(nil), tc.data...), *tc.stripped)
				} else {
					out = tr.rx(idWAN, append([]byte(nil), tc.data...))
				}
				if diff := cmp.Diff(tc.want, counts(out)); diff != "" {
					t.Fatalf("frames per port (-want +got):\n%s", diff)
				}
				if d := tr.drops(); tc.drop != 0 && d[tc.drop] != before[tc.drop]+1 {
					t.Errorf("%v drops %d → %d, want one more", tc.drop, before[tc.drop], d[tc.drop])
				}
				if tc.drop == 0 {
					f := parsed(t, out[idLAN1][0])
					if f.NTags != 0 || f.IPv4.Dst != hAIP || f.TCP.DstPort != 40000 {
						t.Errorf("on the LAN: %d tags, to %v port %d; want untagged, to %v port 40000", f.NTags, f.IPv4.Dst, f.TCP.DstPort, hAIP)
					}
				}
			})
		}
	})
	t.Run("egress", func(t *testing.T) {
		wanOnLink := [4]byte{203, 0, 113, 50}
		for _, tc := range []struct {
			name string
			in   uint16
			data []byte
			tci  uint16
		}{
			{"established LAN to WAN: data priority", idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 10), 2<<13 | 7},
			{"ARP request for a WAN neighbour: control priority", idLAN1, tcp4(rLAN, macA, hAIP, wanOnLink, 40001, 80, frame.TCPSyn, 0), 6<<13 | 7},
			{"the router's echo reply on the WAN", idWAN, tagged(icmpEcho(rWAN, macGW, remIP, wanIP, 64), q(7)), 2<<13 | 7},
			{"time exceeded to the WAN", idWAN, tagged(frametest.Frame(rWAN, macGW, frame.EtherTypeIPv4, frametest.IPv4{Src: remIP, Dst: wanIP, TTL: 1}.TCPPacket(
				frametest.TCP{SrcPort: 80, DstPort: natPort, Flags: frame.TCPAck, Seq: 1, Ack: 1}, nil)), q(7)), 2<<13 | 7},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out := tr.rx(tc.in, append([]byte(nil), tc.data...))
				if len(out[idWAN]) != 1 {
					t.Fatalf("frames per port %v, want one on the WAN", counts(out))
				}
				b := out[idWAN][0]
				tci, ok := outerTCI(b)
				if !ok || tci != tc.tci {
					t.Errorf("WAN frame tagged %v with TCI %#04x, want %#04x", ok, tci, tc.tci)
				}
				if _, _, err := frame.StripVLAN(b); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	t.Run("untagged WAN again", func(t *testing.T) {
		tr.setWANVLAN(WANVLAN{})
		out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 10))
		if len(out[idWAN]) != 1 {
			t.Fatalf("frames per port %v", counts(out))
		}
		if _, ok := outerTCI(out[idWAN][0]); ok {
			t.Errorf("tagged on an untagged WAN")
		}
		if diff := cmp.Diff([]int{1, 0, 0, 0}, counts(tr.rx(idWAN, append([]byte(nil), reply...)))); diff != "" {
			t.Errorf("untagged reply (-want +got):\n%s", diff)
		}
	})
}

func TestWANControl(t *testing.T) {
	ip6 := frametest.IPv6{Src: [16]byte{0xfe, 0x80, 15: 1}, Dst: [16]byte{0xff, 0x02, 15: 1}}
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"ARP", frametest.ARPFrame(bcast, rWAN, 1, rWAN, wanIP, [6]byte{}, gwIP), true},
		{"DHCPv4 to a server", udp4(bcast, rWAN, [4]byte{}, [4]byte{255, 255, 255, 255}, 68, 67, 10), true},
		{"DNS", udp4(macGW, rWAN, wanIP, gwIP, 5353, 53, 10), false},
		{"TCP", tcp4(macGW, rWAN, wanIP, remIP, 1, 67, frame.TCPAck, 0), false},
		{"neighbour solicitation", frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.ICMPPacket(135, 0, 0, make([]byte, 20))), true},
		{"router solicitation", frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.ICMPPacket(133, 0, 0, nil)), true},
		{"ICMPv6 echo", frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.ICMPPacket(128, 0, 0, nil)), false},
		{"DHCPv6 to a server", frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.UDPPacket(546, 547, nil)), true},
		{"runt", []byte{1, 2, 3}, false},
	} {
		if got := control(tc.b); got != tc.want {
			t.Errorf("%s: control = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWANVLANZeroAllocs(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.resolve(t)
	out := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
	natPort := parsed(t, out[idWAN][0]).TCP.SrcPort
	tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0))
	tr.setWANVLAN(WANVLAN{ID: 7, PCP: 2, ControlPCP: 6})
	tag7 := frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 7}
	reply := tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, 100)
	for _, fr := range []struct {
		name     string
		in       uint16
		data     []byte
		stripped bool
	}{
		{"LAN to a tagged WAN", idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 100), false},
		{"tagged WAN to LAN, the tag in the frame", idWAN, tagged(reply, tag7), false},
		{"tagged WAN to LAN, the tag stripped", idWAN, reply, true},
		{"another VLAN", idWAN, tagged(reply, frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: 8}), false},
	} {
		t.Run(fr.name, func(t *testing.T) {
			tr.requireNoAllocs(t, fr.in, fr.data, fr.stripped, tag7, nil)
		})
	}
}

// FuzzWANControl checks control against the parser: on every untagged
// frame that parses, control says what the parsed headers say.
func FuzzWANControl(f *testing.F) {
	ip6 := frametest.IPv6{Src: [16]byte{0xfe, 0x80, 15: 1}, Dst: [16]byte{0xff, 0x02, 15: 1}}
	f.Add(frametest.ARPFrame(bcast, rWAN, 1, rWAN, wanIP, [6]byte{}, gwIP))
	f.Add(udp4(bcast, rWAN, [4]byte{}, [4]byte{255, 255, 255, 255}, 68, 67, 10))
	f.Add(tcp4(macGW, rWAN, wanIP, remIP, 1, 67, frame.TCPAck, 0))
	f.Add(frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.ICMPPacket(135, 0, 0, make([]byte, 20))))
	f.Add(frametest.Frame(bcast, rWAN, frame.EtherTypeIPv6, ip6.UDPPacket(546, 547, nil)))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := control(b)
		var fr frame.Frame
		if err := frame.Parse(b, &fr); err != nil || fr.NTags != 0 {
			return
		}
		want := false
		switch {
		case fr.EtherType == frame.EtherTypeARP:
			want = true
		case fr.IsIPv4() && fr.L4Off != 0 && fr.IPv4.IHL == 5 && fr.Proto == frame.ProtoUDP:
			want = fr.UDP.DstPort == 67
		case fr.IsIPv6() && fr.L4Off != 0 && fr.IPv6.Exts == 0 && fr.Proto == frame.ProtoICMPv6:
			want = fr.ICMP.Type >= 133 && fr.ICMP.Type <= 137
		case fr.IsIPv6() && fr.L4Off != 0 && fr.IPv6.Exts == 0 && fr.Proto == frame.ProtoUDP:
			want = fr.UDP.DstPort == 547
		}
		if got != want {
			t.Errorf("control(% x) = %v, the parsed frame says %v", b, got, want)
		}
	})
}
