package webui

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"testing"
	"unicode/utf8"
)

func FuzzParseConnQuery(f *testing.F) {
	for _, s := range []string{
		"", "addr=10.0.0.0/8&port=443&proto=tcp&state=established&sort=bytes&order=asc&offset=100&limit=50",
		"addr=::ffff:1.2.3.4", "addr=2001:db8::/32", "port=0", "limit=1001", "sort=age", "offset=-1", "addr=1.2.3.4/33",
		"proto=%00", "state=" + string(make([]byte, 40)), "kind=routed&sort=age&order=asc", "proto=icmpv6&offset=3&limit=2",
	} {
		f.Add(s)
	}
	ct := newFakeConntrack(200)
	ct.addIPv6(40)
	conns := ct.conns
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseConnQuery(v)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxConnLimit || q.Offset < 0 {
			t.Fatalf("paging out of bounds: %+v", q)
		}
		if q.Addr.IsValid() && q.Addr != q.Addr.Masked() {
			t.Fatalf("prefix %v not masked", q.Addr)
		}
		page, total := FilterConns(conns, q)
		if len(page) > q.Limit || total > len(conns) || (q.Offset < total && len(page) == 0) {
			t.Fatalf("page of %d, total %d for %+v", len(page), total, q)
		}
		for i := range page {
			if !q.Match(&page[i]) {
				t.Fatalf("entry %d does not match %+v", page[i].ID, q)
			}
			if i > 0 && q.compare(&page[i-1], &page[i]) >= 0 {
				t.Fatalf("page not strictly sorted at %d (pages would overlap)", i)
			}
		}
	})
}

var editPath = regexp.MustCompile(`^(|rules|rules\[\d+\]\.(text|chain)|policies\..*)$`)

func FuzzRulesEdit(f *testing.F) {
	for _, s := range []string{
		`{"policies":{"forward":"drop"},"rules":[{"chain":"forward","text":"tcp dport 22 counter accept"}]}`,
		`{"rules":[{"chain":"input","text":"ip saddr 10.0.0.0/8 drop"},{"text":"udp dport 53 accept"}]}`,
		`{"rules":[{"text":"tcp dport 99999 accept"},{"text":"accept\nchain input"},{"text":"policy input drop"}]}`,
		`{"policies":{"x":"y"},"rules":[{"chain":"nope","text":""}]}`,
		`{"rules":[{"text":"ct state { established, related } accept comment \"a # b\""}]}`,
		`{"rules":null}`, `[]`, `{"rules":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeRulesEdit(b)
		if err != nil {
			return
		}
		rs, errs := compileEdit(e)
		for _, fe := range errs {
			if !editPath.MatchString(fe.Path) || fe.Message == "" {
				t.Fatalf("bad field error %+v", fe)
			}
		}
		if errs == nil {
			if rs == nil || len(rs.Rules) != len(e.Rules) {
				t.Fatalf("%d rules in, %v out", len(e.Rules), rs)
			}
			if _, err := json.Marshal(rs); err != nil {
				t.Fatalf("rule set does not encode: %v", err)
			}
		}
	})
}

func FuzzSetKey(f *testing.F) {
	f.Add([]byte(factoryConfig), "rules", []byte(`{"rules":[]}`))
	f.Add([]byte(`{}`), "k", []byte(`1`))
	f.Add([]byte(`{"a":{"b":[1,2,{"c":null}]},"a":2}`), "a", []byte(`"x"`))
	f.Add([]byte(`[1,2]`), "k", []byte(`1`))
	f.Fuzz(func(t *testing.T, obj []byte, key string, val []byte) {
		if !json.Valid(val) || !utf8.ValidString(key) {
			return
		}
		out, err := setKey(obj, key, val)
		if err != nil {
			return
		}
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("result is not a JSON object: %v\n%s", err, out)
		}
		if err := json.Unmarshal(obj, &before); err != nil {
			t.Fatalf("setKey accepted %q, which is not an object: %v", obj, err)
		}
		want, got := compact(val), compact(after[key])
		if !bytes.Equal(want, got) {
			t.Fatalf("member %q = %s, want %s", key, got, want)
		}
		for k, v := range before {
			if k != key && !bytes.Equal(compact(v), compact(after[k])) {
				t.Fatalf("member %q changed: %s -> %s", k, v, after[k])
			}
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}
