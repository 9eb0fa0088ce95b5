package webui

import (
	"net/url"
	"slices"
	"testing"
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
