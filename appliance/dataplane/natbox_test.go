package dataplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
)

// TestNATBoxStack: with the host port as the box's own stack (it has the
// router's MAC and LAN address), LAN hosts reach its services at the
// router's address, its own connections go out masqueraded and come back
// to it, it sees the ARP replies its requests get, and DHCP replies to the
// WAN client are no drops.
func TestNATBoxStack(t *testing.T) {
	tr := newTestRouterHost(t, 1024, "", idHost)
	tr.resolve(t)
	steps := []struct {
		name  string
		in    uint16
		frame []byte
		want  []int // frames per port 1..4
		check func(t *testing.T, out [][][]byte)
	}{
		{"DNS query from a LAN host to the router's address", idLAN1, udp4(rLAN, macA, hAIP, lanIP, 5353, 53, 20), []int{0, 0, 0, 1},
			func(t *testing.T, out [][][]byte) {
				if f := parsed(t, out[idHost][0]); f.Dst != rLAN || f.IPv4.Dst != lanIP || f.UDP.DstPort != 53 {
					t.Errorf("delivered %v %v:%d", f.Dst, f.IPv4.Dst, f.UDP.DstPort)
				}
			}},
		{"the ARP reply to the box's stack's request", idLAN2, frametest.ARPFrame(rLAN, macB, 2, macB, hBIP, rLAN, lanIP), []int{0, 0, 0, 1}, nil},
		{"the box's own query to the Internet", idHost, udp4(rLAN, rLAN, lanIP, remIP, 40001, 53, 20), []int{0, 0, 1, 0},
			func(t *testing.T, out [][][]byte) {
				if f := parsed(t, out[idWAN][0]); f.IPv4.Src != wanIP || f.Dst != macGW {
					t.Errorf("masqueraded from %v to %v", f.IPv4.Src, f.Dst)
				}
			}},
		{"a DHCP reply to the WAN client", idWAN, udp4(rWAN, macGW, gwIP, wanIP, 67, 68, 300), []int{0, 0, 0, 0}, nil},
	}
	for _, s := range steps {
		before := tr.drops()
		out := tr.rx(s.in, s.frame)
		if diff := cmp.Diff(s.want, counts(out)); diff != "" {
			t.Errorf("%s: frames per port (-want +got):\n%s", s.name, diff)
			continue
		}
		if s.check != nil {
			s.check(t, out)
		}
		if after := tr.drops(); after.Total() != before.Total() {
			t.Errorf("%s: drops %v, want none more", s.name, after)
		}
	}
	// The answer to the box's query comes back to the host port.
	q := parsed(t, tr.rx(idHost, udp4(rLAN, rLAN, lanIP, remIP, 40002, 123, 48))[idWAN][0])
	out := tr.rx(idWAN, udp4(rWAN, macGW, remIP, wanIP, 123, q.UDP.SrcPort, 48))
	if diff := cmp.Diff([]int{0, 0, 0, 1}, counts(out)); diff != "" {
		t.Fatalf("NTP answer: frames per port (-want +got):\n%s", diff)
	}
	if f := parsed(t, out[idHost][0]); f.Dst != rLAN || f.IPv4.Dst != lanIP || f.UDP.DstPort != 40002 {
		t.Errorf("answer to %v %v:%d, want the box", f.Dst, f.IPv4.Dst, f.UDP.DstPort)
	}
	// A LAN host posing as the router's address gets nowhere.
	before := tr.drops()
	tr.rx(idLAN1, udp4(rLAN, macA, lanIP, remIP, 40003, 53, 20))
	if got := tr.drops()[NATDrop(nat.ReasonMartian)] - before[NATDrop(nat.ReasonMartian)]; got != 1 {
		t.Errorf("a spoofed router address: %d martian drops, want 1", got)
	}
}
