package webui

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestConnQueryKind(t *testing.T) {
	q, err := ParseConnQuery(url.Values{"kind": {"Forward"}})
	if err != nil || q.Kind != "forward" {
		t.Fatalf("ParseConnQuery(kind=Forward) = %+v, %v", q, err)
	}
	if _, err := ParseConnQuery(url.Values{"kind": {"<b>"}}); err == nil {
		t.Errorf("kind=<b> accepted")
	}
	all := []Conn{{ID: 1, Kind: "masquerade"}, {ID: 2, Kind: "forward"}, {ID: 3, Kind: "hairpin"}}
	page, total := FilterConns(all, ConnQuery{Kind: "forward", Limit: 10})
	if total != 1 || len(page) != 1 || page[0].ID != 2 {
		t.Errorf("kind=forward: %+v (total %d)", page, total)
	}
}

// TestConnSelectorMatchesSort: the selector's page is the page of a full
// sort, for top pages (a few entries kept) and deep ones.
func TestConnSelectorMatchesSort(t *testing.T) {
	all := newFakeConntrack(5000).conns
	for _, q := range []ConnQuery{
		{Sort: SortBytes, Limit: 100},
		{Sort: SortPackets, Asc: true, Offset: 40, Limit: 7},
		{Sort: SortAge, Offset: 3000, Limit: 1000},
		{Sort: SortBytes, Proto: "tcp", Offset: 900, Limit: 200},
		{Sort: SortAge, Asc: true, Offset: 4990, Limit: 100},
		{Sort: SortBytes, Offset: 6000, Limit: 10},
	} {
		var want []Conn
		for _, c := range all {
			if q.Match(&c) {
				want = append(want, c)
			}
		}
		slices.SortFunc(want, func(a, b Conn) int { return q.compare(&a, &b) })
		total := len(want)
		want = want[min(q.Offset, len(want)):min(q.Offset+q.Limit, len(want))]
		got, gotTotal := FilterConns(all, q)
		if gotTotal != total || len(got) != len(want) {
			t.Fatalf("%+v: %d of %d, want %d of %d", q, len(got), gotTotal, len(want), total)
		}
		for i := range want {
			if got[i].ID != want[i].ID {
				t.Fatalf("%+v: entry %d is %d, want %d", q, i, got[i].ID, want[i].ID)
			}
		}
	}
}

func TestConntrackAPI(t *testing.T) {
	const n = 100000
	ct := newFakeConntrack(n)
	all := append([]Conn(nil), ct.conns...)
	f := newFixture(t, func(o *Options) { o.Conntrack = ct })

	// oracle filters and sorts on its own, the obvious way.
	oracle := func(keep func(c Conn) bool, less func(a, b Conn) bool) []Conn {
		var ptrs []*Conn
		for i := range all {
			if keep(all[i]) {
				ptrs = append(ptrs, &all[i])
			}
		}
		sort.Slice(ptrs, func(i, j int) bool {
			a, b := *ptrs[i], *ptrs[j]
			if less(a, b) != less(b, a) {
				return less(a, b)
			}
			return a.ID < b.ID
		})
		out := make([]Conn, len(ptrs))
		for i, p := range ptrs {
			out[i] = *p
		}
		return out
	}
	every := func(Conn) bool { return true }
	byBytesDesc := func(a, b Conn) bool { return a.Bytes > b.Bytes }
	tests := []struct {
		name  string
		query string
		keep  func(Conn) bool
		less  func(a, b Conn) bool
	}{
		{name: "default", query: "", keep: every, less: byBytesDesc},
		{name: "page 3", query: "offset=200&limit=100", keep: every, less: byBytesDesc},
		{name: "last page", query: fmt.Sprintf("offset=%d&limit=1000", n-37), keep: every, less: byBytesDesc},
		{name: "packets asc", query: "sort=packets&order=asc&limit=50", keep: every, less: func(a, b Conn) bool { return a.Packets < b.Packets }},
		{name: "oldest", query: "sort=age", keep: every, less: func(a, b Conn) bool { return a.Created.Before(b.Created) }},
		{name: "udp", query: "proto=udp", keep: func(c Conn) bool { return c.Proto == "udp" }, less: byBytesDesc},
		{name: "tcp syn_sent", query: "proto=TCP&state=syn_sent", keep: func(c Conn) bool { return c.Proto == "tcp" && c.State == "syn_sent" }, less: byBytesDesc},
		{name: "port 22", query: "port=22", keep: func(c Conn) bool { return c.Dst.Port() == 22 || c.Src.Port() == 22 || c.NATSrc.Port() == 22 }, less: byBytesDesc},
		{name: "prefix", query: "addr=192.168.1.0/24", keep: func(c Conn) bool { return strings.HasPrefix(c.Src.Addr().String(), "192.168.1.") }, less: byBytesDesc},
		{name: "host", query: "addr=192.168.2.7", keep: func(c Conn) bool { return c.Src.Addr().String() == "192.168.2.7" }, less: byBytesDesc},
		{name: "nat address", query: "addr=203.0.113.2&limit=10", keep: every, less: byBytesDesc},
		{name: "nothing", query: "addr=10.9.9.9", keep: func(Conn) bool { return false }, less: byBytesDesc},
	}
	re := regexp.MustCompile(`(?:^|&)(offset|limit)=(\d+)`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := oracle(tt.keep, tt.less)
			offset, limit := 0, DefaultConnLimit
			for _, m := range re.FindAllStringSubmatch(tt.query, -1) {
				var v int
				fmt.Sscan(m[2], &v)
				if m[1] == "offset" {
					offset = v
				} else {
					limit = v
				}
			}
			var page ConnPage
			f.on(t).doJSON("GET", "/api/conntrack?"+tt.query, nil, http.StatusOK, &page)
			if page.Total != len(want) {
				t.Errorf("total %d, want %d", page.Total, len(want))
			}
			wantPage := want[min(offset, len(want)):min(offset+limit, len(want))]
			if diff := cmp.Diff(wantPage, page.Entries, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
				cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}

	for _, q := range []string{"limit=0", "limit=1001", "offset=-1", "port=0", "port=70000", "addr=nonsense", "sort=size", "order=up", "proto=%3Cscript%3E"} {
		f.doJSON("GET", "/api/conntrack?"+q, nil, http.StatusBadRequest, nil)
	}

	// Kill a connection.
	var page ConnPage
	f.doJSON("GET", "/api/conntrack?limit=1", nil, http.StatusOK, &page)
	id := page.Entries[0].ID
	res := f.req("DELETE", fmt.Sprintf("/api/conntrack/%d", id), nil)
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: status %d", res.StatusCode)
	}
	f.doJSON("DELETE", fmt.Sprintf("/api/conntrack/%d", id), nil, http.StatusNotFound, nil)
	f.doJSON("DELETE", "/api/conntrack/abc", nil, http.StatusBadRequest, nil)
	f.doJSON("GET", "/api/conntrack?limit=1", nil, http.StatusOK, &page)
	if page.Total != n-1 || page.Entries[0].ID == id {
		t.Errorf("after delete: total %d, first %d", page.Total, page.Entries[0].ID)
	}

	// Delete by filter: one is needed (or all=true).
	f.doJSON("DELETE", "/api/conntrack", nil, http.StatusBadRequest, nil)
	f.doJSON("DELETE", "/api/conntrack?port=0", nil, http.StatusBadRequest, nil)
	var udp ConnPage
	f.doJSON("GET", "/api/conntrack?proto=udp&limit=1", nil, http.StatusOK, &udp)
	var del struct{ Deleted int }
	f.doJSON("DELETE", "/api/conntrack?proto=udp", nil, http.StatusOK, &del)
	if del.Deleted != udp.Total || udp.Total == 0 {
		t.Errorf("DELETE proto=udp deleted %d, want %d", del.Deleted, udp.Total)
	}
	f.doJSON("GET", "/api/conntrack?proto=udp", nil, http.StatusOK, &udp)
	if udp.Total != 0 {
		t.Errorf("after DELETE proto=udp: %d left", udp.Total)
	}
	f.doJSON("DELETE", "/api/conntrack?all=true", nil, http.StatusOK, &del)
	f.doJSON("GET", "/api/conntrack", nil, http.StatusOK, &page)
	if page.Total != 0 || del.Deleted == 0 {
		t.Errorf("after DELETE all=true: %d left, %d deleted", page.Total, del.Deleted)
	}
}
