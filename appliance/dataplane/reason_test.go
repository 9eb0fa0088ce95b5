package dataplane

import (
	"encoding/json"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
)

func TestDropsJSON(t *testing.T) {
	var d Drops
	d[DropRule] = 3
	d[frame.ReasonTruncated] = 1
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"truncated":1,"rule_drop":3}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back Drops
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Errorf("round trip %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"nope":1}`), &back); err == nil {
		t.Errorf("unknown reason accepted")
	}
	for r := Drop(1); r < NumDrops; r++ {
		if s := r.String(); s == "" || s == "none" || s[0] == 'd' && s[1] == 'r' {
			t.Errorf("Drop(%d) has no name: %q", r, s)
		}
	}
	if d.Total() != 4 {
		t.Errorf("Total = %d", d.Total())
	}
}

func TestNATDropNames(t *testing.T) {
	seen := map[string]Drop{}
	for d := Drop(1); d < NumDrops; d++ {
		name := d.String()
		if prev, dup := seen[name]; dup {
			t.Errorf("drop %d and %d are both %q", prev, d, name)
		}
		seen[name] = d
	}
	for _, tc := range []struct {
		d    Drop
		want string
	}{{NATDrop(nat.ReasonTableFull), "nat_table_full"}, {NATDrop(nat.ReasonMalformed), "nat_malformed"}, {DropNATHost, "nat_host"}} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", tc.d, got, tc.want)
		}
	}
	var d Drops
	d[NATDrop(nat.ReasonTableFull)] = 3
	b, err := d.MarshalJSON()
	if err != nil || string(b) != `{"nat_table_full":3}` {
		t.Fatalf("MarshalJSON = %s, %v", b, err)
	}
	var back Drops
	if err := back.UnmarshalJSON(b); err != nil || back != d {
		t.Errorf("UnmarshalJSON(%s) = %v, %v", b, back[NATDrop(nat.ReasonTableFull)], err)
	}
}
