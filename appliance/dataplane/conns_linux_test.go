package dataplane

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConnsAPI(t *testing.T) {
	tr := newTestRouter(t, 1024, "")
	tr.now = time.Now().UnixNano() // Conns dates expiry by the wall clock
	tr.resolve(t)                  // one TCP connection (SYN_SENT) from A
	for i := range 5 {
		tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, uint16(2000+i), 53, 10))
	}
	tr.rx(idLAN2, icmpEcho(rLAN, macB, hBIP, remIP, 64))
	e := &Engine{natr: tr.r}

	all, err := e.Conns(ConnFilter{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != 7 || len(all.Conns) != 7 || all.Next != 0 {
		t.Fatalf("all: total %d, %d listed, next %d", all.Total, len(all.Conns), all.Next)
	}
	// Pages of two cover the listing without repeats.
	seen := map[uint64]bool{}
	for cur, pages := 0, 0; ; pages++ {
		p, err := e.Conns(ConnFilter{}, cur, 2)
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

	udp, err := e.Conns(ConnFilter{Proto: "udp", Port: 2003}, 0, 0)
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
		p, err := e.Conns(tc.f, 0, 0)
		if err != nil || p.Total != tc.want || len(p.Conns) != tc.want {
			t.Errorf("filter %+v: total %d listed %d, %v; want %d", tc.f, p.Total, len(p.Conns), err, tc.want)
		}
	}
	for _, f := range []ConnFilter{{Proto: "sctpish"}, {Kind: "snat"}, {State: "open"}} {
		if _, err := e.Conns(f, 0, 0); err == nil {
			t.Errorf("filter %+v: no error", f)
		}
	}

	if ok, err := e.DeleteConn(c.ID); !ok || err != nil {
		t.Errorf("DeleteConn = %v, %v", ok, err)
	}
	if ok, _ := e.DeleteConn(c.ID); ok {
		t.Errorf("DeleteConn of a deleted connection = true")
	}
	if n, err := e.DeleteConns(ConnFilter{Proto: "udp"}); n != 4 || err != nil {
		t.Errorf("DeleteConns(udp) = %d, %v; want 4", n, err)
	}
	if p, _ := e.Conns(ConnFilter{}, 0, 0); p.Total != 2 {
		t.Errorf("%d connections left, want 2", p.Total)
	}

	// Expired connections are not listed, even before the sweep.
	tr.rx(idLAN1, udp4(rLAN, macA, hAIP, remIP, 4000, 53, 10))
	if p, _ := e.Conns(ConnFilter{Port: 4000}, 0, 0); p.Total != 1 {
		t.Fatalf("new UDP connection not listed: %+v", p)
	}
	later := time.Now().Add(6 * time.Second).UnixNano()
	if p, err := e.connsAt(ConnFilter{Port: 4000}, 0, 0, later); err != nil || p.Total != 0 || len(p.Conns) != 0 {
		t.Errorf("UDP connection past its 5 s timeout listed: %+v, %v", p, err)
	}

	ns, err := e.Neighbours()
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

	bridgeOnly := &Engine{}
	if _, err := bridgeOnly.Conns(ConnFilter{}, 0, 0); !errors.Is(err, ErrNotNAT) {
		t.Errorf("Conns in bridge mode: %v", err)
	}
	if _, err := bridgeOnly.Neighbours(); !errors.Is(err, ErrNotNAT) {
		t.Errorf("Neighbours in bridge mode: %v", err)
	}
}
