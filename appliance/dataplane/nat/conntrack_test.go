package nat

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

func TestEviction(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 16 })
	udpOut := func(sp uint16) Result {
		return e.send(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(sp, 9, nil)))
	}
	reply := func(sp uint16) {
		e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, sp, nil)), lanPort)
	}
	// 12 streams (assured: a reply, and traffic streamAfter later), 4
	// unreplied.
	for i := range 16 {
		if res := udpOut(uint16(100 + i)); res.Action != routing.Forward {
			t.Fatalf("conn %d: %v/%v", i, res.Action, res.Reason)
		}
		if i < 12 {
			reply(uint16(100 + i))
		}
	}
	e.now += streamAfter * sec
	for i := range 12 {
		reply(uint16(100 + i))
	}
	// Four more, a second later, evict the four unreplied ones.
	e.now += sec
	for i := range 4 {
		if res := udpOut(uint16(200 + i)); res.Action != routing.Forward {
			t.Fatalf("new conn %d in full table: %v/%v", i, res.Action, res.Reason)
		}
	}
	for i := range 16 {
		c, _ := e.r.Conns(Filter{Port: uint16(100 + i)}, 0, 0, e.now, nil)
		if alive := len(c) == 1; alive != (i < 12) {
			t.Errorf("conn %d alive %v, want %v", 100+i, alive, i < 12)
		}
	}
	// The new ones are unreplied: they go next. Make them streams: now no
	// entry is evictable and new connections are refused.
	for i := range 4 {
		reply(uint16(200 + i))
	}
	e.now += streamAfter * sec
	for i := range 4 {
		reply(uint16(200 + i))
	}
	if res := udpOut(300); res.Action != routing.Drop || res.Reason != ReasonTableFull {
		t.Errorf("full of assured: %v/%v, want drop table_full", res.Action, res.Reason)
	}
	if n := e.r.CountConns(Filter{}); n != 16 {
		t.Errorf("%d connections, want 16", n)
	}
	st := e.r.Stats()
	if st.Evicted != 4 || st.InsertFailed == 0 {
		t.Errorf("evicted %d insert failed %d, want 4 and >0", st.Evicted, st.InsertFailed)
	}
	// TCP in TIME_WAIT is evictable (after unreplied).
	e2 := newEnv(t, func(c *Config) { c.MaxConns = 16 })
	out := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}
	in := frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}
	for i := range 16 {
		sp := uint16(100 + i)
		e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Flags: frame.TCPSyn}, nil)), wanPort)
		e2.forward(WAN, fromWAN(in.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: sp, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
		e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Flags: frame.TCPAck}, nil)), wanPort)
		if i == 5 { // at the responder's RCV.NXT (the SYN's sequence number + 1): it ends the connection
			e2.forward(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: sp, DstPort: 80, Seq: 1, Flags: frame.TCPRst}, nil)), wanPort)
		}
	}
	if res := e2.send(LAN, fromLAN(hostA, out.TCPPacket(frametest.TCP{SrcPort: 999, DstPort: 80, Flags: frame.TCPSyn}, nil))); res.Action != routing.Forward {
		t.Errorf("SYN with a closed entry to evict: %v/%v", res.Action, res.Reason)
	}
	if c, _ := e2.r.Conns(Filter{Port: 105}, 0, 0, e2.now, nil); len(c) != 0 {
		t.Errorf("closed connection not evicted")
	}
	if n := e2.r.CountConns(Filter{HasState: true, State: StateEstablished}); n != 15 {
		t.Errorf("%d established, want 15 (never evicted)", n)
	}
}

func TestExpirySweep(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SweepBatch = 2000 })
	for i := range 50 {
		e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(uint16(3000+i), 9, nil)), wanPort)
	}
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil)), lanPort)
	if n := e.r.maps.active(frame.ProtoUDP); n != 50 {
		t.Fatalf("%d mappings, want 50", n)
	}
	// Port 3000 becomes a stream (traffic after its reply): the long timeout.
	e.now += streamAfter * sec
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil)), lanPort)
	e.now += (29 - streamAfter) * sec
	e.lan.Tick(e.now)
	if n := e.r.CountConns(Filter{}); n != 50 {
		t.Errorf("after 29 s: %d connections, want 50", n)
	}
	e.now += 2 * sec
	e.lan.Tick(e.now)
	if n := e.r.CountConns(Filter{}); n != 1 {
		t.Errorf("after 31 s: %d connections, want 1 (the stream)", n)
	}
	if n := e.r.maps.active(frame.ProtoUDP); n != 1 {
		t.Errorf("after sweep: %d mappings, want 1", n)
	}
	if st := e.r.Stats(); st.Expired != 49 {
		t.Errorf("expired %d, want 49", st.Expired)
	}
	// An expired connection is not used even before the sweep reaches it.
	e.now += 180 * sec
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(9, 3000, nil))); res.Action != routing.ToHost {
		t.Errorf("reply to an expired connection: %v, want to_host", res.Action)
	}
}

func TestListAndDelete(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 30 {
		src, m := ipA, hostA
		if i%3 == 0 {
			src, m = ipB, hostB
		}
		e.forward(LAN, fromLAN(m, frametest.IPv4{Src: a4(src), Dst: a4(remote)}.UDPPacket(uint16(10000+i), 53, nil)), wanPort)
	}
	var all []Conn
	cursor, pages := 0, 0
	for {
		var page []Conn
		page, cursor = e.r.Conns(Filter{}, cursor, 7, e.now, nil)
		all = append(all, page...)
		pages++
		if cursor == 0 {
			break
		}
	}
	if len(all) != 30 || pages != 5 {
		t.Errorf("paged %d connections in %d pages, want 30 in 5", len(all), pages)
	}
	seen := map[ConnID]bool{}
	for _, c := range all {
		if seen[c.ID] {
			t.Errorf("connection %v listed twice", c.ID)
		}
		seen[c.ID] = true
	}
	if n := e.r.CountConns(Filter{Addr: ipB}); n != 10 {
		t.Errorf("%d connections of B, want 10", n)
	}
	if n := e.r.CountConns(Filter{Port: 10004, Proto: frame.ProtoUDP}); n != 1 {
		t.Errorf("%d connections on port 10004, want 1", n)
	}
	if n := e.r.DeleteConns(Filter{Addr: ipB}); n != 10 {
		t.Errorf("deleted %d, want 10", n)
	}
	c := e.conn(Filter{Port: 10001})
	if !e.r.DeleteConn(c.ID) || e.r.DeleteConn(c.ID) {
		t.Errorf("DeleteConn: want true then false")
	}
	if n := e.r.CountConns(Filter{}); n != 19 {
		t.Errorf("%d left, want 19", n)
	}
	if n := e.r.maps.active(frame.ProtoUDP); n != 19 {
		t.Errorf("%d mappings left, want 19", n)
	}
}
