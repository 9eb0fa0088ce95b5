package nat

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// What a LAN host scanning the WAN's subnet costs the ARP table: each
// address an incomplete entry and its requests. (A port forward, or its
// range, sends to one LAN address, so the WAN cannot make the router
// resolve many.)

// onLinkWAN is WAN address i of a /16 WAN subnet (wideWAN), none of
// them a neighbour until a test makes it one.
func onLinkWAN(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{203, 0, byte(1 + i/200), byte(10 + i%200)})
}

func wideWAN(c *Config) { c.WAN.Addr = netip.MustParsePrefix("203.0.113.2/16") }

// toWAN is a packet from host A to the on-link WAN address a.
func toWAN(a netip.Addr, sport uint16) []byte {
	return fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(a)}.UDPPacket(sport, 53, nil))
}

// bucketOf is the ARP table's bucket of ip on side.
func (e *env) bucketOf(side Side, ip netip.Addr) *nslot {
	return &e.r.neigh.bucket(neighKey(side, be32(a4(ip))))[0]
}

// TestNATUnknownCap: a quarter of the ARP table at most is incomplete at
// once; past it a new next hop is refused (neigh_limit), and the share
// is free again once the entries' resolution is over, without a sweep.
func TestNATUnknownCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { wideWAN(c); c.MaxNeighbours = 64; c.MaxConns = 4096 }) // 16 incomplete at once
	// Two sets of 20 addresses, each leaving a way free in every bucket
	// beside the resolved entries: the cap is what refuses.
	var dsts []netip.Addr
	for half := range 2 {
		load := map[*nslot]int{e.bucketOf(LAN, ipA): 1, e.bucketOf(LAN, ipB): 1, e.bucketOf(WAN, gwAddr): 1}
		for i := half * 1000; len(dsts) < 20*(half+1) && i < 20000; i++ {
			if b := e.bucketOf(WAN, onLinkWAN(i)); load[b] < 3 {
				load[b]++
				dsts = append(dsts, onLinkWAN(i))
			}
		}
	}
	scan := func(from int) (refused int) {
		for i := from; i < from+20; i++ {
			switch res := e.send(LAN, toWAN(dsts[i], uint16(1000+i))); {
			case res.Reason == ReasonNeighLimit:
				refused++
			case res.Action != routing.Queued:
				t.Fatalf("packet to %v: %v/%v, want queued or refused", dsts[i], res.Action, res.Reason)
			}
		}
		return refused
	}
	for _, step := range []struct {
		name    string
		wait    int64 // seconds before the step
		from    int   // its first address
		refused int   // of its 20
	}{
		{"20 addresses", 0, 0, 4},
		{"20 more a second later", 1, 20, 20},
		{"20 more once the first resolutions are over", 4, 20, 4},
	} {
		e.now += step.wait * sec
		if got := scan(step.from); got != step.refused {
			t.Errorf("%s: %d refused, want %d", step.name, got, step.refused)
		}
	}
}

// TestNATNoEviction: a new incomplete entry never takes the slot of a
// neighbour that answered ARP or was sent to within inUse; an idle one's
// it may. An ARP from a new neighbour still takes the oldest, as before.
func TestNATNoEviction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		used  bool  // frames went to the four
		idle  int64 // seconds after that
		learn bool  // the fifth is learnt from its ARP, not resolved
		taken bool  // one of the four is gone
	}{
		{"sent to, for a resolution", true, inUse / 2e9, false, false},
		{"confirmed lately, for a resolution", false, 60, false, false},
		{"idle for inUse, for a resolution", false, inUse/1e9 + 1, false, true},
		{"sent to, for an ARP from the fifth", true, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { wideWAN(c); c.MaxNeighbours = 16 })
			taken := map[*nslot]bool{e.bucketOf(LAN, ipA): true, e.bucketOf(LAN, ipB): true, e.bucketOf(WAN, gwAddr): true}
			var set []netip.Addr // five addresses of a bucket without entries
			for i := 0; len(set) < 5 && i < 20000; i++ {
				b := e.bucketOf(WAN, onLinkWAN(i))
				if !taken[b] && (len(set) == 0 || b == e.bucketOf(WAN, set[0])) {
					set = append(set, onLinkWAN(i))
				}
			}
			for i, a := range set[:4] {
				m := mac(byte(0x40 + i))
				e.send(WAN, frametest.ARPFrame(bcast, m, 1, m, a4(a), [6]byte{}, a4(wanAddr)))
				if tc.used {
					e.forward(LAN, toWAN(a, uint16(100+i)), wanPort)
				}
			}
			e.now += tc.idle * sec
			var res Result
			if tc.learn {
				m := mac(0x50)
				res = e.send(WAN, frametest.ARPFrame(bcast, m, 1, m, a4(set[4]), [6]byte{}, a4(wanAddr)))
			} else {
				res = e.send(LAN, toWAN(set[4], 200))
			}
			kept := 0
			for _, n := range e.r.Neighbours() {
				for _, a := range set[:4] {
					if n.IP == a.As4() && n.Resolved {
						kept++
					}
				}
			}
			if want := map[bool]int{false: 4, true: 3}[tc.taken]; kept != want {
				t.Errorf("%d of the bucket's 4 neighbours kept, want %d (the fifth: %v/%v)", kept, want, res.Action, res.Reason)
			}
			if !tc.learn && !tc.taken && res.Reason != ReasonNeighLimit {
				t.Errorf("the fifth address: %v/%v, want neigh_limit", res.Action, res.Reason)
			}
		})
	}
}

// TestNATARPBudget: while a LAN host's scan of the WAN's subnet uses up
// the ARP requests for unknown addresses (ARPRate), a known neighbour
// that went stale is still probed, answers and keeps its traffic.
func TestNATARPBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) { wideWAN(c); c.MaxNeighbours = 4096; c.MaxConns = 65536; c.PendingFrames = 1024 })
	e.now += 25 * sec
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(7, 8, nil)), wanPort)
	reply := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(8, 7, nil))
	e.forward(WAN, reply, lanPort)
	e.now += 6 * sec // host A is stale: the next frame to it probes it
	for s := range 6 {
		broadcasts := 0
		for i := range 300 {
			e.send(LAN, toWAN(onLinkWAN(s*300+i), uint16(1000+i)))
		}
		for _, o := range drain(e.lan) {
			if o.b[0] == 0xff {
				broadcasts++
			}
		}
		if res := e.send(WAN, reply); res.Action != routing.Forward {
			t.Fatalf("second %d of the scan: the reply to host A %v/%v, want forwarded", s, res.Action, res.Reason)
		}
		probed := false
		for _, o := range drain(e.wan) {
			if o.port == lanPort && [6]byte(o.b[0:6]) == hostA {
				probed = true
				e.send(LAN, frametest.ARPFrame(lanMAC, hostA, 2, hostA, a4(ipA), lanMAC, a4(lanAddr)))
			}
		}
		if s == 0 && !probed {
			t.Errorf("second %d of the scan: host A, stale, was not probed", s)
		}
		if max := 100 + 20; broadcasts > max {
			t.Errorf("second %d of the scan: %d ARP requests for its addresses, want at most %d (ARPRate and its burst)", s, broadcasts, max)
		}
		e.now += sec
	}
}
