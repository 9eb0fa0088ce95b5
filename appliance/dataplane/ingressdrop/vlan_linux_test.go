package ingressdrop

import (
	"fmt"

	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// tag is f with an 802.1Q tag (TPID tpid, TCI tci) after its MACs.
func tag(f []byte, tpid, tci uint16) []byte {
	return slices.Insert(slices.Clone(f), 12, byte(tpid>>8), byte(tpid), byte(tci>>8), byte(tci))
}

// markFilter passes the frames whose skb->mark, masked, is want.
func markFilter(t *testing.T, sock int, mask, want uint32) {
	t.Helper()
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtMark},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: want, SkipFalse: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		fs[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	if err := unix.SetsockoptSockFprog(sock, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(fs)), Filter: &fs[0]}); err != nil {
		t.Fatal(err)
	}
}

// TestWANVLANReplies: on a WAN of VLAN 7 both programs hand the WAN
// clients' replies tagged with VLAN 7 (any priority) to the sockets bound
// to IPv4 and IPv6 untagged, demoted and marked ReplyMark(7), and no other
// frame with any reply mark: not an untagged reply (the drop drops it,
// the demote hands it on unmarked, as every untagged IPv4 frame), not one
// of VLAN 8, priority-tagged, 802.1ad-tagged or under a second tag, not
// a tagged frame to another port. The demote marks those for the marker's
// ring as ever. On an untagged WAN (0) no frame gets a reply mark and no
// tagged frame reaches the IPv4 and IPv6 sockets. A Drop attached
// untagged and moved to VLAN 7 (SetWANVLAN) does as one attached for it.
func TestWANVLANReplies(t *testing.T) {
	a, b := pair(t)
	mac := macOf(t, b, "vb")
	v4, v6 := udpTo(mac, false, 0, dhcpv4ClientPort), udpTo(mac, true, 0, dhcpv6ClientPort)
	v4opts := udpTo(mac, false, 2, dhcpv4ClientPort)
	own := [][]byte{tag(v4, unix.ETH_P_8021Q, 0xc007), tag(v6, unix.ETH_P_8021Q, 7), tag(v4opts, unix.ETH_P_8021Q, 0x2007)}
	ownPlain := [][]byte{v4, v6, v4opts} // own, untagged
	untagged := [][]byte{v4, v6}
	others := [][]byte{
		tag(v4, unix.ETH_P_8021Q, 8),
		tag(v6, unix.ETH_P_8021Q, 0xc000), // priority-tagged
		tag(v4, unix.ETH_P_8021AD, 7),
		tag(tag(v4, unix.ETH_P_8021Q, 8), unix.ETH_P_8021Q, 7), // VLAN 7, then 8
		tag(udpTo(mac, false, 0, 69), unix.ETH_P_8021Q, 7),
		tag(udpTo(mac, true, 0, dhcpv4ClientPort), unix.ETH_P_8021Q, 7),
		tag(udpTo(mac, false, 0, dhcpv4ClientPort)[:ethLen+ipv4Len+3], unix.ETH_P_8021Q, 7), // cut in the UDP header
	}
	for _, tc := range []struct {
		demote bool
		vid    uint16
		// retag attaches for untagged and then moves to vid
		// (SetWANVLAN).
		retag bool
		// marked are the frames the IPv4 and IPv6 sockets get with a
		// reply mark, unmarked those they get without, markered those
		// the marker's socket gets (unmarked).
		marked, unmarked, markered [][]byte
	}{
		{false, 7, false, ownPlain, nil, nil},
		{true, 7, false, ownPlain, untagged, others},
		{false, 0, false, nil, untagged, nil},
		{true, 0, false, nil, untagged, append(slices.Clone(own), others...)},
		{false, 7, true, ownPlain, nil, nil},
		{true, 7, true, ownPlain, untagged, others},
	} {
		name := fmt.Sprintf("drop, VLAN %d", tc.vid)
		if tc.demote {
			name = fmt.Sprintf("demote, VLAN %d", tc.vid)
		}
		if tc.retag {
			name += ", set after attaching untagged"
		}
		t.Run(name, func(t *testing.T) {
			b.Do(t, func() {
				want := ReplyMark(tc.vid)
				mask := uint32(0xffffffff)
				if tc.vid == 0 {
					want, mask = ReplyMarkBase, ReplyMarkMask
				}
				// Each family twice: one socket with every frame, one
				// with the marked ones only.
				var all, marked []int
				for _, et := range []uint16{unix.ETH_P_IP, unix.ETH_P_IPV6} {
					all = append(all, bound(t, "vb", et))
					s := bound(t, "vb", et)
					markFilter(t, s, mask, want)
					marked = append(marked, s)
				}
				sockMark := bound(t, "vb", MarkerTPID)
				attach := Attach
				if tc.demote {
					attach = AttachDemote
				}
				first := tc.vid
				if tc.retag {
					first = 0
				}
				d, err := attach("vb", first)
				if err != nil {
					t.Fatalf("attach: %v", err)
				}
				defer d.Close()
				if tc.retag {
					if err := d.SetWANVLAN(tc.vid); err != nil {
						t.Fatalf("SetWANVLAN: %v", err)
					}
				}
				if d.WANVLAN != tc.vid {
					t.Errorf("Drop.WANVLAN %d, want %d", d.WANVLAN, tc.vid)
				}
				sendFrames(t, a, "va", slices.Concat(untagged, own, others)...)
				read := func(socks []int) [][]byte {
					var got [][]byte
					for _, s := range socks {
						for _, r := range drainFrames(s) {
							if r.pkttype != unix.PACKET_OTHERHOST {
								t.Errorf("a frame came as packet type %d, want PACKET_OTHERHOST: %x", r.pkttype, r.b)
							}
							got = append(got, r.b)
						}
					}
					return got
				}
				gotMarked := read(marked)
				if diff := cmp.Diff(sortFrames(tc.marked), sortFrames(gotMarked)); diff != "" {
					t.Errorf("frames the IPv4 and IPv6 sockets got with a reply mark (-want +got):\n%s", diff)
				}
				wantAll := slices.Concat(tc.marked, tc.unmarked)
				if diff := cmp.Diff(sortFrames(wantAll), sortFrames(read(all))); diff != "" {
					t.Errorf("frames the IPv4 and IPv6 sockets got (-want +got):\n%s", diff)
				}
				var gotMarker [][]byte
				for _, r := range drainFrames(sockMark) {
					f, ok := Unmark(r.b)
					if !ok {
						t.Errorf("the marker's socket got a frame without the marker: %x", r.b)
					}
					gotMarker = append(gotMarker, f)
				}
				if diff := cmp.Diff(sortFrames(tc.markered), sortFrames(gotMarker)); diff != "" {
					t.Errorf("frames the marker's socket got, unmarked (-want +got):\n%s", diff)
				}
			})
		})
	}
	t.Run("VLAN out of range", func(t *testing.T) {
		b.Do(t, func() {
			if d, err := Attach("vb", 4095); err == nil {
				d.Close()
				t.Errorf("Attach with VLAN 4095 succeeded")
			}
			d, err := Attach("vb", 7)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.SetWANVLAN(4095); err == nil || d.WANVLAN != 7 {
				t.Errorf("SetWANVLAN(4095) = %v, WANVLAN %d after; want an error, 7", err, d.WANVLAN)
			}
			d.Close()
			if err := d.SetWANVLAN(8); err == nil {
				t.Errorf("SetWANVLAN on a closed Drop succeeded")
			}
		})
	})
}

// sortFrames sorts frames by their bytes (the sockets are read one after
// the other), nil for none.
func sortFrames(fs [][]byte) [][]byte {
	if len(fs) == 0 {
		return nil
	}
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(x, y []byte) int { return slices.Compare(x, y) })
	return fs
}
