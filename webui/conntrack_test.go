package webui

import (
	"net/url"
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
