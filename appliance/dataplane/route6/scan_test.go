package route6

import (
	"fmt"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// wanSrc is address i of the WAN's /64 number p (none of them the LAN's).
func wanSrc(p, i int) [16]byte { return a6(fmt.Sprintf("2001:db8:%x::%x", 0xf000+p, i+1)) }

// unknownDst is LAN address i, which no test resolves unless it says so.
func unknownDst(i int) [16]byte { return a6(fmt.Sprintf("2001:db8:1:0:%x:%x:5ca:1", i>>16, i&0xffff)) }

// echoIn is an inbound echo request from src to dst with identifier id.
func echoIn(src, dst [16]byte, id int) []byte {
	return fromWAN(icmp(src, dst, 64, frame.ICMPv6EchoRequest, 0, uint32(id)<<16|1, nil))
}

// scanLimited is the scan limit that stopped res, or ReasonNone.
func scanLimited(res Result) Reason {
	if res.Reason == ReasonScanSource || res.Reason == ReasonScanTotal {
		return res.Reason
	}
	return ReasonNone
}

// scanEnv is a router with room for a scan's entries and frames, and host
// a known LAN neighbour.
func scanEnv(t *testing.T, neighbours int) *env {
	e := newEnvWith(t, "", Limits{MaxConns: 65536, Neighbours: neighbours, Pending: 64})
	e.r.neigh.learn(WAN, &gwLL, gwMAC, learnConfirm, uint32(e.now/1e9), e.now)
	e.r.neigh.learn(LAN, &host, hostMAC, learnConfirm, uint32(e.now/1e9), e.now)
	return e
}

// TestScanLimits: a scan of unknown LAN addresses within one second gets
// its source's share (an address, its /64) or the total, and no more;
// new connections of other sources to unknown addresses keep theirs, and
// traffic to a known neighbour is never limited, from the scanner either.
func TestScanLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src      func(i int) [16]byte // the scan's i-th source
		admitted int                  // of 300 scan packets
		limit    Reason               // what stopped the rest
		// what stops a new connection to an unknown address after the
		// scan from another address of the scanner's /64, and from
		// another /64
		samePrefix, otherPrefix Reason
	}{
		{"from one address", func(int) [16]byte { return wanSrc(0, 0) }, defaultPerSource, ReasonScanSource, ReasonNone, ReasonNone},
		{"from the addresses of a /64", func(i int) [16]byte { return wanSrc(0, i) }, defaultPerPrefix, ReasonScanSource, ReasonScanSource, ReasonNone},
		{"from many /64s", func(i int) [16]byte { return wanSrc(i, 0) }, defaultScanTotal, ReasonScanTotal, ReasonScanTotal, ReasonScanTotal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := scanEnv(t, 4096)
			admitted := 0
			for i := range 300 {
				switch why := scanLimited(e.handle(wanPort, echoIn(tc.src(i), unknownDst(i), i))); why {
				case ReasonNone:
					admitted++
				case tc.limit:
				default:
					t.Fatalf("scan packet %d: %v, want admitted or %v", i, why, tc.limit)
				}
			}
			if admitted != tc.admitted {
				t.Errorf("%d of 300 scan packets admitted, want %d", admitted, tc.admitted)
			}
			for _, c := range []struct {
				name string
				src  [16]byte
				want Reason
			}{
				{"another address of the scanner's /64", wanSrc(0, 1000), tc.samePrefix},
				{"another /64", wanSrc(1000, 0), tc.otherPrefix},
			} {
				if got := scanLimited(e.handle(wanPort, echoIn(c.src, unknownDst(5000), 5000))); got != c.want {
					t.Errorf("from %s to an unknown address: limited by %v, want %v", c.name, got, c.want)
				}
			}
			for i, src := range [][16]byte{tc.src(0), tc.src(299), wanSrc(2000, 0)} {
				if res := e.handle(wanPort, echoIn(src, host, 7000+i)); res.Action != routing.Forward {
					t.Errorf("echo request %d to the known host: %v/%v, want forwarded", i, res.Action, res.Reason)
				}
			}
			// A second later the source's budget is back.
			e.now += 1e9
			if why := scanLimited(e.handle(wanPort, echoIn(tc.src(0), unknownDst(6000), 6000))); why != ReasonNone {
				t.Errorf("the scanner a second later: limited by %v", why)
			}
		})
	}
}

// TestUnknownCap: the incomplete entries of unknown addresses take at
// most a quarter of the cache; past it a scan's next addresses are
// refused (neigh_limit) while a known connection's next hop still
// resolves, and the share is free again once the entries' resolution is
// over, without a sweep.
func TestUnknownCap(t *testing.T) {
	e := scanEnv(t, 64) // 16 buckets: 16 unknown addresses at once
	var dsts [][16]byte
	load := map[*neighBucket]int{}
	for i := 0; len(dsts) < 40 && i < 1e5; i++ {
		if d := unknownDst(i); load[e.r.neigh.bucket(LAN, &d)] < 3 { // room for all: the cap is what refuses
			load[e.r.neigh.bucket(LAN, &d)]++
			dsts = append(dsts, d)
		}
	}
	scan := func(from int) (refused int) {
		for i := from; i < from+20; i++ {
			res := e.handle(wanPort, echoIn(wanSrc(i, 0), dsts[i], i))
			switch {
			case res.Reason == ReasonNeighLimit:
				refused++
			case res.Action != routing.Queued && res.Reason != ReasonQueueFull:
				t.Fatalf("scan packet %d: %v/%v, want queued or refused", i, res.Action, res.Reason)
			}
		}
		return refused
	}
	for _, step := range []struct {
		name    string
		wait    int64 // seconds before the step
		from    int   // its scan's first destination
		refused int   // of its 20 addresses
	}{
		{"a scan of 20 addresses", 0, 0, 4},
		{"20 more a second later", 1, 20, 20},
		{"20 more once the first are given up", incompleteLife, 20, 4},
	} {
		e.now += step.wait * 1e9
		if got := scan(step.from); got != step.refused {
			t.Errorf("%s: %d refused, want %d", step.name, got, step.refused)
		}
	}
	// A LAN host the cache does not know answers its own connection's
	// reply: known traffic is resolved, cap or no cap.
	if res := e.handle(lanPort, fromLAN(icmp(host2, server, 64, frame.ICMPv6EchoRequest, 0, 0x4242<<16, nil))); res.Action != routing.Forward {
		t.Fatalf("host2's echo request: %v/%v", res.Action, res.Reason)
	}
	if res := e.handle(wanPort, fromWAN(icmp(server, host2, 64, frame.ICMPv6EchoReply, 0, 0x4242<<16, nil))); res.Action != routing.Queued {
		t.Errorf("the reply to host2 during the scan: %v/%v, want queued for its NS", res.Action, res.Reason)
	}
}

// TestNoEviction: the resolution of an unknown address never takes the
// way of a neighbour in use, reachable or stale; a known connection's may
// take a stale one's, and either one's the cache has not confirmed for
// idleForget.
func TestNoEviction(t *testing.T) {
	for _, tc := range []struct {
		name  string
		age   uint32 // seconds since the bucket's four entries were confirmed
		known bool   // the fifth address is a known connection's, not a scan's
		taken bool   // one of the four is gone
	}{
		{"reachable, for a scan", 0, false, false},
		{"stale, for a scan", 60, false, false},
		{"idle, for a scan", idleForget, false, true},
		{"reachable, for a known connection", 0, true, false},
		{"stale, for a known connection", 60, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := scanEnv(t, 64)
			var set [][16]byte // five addresses of one bucket
			first := unknownDst(0)
			for i := 1; len(set) < 4 && i < 1e5; i++ {
				if d := unknownDst(i); e.r.neigh.bucket(LAN, &d) == e.r.neigh.bucket(LAN, &first) {
					set = append(set, d)
				}
			}
			sec := uint32(e.now / 1e9)
			for _, a := range set {
				e.r.neigh.learn(LAN, &a, hostMAC, learnConfirm, sec-tc.age, e.now)
			}
			var res Result
			if tc.known {
				if res = e.handle(lanPort, eth(lanMAC, hostMAC, icmp(first, server, 64, frame.ICMPv6EchoRequest, 0, 0x4343<<16, nil))); res.Action != routing.Forward {
					t.Fatalf("the fifth's echo request: %v/%v", res.Action, res.Reason)
				}
				res = e.handle(wanPort, fromWAN(icmp(server, first, 64, frame.ICMPv6EchoReply, 0, 0x4343<<16, nil)))
			} else {
				res = e.handle(wanPort, echoIn(wanSrc(0, 0), first, 1))
			}
			kept := 0
			for _, n := range e.r.Neighbours(e.now) {
				for _, a := range set {
					if n.Addr == a && n.State != NeighIncomplete {
						kept++
					}
				}
			}
			if want := map[bool]int{false: 4, true: 3}[tc.taken]; kept != want {
				t.Errorf("%d of the bucket's 4 resolved entries kept, want %d", kept, want)
			}
			if want := map[bool]routing.Action{false: routing.Drop, true: routing.Queued}[tc.taken]; res.Action != want ||
				!tc.taken && res.Reason != ReasonNeighLimit {
				t.Errorf("the fifth address: %v/%v, want %v (neigh_limit when refused)", res.Action, res.Reason, want)
			}
		})
	}
}

// TestNewAddress: during a scan that uses up the total, a LAN address
// that announces itself (an unsolicited NA, RFC 9131) is reachable from
// the WAN at once; during a scan from one source or /64, a new address
// another source connects to is solicited and its answer releases the
// frame, however many of the scan's wait.
func TestNewAddress(t *testing.T) {
	fresh := a6("2001:db8:1::beef")
	for _, tc := range []struct {
		name     string
		scan     func(i int) [16]byte
		announce bool
		want     routing.Action // of the echo request to the new address
	}{
		{"announced, many sources", func(i int) [16]byte { return wanSrc(i, 0) }, true, routing.Forward},
		{"solicited, one source", func(int) [16]byte { return wanSrc(0, 0) }, false, routing.Queued},
		// 50 frames of the scan wait: more than the queue's half for them
		{"solicited, a /64 of sources", func(i int) [16]byte { return wanSrc(0, i) }, false, routing.Queued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := scanEnv(t, 1024)
			for i := range 300 {
				e.handle(wanPort, echoIn(tc.scan(i), unknownDst(i), i))
			}
			e.outputs()
			if tc.announce {
				body := append(append([]byte(nil), fresh[:]...), optTLLA, 1)
				body = append(body, hostMAC[:]...)
				na := icmp(fresh, a6("ff02::1"), 255, icmpNA, 0, 0x20000000, body) // override, unsolicited
				if res := e.handle(lanPort, eth(allNodesMAC, hostMAC, na)); res.Action == routing.Drop {
					t.Fatalf("the unsolicited NA: %v/%v", res.Action, res.Reason)
				}
			}
			res := e.handle(wanPort, echoIn(wanSrc(3000, 0), fresh, 1))
			if res.Action != tc.want {
				t.Fatalf("echo request to the new address: %v/%v, want %v", res.Action, res.Reason, tc.want)
			}
			if tc.announce {
				return
			}
			var ns bool
			for _, o := range e.outputs() {
				f := parse(t, o.b)
				ns = ns || f.ICMP.Type == icmpNS && [16]byte(o.b[f.L4Off+8:f.L4Off+24]) == fresh
			}
			if !ns {
				t.Fatal("no NS for the new address")
			}
			out := e.resolve(lanPort, fresh, hostMAC)
			if len(out) != 1 || out[0].port != lanPort {
				t.Errorf("after its NA: %d frames out, want the queued echo request", len(out))
			}
		})
	}
}

// TestScanAllocs: a scan's packets, admitted or limited, and their
// resolution allocate nothing.
func TestScanAllocs(t *testing.T) {
	e := scanEnv(t, 1024)
	pkt := echoIn(wanSrc(0, 0), unknownDst(0), 0)
	var f frame.Frame
	i := 0
	n := testing.AllocsPerRun(500, func() {
		i++
		pkt[14+38], pkt[14+39] = byte(i>>8), byte(i) // another address
		pkt[14+44], pkt[14+45] = byte(i>>8), byte(i) // another echo
		pkt[14+7] = 64
		if err := frame.Parse(pkt, &f); err != nil {
			t.Fatal(err)
		}
		e.w.Process(e.now, wanPort, pkt, &f)
		e.now += 1e6
	})
	if n != 0 {
		t.Errorf("%v allocations per scan packet, want 0", n)
	}
	if st := e.r.Stats(); st.Drops[ReasonScanSource] == 0 || st.Actions[routing.Queued] == 0 {
		t.Errorf("the scan was neither limited nor queued: %v", st.Drops)
	}
}
