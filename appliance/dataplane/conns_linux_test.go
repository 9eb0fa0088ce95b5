package dataplane

import (
	"e1kbox/appliance/dataplane/nat"
	"encoding/json"
	"errors"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestConnsAPI(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	// Conns dates expiry by the wall clock. The test router's clock moves
	// 1 ms a frame: started at the wall clock's second, it stays in that
	// second (a start just before the next one dated the connections a
	// second after the listing's now: ExpiresIn 6 s, CI 2026-12-02).
	tr.now = time.Now().Truncate(time.Second).UnixNano()
	tr.resolve(t) // one TCP connection (SYN_SENT) from A
	for i := range 5 {
		tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, uint16(2000+i), 53, 10))
	}
	tr.rx(idLAN2, icmpEcho(rLAN, macB, hBIP, remIP, 64))
	r := tr.r

	all, err := ListConns(r, ConnFilter{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != 7 || len(all.Conns) != 7 || all.Next != 0 {
		t.Fatalf("all: total %d, %d listed, next %d", all.Total, len(all.Conns), all.Next)
	}
	// Pages of two cover the listing without repeats.
	seen := map[uint64]bool{}
	for cur, pages := 0, 0; ; pages++ {
		p, err := ListConns(r, ConnFilter{}, cur, 2)
		if err != nil || len(p.Conns) > 2 || pages > 4 {
			t.Fatalf("page %d: %d conns, %v", pages, len(p.Conns), err)
		}
		for _, c := range p.Conns {
			if seen[c.ID] {
				t.Errorf("connection %d listed twice", c.ID)
			}
			seen[c.ID] = true
		}
		if cur = p.Next; cur == 0 {
			break
		}
	}
	if len(seen) != 7 {
		t.Errorf("paging listed %d connections, want 7", len(seen))
	}

	udp, err := ListConns(r, ConnFilter{Proto: "udp", Port: 2003}, 0, 0)
	if err != nil || udp.Total != 1 || len(udp.Conns) != 1 {
		t.Fatalf("udp port 2003: %+v, %v", udp, err)
	}
	c := udp.Conns[0]
	if c.Proto != "udp" || c.Kind != "masquerade" || c.State != "unreplied" ||
		c.Orig.Src != netip.AddrPortFrom(netip.AddrFrom4(hAIP), 2003) || c.Reply.Dst.Addr() != netip.AddrFrom4(wanIP) ||
		c.Packets != [2]uint64{1, 0} || c.ExpiresIn <= 0 || c.ExpiresIn > Duration(5*time.Second) {
		t.Errorf("udp connection %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil || !strings.Contains(string(b), `"id":"`) || !strings.Contains(string(b), `"state":"unreplied"`) {
		t.Errorf("JSON %s, %v", b, err)
	}
	for _, tc := range []struct {
		f    ConnFilter
		want int
	}{
		{ConnFilter{Proto: "icmp"}, 1},
		{ConnFilter{Proto: "6", State: "syn_sent"}, 1},
		{ConnFilter{Addr: netip.AddrFrom4(hBIP)}, 1},
		{ConnFilter{Kind: "forward"}, 0},
		{ConnFilter{Addr: netip.AddrFrom4(remIP), Proto: "udp"}, 5},
	} {
		p, err := ListConns(r, tc.f, 0, 0)
		if err != nil || p.Total != tc.want || len(p.Conns) != tc.want {
			t.Errorf("filter %+v: total %d listed %d, %v; want %d", tc.f, p.Total, len(p.Conns), err, tc.want)
		}
	}
	for _, f := range []ConnFilter{{Proto: "sctpish"}, {Kind: "snat"}, {State: "open"}} {
		if _, err := ListConns(r, f, 0, 0); err == nil {
			t.Errorf("filter %+v: no error", f)
		}
	}

	if ok := r.DeleteConn(nat.ConnID(c.ID)); !ok {
		t.Errorf("DeleteConn = %v", ok)
	}
	if ok := r.DeleteConn(nat.ConnID(c.ID)); ok {
		t.Errorf("DeleteConn of a deleted connection = true")
	}
	if n, err := DeleteConns(r, ConnFilter{Proto: "udp"}); n != 4 || err != nil {
		t.Errorf("DeleteConns(udp) = %d, %v; want 4", n, err)
	}
	if p, _ := ListConns(r, ConnFilter{}, 0, 0); p.Total != 2 {
		t.Errorf("%d connections left, want 2", p.Total)
	}

	// Expired connections are not listed, even before the sweep.
	tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, 4000, 53, 10))
	if p, _ := ListConns(r, ConnFilter{Port: 4000}, 0, 0); p.Total != 1 {
		t.Fatalf("new UDP connection not listed: %+v", p)
	}
	later := time.Now().Add(6 * time.Second).UnixNano()
	if p, err := listConnsAt(r, ConnFilter{Port: 4000}, 0, 0, later); err != nil || p.Total != 0 || len(p.Conns) != 0 {
		t.Errorf("UDP connection past its 5 s timeout listed: %+v, %v", p, err)
	}

	ns, err := Neighbours(r)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range ns {
		if n.IP == netip.AddrFrom4(gwIP) && n.Side == "wan" && n.Resolved && n.MAC == "02:00:00:00:00:99" {
			found = true
		}
	}
	if !found {
		t.Errorf("gateway not among the neighbours %+v", ns)
	}

	if _, err := ListConns(nil, ConnFilter{}, 0, 0); !errors.Is(err, ErrNotNAT) {
		t.Errorf("Conns in bridge mode: %v", err)
	}
	if _, err := Neighbours(nil); !errors.Is(err, ErrNotNAT) {
		t.Errorf("Neighbours in bridge mode: %v", err)
	}
}

// TestEachConnStreams: listing a table reads it in chunks; the memory a
// listing allocates does not grow with the table (a copy of 4000
// connections is about 1 MB).
func TestEachConnStreams(t *testing.T) {
	tr := newTestRouter(t, 32768, "")
	tr.now = time.Now().UnixNano()
	tr.resolve(t)
	const n = 4000 // the test router ages a UDP flow out after 5 s of its clock, 1 ms a frame
	for i := range n {
		tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, uint16(1024+i%60000), uint16(53+i/60000), 10))
	}
	count := 0
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := EachConn(tr.r, ConnFilter{Proto: "udp"}, func(c *Conn) bool { count++; return true })
	runtime.ReadMemStats(&after)
	if err != nil || count != n {
		t.Fatalf("EachConn: %d connections, %v; want %d", count, err, n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Errorf("listing %d connections allocated %d KiB, want one chunk (< 256 KiB)", n, alloc>>10)
	}
	stopped := 0
	EachConn(tr.r, ConnFilter{}, func(*Conn) bool { stopped++; return stopped < 10 })
	if stopped != 10 {
		t.Errorf("EachConn went on after fn returned false: %d calls", stopped)
	}
	if err := EachConn(nil, ConnFilter{}, nil); !errors.Is(err, ErrNotNAT) {
		t.Errorf("EachConn in bridge mode: %v", err)
	}
}
