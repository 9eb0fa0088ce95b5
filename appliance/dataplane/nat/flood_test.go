package nat

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// randomRemote is a WAN address outside the router's subnets.
func randomRemote(rng *rand.Rand) [4]byte {
	return [4]byte{byte(1 + rng.IntN(100)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(1 + rng.IntN(250))}
}

// lanTCP opens a TCP connection from host A's port sp to the remote's 443
// through the router and reports whether every step was forwarded.
func lanTCP(e *env, sp uint16) bool {
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	in := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	steps := []struct {
		side Side
		b    []byte
	}{
		{LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 443, Seq: 100, Flags: frame.TCPSyn, Window: 1000}, nil))},
		{WAN, fromWAN(in.TCPPacket(frametest.TCP{SrcPort: 443, DstPort: sp, Seq: 900, Ack: 101, Flags: frame.TCPSyn | frame.TCPAck, Window: 1000}, nil))},
		{LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 443, Seq: 101, Ack: 901, Flags: frame.TCPAck, Window: 1000}, nil))},
	}
	for _, s := range steps {
		if res := e.send(s.side, s.b); res.Action != routing.Forward {
			e.t.Logf("port %d: %v/%v", sp, res.Action, res.Reason)
			return false
		}
	}
	return true
}

// TestSynFloodThroughPortForward: spoofed SYNs to a TCP port forward, each
// answered by the LAN server's SYN/ACK, used to fill the table with
// replied entries no eviction would touch, so that every new LAN
// connection was dropped table_full. Now they stay within MaxInbound and
// are recycled oldest first, and the LAN keeps connecting.
func TestSynFloodThroughPortForward(t *testing.T) {
	e := newEnv(t, nil) // 1024 connections; tcp 8080 → host A:80
	rng := rand.New(rand.NewPCG(1, 2))
	if !lanTCP(e, 30000) {
		t.Fatal("the connection before the flood")
	}
	lanOK, lanTries := 0, 0
	for i := range 20 * 1024 {
		src := randomRemote(rng)
		syn := frametest.IPv4{Src: src, Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: uint16(1024 + rng.IntN(60000)), DstPort: 8080, Seq: rng.Uint32(), Flags: frame.TCPSyn}, nil)
		res := e.send(WAN, fromWAN(syn))
		if res.Action == routing.Forward { // the LAN server answers
			var f frame.Frame
			if err := frame.Parse(res.Frame, &f); err != nil {
				t.Fatal(err)
			}
			synack := frametest.IPv4{Src: a4(ipA), Dst: src}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: f.TCP.SrcPort, Seq: 7, Ack: f.TCP.Seq + 1, Flags: frame.TCPSyn | frame.TCPAck}, nil)
			e.send(LAN, fromLAN(hostA, synack))
		}
		if i%200 == 100 {
			lanTries++
			if lanTCP(e, uint16(31000+lanTries)) {
				lanOK++
			}
		}
		if i%1000 == 0 {
			e.now += sec / 20 // 20k SYN/s
		}
	}
	st := e.r.Stats()
	t.Logf("after the flood: %d connections (%d unassured, %d inbound unassured), %d evicted, %d refused by a cap; LAN %d/%d",
		st.Conns, st.Unassured, st.Inbound, st.Evicted, st.SourceLimited, lanOK, lanTries)
	if lanOK != lanTries {
		t.Errorf("%d of %d LAN connections opened during the flood, want all", lanOK, lanTries)
	}
	if st.Inbound > 1024/4 {
		t.Errorf("%d inbound unassured connections, want at most MaxInbound %d", st.Inbound, 1024/4)
	}
	for sp := 30000; sp <= 31000+lanTries; sp++ {
		if sp > 30000 && sp <= 31000 {
			continue
		}
		if c, _ := e.r.Conns(Filter{Port: uint16(sp), Proto: frame.ProtoTCP, Kind: KindMasquerade}, 0, 0, e.now, nil); len(c) != 1 || c[0].State != StateEstablished {
			t.Errorf("LAN connection from port %d: %+v, want it established still", sp, c)
		}
	}
}

// TestUDPFloodThroughPortForward: the same with a UDP port forward whose
// LAN server answers every datagram.
func TestUDPFloodThroughPortForward(t *testing.T) {
	e := newEnv(t, nil) // udp 5000-5010 → host B:6000-6010
	rng := rand.New(rand.NewPCG(3, 4))
	udpLAN := func(sp uint16) bool {
		out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(sp, 53, nil))
		in := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, sp, nil))
		return e.send(LAN, out).Action == routing.Forward && e.send(WAN, in).Action == routing.Forward
	}
	ok, tries := 0, 0
	for i := range 20 * 1024 {
		src := randomRemote(rng)
		res := e.send(WAN, fromWAN(frametest.IPv4{Src: src, Dst: a4(wanAddr)}.UDPPacket(uint16(1024+rng.IntN(60000)), 5003, nil)))
		if res.Action == routing.Forward {
			var f frame.Frame
			frame.Parse(res.Frame, &f)
			e.send(LAN, fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: src}.UDPPacket(6003, f.UDP.SrcPort, nil)))
		}
		if i%200 == 100 {
			tries++
			if udpLAN(uint16(40000 + tries)) {
				ok++
			}
		}
		if i%1000 == 0 {
			e.now += sec / 20
		}
	}
	st := e.r.Stats()
	t.Logf("after the flood: %d connections (%d unassured, %d inbound unassured), %d evicted; LAN %d/%d", st.Conns, st.Unassured, st.Inbound, st.Evicted, ok, tries)
	if ok != tries || st.Inbound > 1024/4 {
		t.Errorf("%d of %d LAN exchanges during the flood, %d inbound unassured; want all and at most %d", ok, tries, st.Inbound, 1024/4)
	}
}

// TestBusyLANHost: one LAN host's DNS queries (one exchange each: never
// assured) fill the table; the other host still connects, and the busy
// host's connections recycle its own unassured entries.
func TestBusyLANHost(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 512 })
	streams := 0
	for i := range 5000 {
		sp := uint16(10000 + i%50000)
		dst := netip.AddrFrom4([4]byte{9, 9, byte(i >> 8), byte(i)})
		if e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: dst.As4()}.UDPPacket(sp, 53, nil))).Action == routing.Forward {
			e.send(WAN, fromWAN(frametest.IPv4{Src: dst.As4(), Dst: a4(wanAddr)}.UDPPacket(53, sp, nil)))
		}
		if i%100 == 0 {
			e.now += sec / 4 // 400 queries/s
			out := fromLAN(hostB, frametest.IPv4{Src: a4(ipB), Dst: a4(remote)}.UDPPacket(uint16(50000+i/100), 443, nil))
			if e.send(LAN, out).Action == routing.Forward {
				streams++
			}
		}
	}
	st := e.r.Stats()
	t.Logf("%d connections, %d unassured, %d evicted, %d refused", st.Conns, st.Unassured, st.Evicted, st.SourceLimited)
	if streams != 50 {
		t.Errorf("host B opened %d of 50 connections while host A flooded", streams)
	}
}

// TestPerRemoteCap: one WAN address's unanswered SYNs to a port forward
// stay within MaxPerRemote, recycling its own; another address still
// connects.
func TestPerRemoteCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxPerRemote = 64 })
	attacker := [4]byte{100, 1, 2, 3}
	for i := range 1000 {
		syn := frametest.IPv4{Src: attacker, Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: uint16(2000 + i), DstPort: 8080, Seq: 1, Flags: frame.TCPSyn}, nil)
		e.send(WAN, fromWAN(syn))
	}
	if n := e.r.CountConns(Filter{Addr: netip.AddrFrom4(attacker)}); n > 64 {
		t.Errorf("%d connections from one remote, want at most MaxPerRemote 64", n)
	}
	other := frametest.IPv4{Src: [4]byte{100, 9, 9, 9}, Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 2000, DstPort: 8080, Seq: 1, Flags: frame.TCPSyn}, nil)
	if res := e.send(WAN, fromWAN(other)); res.Action != routing.Forward {
		t.Errorf("another remote's SYN: %v/%v, want forwarded", res.Action, res.Reason)
	}
}

// spoofedSYN sends a SYN from src (a random port) to the TCP port
// forward and, when it is forwarded, the LAN server's SYN/ACK; it returns
// what the router did with the SYN.
func spoofedSYN(t testing.TB, e *env, rng *rand.Rand, src [4]byte) Result {
	t.Helper()
	syn := frametest.IPv4{Src: src, Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: uint16(1024 + rng.IntN(60000)), DstPort: 8080, Seq: rng.Uint32(), Flags: frame.TCPSyn}, nil)
	res := e.send(WAN, fromWAN(syn))
	if res.Action == routing.Forward {
		var f frame.Frame
		if err := frame.Parse(res.Frame, &f); err != nil {
			t.Fatal(err)
		}
		synack := frametest.IPv4{Src: a4(ipA), Dst: src}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: f.TCP.SrcPort, Seq: 7, Ack: f.TCP.Seq + 1, Flags: frame.TCPSyn | frame.TCPAck}, nil)
		e.send(LAN, fromLAN(hostA, synack))
	}
	return res
}

// TestInboundCapBigTable: in a table of the default size, whose live
// entries fill only part of the slab, a new connection from the WAN past
// MaxInbound still takes the place of the oldest unassured inbound one,
// as Config.MaxInbound says: a client of the port forward gets in during
// a SYN flood at its first SYN.
func TestInboundCapBigTable(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 0 }) // DefaultMaxConns
	rng := rand.New(rand.NewPCG(7, 8))
	capacity := DefaultMaxConns / 4
	refused := 0
	for i := range 3 * capacity {
		if res := spoofedSYN(t, e, rng, randomRemote(rng)); res.Action != routing.Forward {
			refused++
			if refused <= 3 {
				t.Logf("SYN %d: %v/%v", i, res.Action, res.Reason)
			}
		}
		if i%1000 == 0 {
			e.now += sec / 20 // 20k SYN/s
		}
	}
	st := e.r.Stats()
	t.Logf("%d connections, %d inbound unassured, %d evicted, %d refused by a cap", st.Conns, st.Inbound, st.Evicted, st.SourceLimited)
	if refused != 0 || st.SourceLimited != 0 {
		t.Errorf("%d of %d SYNs from distinct remotes refused (%d by a cap), want each to take the place of the oldest", refused, 3*capacity, st.SourceLimited)
	}
	if st.Inbound != capacity {
		t.Errorf("%d inbound unassured connections, want the cap %d", st.Inbound, capacity)
	}
}

// TestRemoteCapApartFromLANHosts: the per-remote cap of connections from
// the WAN counts only the remote's: a LAN host with more unassured
// connections than MaxPerRemote (a burst of DNS queries) does not lock
// out the WAN addresses that share its count bucket.
func TestRemoteCapApartFromLANHosts(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 4096; c.MaxPerRemote = 64 })
	for i := range 100 { // host A: 100 unanswered queries
		dst := [4]byte{9, 9, 9, byte(i)}
		if res := e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: dst}.UDPPacket(uint16(10000+i), 53, nil))); res.Action != routing.Forward {
			t.Fatalf("query %d: %v/%v", i, res.Action, res.Reason)
		}
	}
	// WAN addresses in host A's bucket, found by trying.
	var remotes [][4]byte
	for a := uint32(0x0b000001); len(remotes) < 5; a++ {
		if e.r.ct.sourceBucket(a) == e.r.ct.sourceBucket(ip4(ipA)) {
			remotes = append(remotes, put32(a))
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, r := range remotes {
		if res := spoofedSYN(t, e, rng, r); res.Action != routing.Forward {
			t.Errorf("SYN from %v, which shares host A's count bucket: %v/%v, want forwarded", r, res.Action, res.Reason)
		}
	}
}

// TestRemoteBucketsUnguessable: the count buckets are keyed by the
// router's random seed, so an attacker who knows the code cannot pick
// spoofed sources that share a chosen remote's bucket and lock it out of
// the port forwards with MaxPerRemote SYNs.
func TestRemoteBucketsUnguessable(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxPerRemote = 16 })
	guess := newEnv(t, func(c *Config) { c.MaxPerRemote = 16; c.Seed = 4242 }) // what the attacker can compute
	victim := [4]byte{100, 7, 7, 7}
	rng := rand.New(rand.NewPCG(13, 14))
	n := 0
	for a := uint32(0x0b000001); n < 16; a++ {
		if guess.r.ct.sourceBucket(a) == guess.r.ct.sourceBucket(be32(victim)) && a != be32(victim) {
			spoofedSYN(t, e, rng, put32(a))
			n++
		}
	}
	if res := spoofedSYN(t, e, rng, victim); res.Action != routing.Forward {
		t.Errorf("the victim's SYN after 16 SYNs from sources picked to share its bucket: %v/%v, want forwarded", res.Action, res.Reason)
	}
}
