package wantap

import (
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/internal/vlanpeer"
)

var (
	boxMAC  = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	peerMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// vlanLab is a box namespace with wan0 and a peer with isp0, joined,
// IPv6 off.
func vlanLab(t *testing.T) (box, peer *netnstest.Namespace) {
	t.Helper()
	testenv.Require(t, "root", "ip")
	box, peer = netnstest.New(t, "wantap-box"), netnstest.New(t, "wantap-peer")
	for _, ns := range []*netnstest.Namespace{box, peer} { // no kernel chatter
		ns.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	netnstest.Veth(t, netnstest.End{NS: box, Name: "wan0", MAC: boxMAC.String(), Up: true},
		netnstest.End{NS: peer, Name: "isp0", MAC: peerMAC.String(), Up: true})
	return box, peer
}

// udp4 is an IPv4/UDP frame from src to dst, to dport, payload p.
func udp4(dst, src net.HardwareAddr, dport uint16, p string) []byte {
	f := append(append(slices.Clone(dst), src...), 0x08, 0x00)
	ip := []byte{0x45, 0, 0, byte(20 + 8 + len(p)), 0, 0, 0, 0, 64, unix.IPPROTO_UDP, 0, 0, 10, 0, 0, 1, 255, 255, 255, 255}
	udp := []byte{0, 67, byte(dport >> 8), byte(dport), 0, byte(8 + len(p)), 0, 0}
	return append(append(append(f, ip...), udp...), p...)
}

// readAll reads what the tap receives until it is quiet for 300 ms.
func readAll(t *testing.T, tap *Tap) [][]byte {
	t.Helper()
	var got [][]byte
	buf := make([]byte, 2048)
	for {
		tap.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, _, err := tap.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return got
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		got = append(got, slices.Clone(buf[:n]))
	}
}

func open(t *testing.T, box *netnstest.Namespace, vlan VLAN) *Tap {
	t.Helper()
	var tap *Tap
	box.Do(t, func() {
		var err error
		if tap, _, err = Open("wan0", boxMAC, unix.ETH_P_IP, []bpf.Instruction{bpf.RetConstant{Val: 0xffff}}, vlan); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { tap.Close() })
	return tap
}

// TestTapVLANSends: on VLAN 7 with priority 6 every frame the tap sends
// arrives at the peer tagged so (as its vlanpeer counts on the wire,
// before it pops the tag), and as written behind the tag (as a packet tap
// there reads it); untagged, the peer's program sees no tag.
func TestTapVLANSends(t *testing.T) {
	box, peer := vlanLab(t)
	p := vlanpeer.In(t, peer, "isp0", 7, 0)
	capture := peer.OpenPackets(t, "isp0", true)
	tagged := open(t, box, VLAN{ID: 7, PCP: 6})
	plain := open(t, box, VLAN{})
	var sent [][]byte
	for i, tap := range []*Tap{tagged, tagged, plain} {
		f := udp4(peerMAC, boxMAC, 67, "frame "+string(rune('a'+i)))
		if err := tap.Write(f, peerMAC); err != nil {
			t.Fatalf("Write: %v", err)
		}
		sent = append(sent, f)
	}
	netnstest.WaitFor(t, 5*time.Second, "the peer's count of tagged frames", func() bool {
		return p.Frames(t, vlanpeer.Key{Tagged: 1}) >= 2
	})
	got := capture.Wait(300*time.Millisecond, 5*time.Second)
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("frames the peer's tap read (the kernel holds the tag aside) (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		key  vlanpeer.Key
		want uint64
	}{
		{vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}, 2},
		{vlanpeer.Key{Tagged: 1}, 2},
		{vlanpeer.Key{Tagged: 0, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}, 1},
	} {
		if got := p.Frames(t, tc.key); got != tc.want {
			seen, _ := p.Seen()
			t.Errorf("the peer saw %d frames with %+v, want %d (all: %+v)", got, tc.key, tc.want, seen)
		}
	}
}

// TestTapVLANReceives: behind ingressdrop's drop and demote, attached for
// the WAN's VLAN, a tap of VLAN 7 receives the replies tagged 7 (any
// priority), untagged, and nothing else: no untagged reply, none of VLAN
// 8; an untagged tap behind the programs attached untagged receives the
// untagged replies and none tagged 7.
func TestTapVLANReceives(t *testing.T) {
	box, peer := vlanLab(t)
	reply := func(p string) []byte { return udp4(boxMAC, peerMAC, 68, p) }
	tag := func(f []byte, tci uint16) []byte {
		return slices.Insert(slices.Clone(f), 12, 0x81, 0, byte(tci>>8), byte(tci))
	}
	untagged := [][]byte{reply("untagged 1"), reply("untagged 2")}
	vlan7 := [][]byte{reply("vlan 7 pcp 6"), reply("vlan 7 pcp 0")}
	sent := slices.Concat(untagged, [][]byte{tag(vlan7[0], 0xc007), tag(vlan7[1], 7), tag(reply("vlan 8"), 8)})
	for _, tc := range []struct {
		name   string
		demote bool
		vlan   VLAN
		want   [][]byte
	}{
		{"drop, VLAN 7", false, VLAN{ID: 7, PCP: 6}, vlan7},
		{"demote, VLAN 7", true, VLAN{ID: 7, PCP: 6}, vlan7},
		{"drop, untagged", false, VLAN{}, untagged},
		{"demote, untagged", true, VLAN{}, untagged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attach := ingressdrop.Attach
			if tc.demote {
				attach = ingressdrop.AttachDemote
			}
			box.Do(t, func() {
				d, err := attach("wan0", tc.vlan.ID)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
			})
			tap := open(t, box, tc.vlan)
			peer.OpenPackets(t, "isp0", false).Send(t, sent...)
			if diff := cmp.Diff(tc.want, readAll(t, tap)); diff != "" {
				t.Errorf("frames the tap received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpenRefusesVLAN: a VLAN out of range, or a priority without one.
func TestOpenRefusesVLAN(t *testing.T) {
	for _, v := range []VLAN{{ID: 4095}, {ID: 7, PCP: 8}, {PCP: 6}} {
		if _, _, err := Open("lo", boxMAC, unix.ETH_P_IP, nil, v); err == nil {
			t.Errorf("Open with %+v succeeded", v)
		}
	}
}
