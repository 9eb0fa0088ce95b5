package webui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRulesAPI(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ConfirmTimeout = time.Hour })
	var table RuleTable
	f.doJSON("GET", "/api/rules", nil, http.StatusOK, &table)
	if len(table.Rules) != 3 || table.Rules[0].Text != "tcp dport 22 counter accept" || table.Subtables == 0 {
		t.Fatalf("rule table %+v", table)
	}

	edit := RulesEdit{
		Policies: map[string]string{"forward": "drop"},
		Rules: []RuleText{
			{Chain: "forward", Text: "tcp dport 443 counter accept"},
			{Chain: "forward", Text: "ct state established,related accept"},
			{Chain: "input", Text: "iif port2 udp dport 53 accept"},
		},
	}
	body, _ := json.Marshal(edit)
	var a ApplyAnswer
	f.doJSON("PUT", "/api/rules", body, http.StatusAccepted, &a)
	if a.Pending == nil {
		t.Fatal("no pending change")
	}
	f.doJSON("GET", "/api/rules", nil, http.StatusOK, &table)
	var texts []string
	for _, r := range table.Rules {
		texts = append(texts, r.Chain+": "+r.Text)
	}
	wantTexts := []string{"forward: tcp dport 443 counter accept", "forward: ct state established,related accept", "input: iif port2 udp dport 53 accept"}
	if diff := cmp.Diff(wantTexts, texts); diff != "" {
		t.Errorf("rules after edit (-want +got):\n%s", diff)
	}
	if len(table.Policies) != 1 || table.Policies[0] != (PolicyStat{Chain: "forward", Action: "drop", Packets: 1234, Bytes: 1234 * 400}) {
		t.Errorf("policies %+v", table.Policies)
	}
	// The rest of the config is untouched and in its order.
	cfg, _ := f.store.Current()
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if diff := cmp.Diff([]string{"version", "mode", "ports", "hostPort", "nat", "rules", "dashboard"}, keys); diff != "" {
		t.Errorf("config keys (-want +got):\n%s", diff)
	}
	f.doJSON("POST", "/api/config/changes/"+string(a.Pending.ID)+"/confirm", nil, http.StatusOK, nil)

	tests := []struct {
		name string
		body string
		want []FieldError
	}{
		{
			name: "parse error",
			body: `{"rules": [{"chain": "forward", "text": "tcp dport 22 accept"}, {"chain": "forward", "text": "tcp dport 99999 accept"}]}`,
			want: []FieldError{{Path: "rules[1].text"}},
		},
		{
			name: "unknown port (from the store)",
			body: `{"rules": [{"chain": "forward", "text": "tcp dport 22 accept"}, {"chain": "input", "text": "iif wan9 accept"}]}`,
			want: []FieldError{{Path: "rules[1].text"}},
		},
		{
			name: "bad chain and policy",
			body: `{"policies": {"forward": "reject", "sideways": "drop"}, "rules": [{"chain": "prerouting", "text": "accept"}]}`,
			want: []FieldError{{Path: "policies.forward"}, {Path: "policies.sideways"}, {Path: "rules[0].chain"}},
		},
		{
			name: "smuggled lines",
			body: `{"rules": [{"text": "accept\npolicy forward drop"}, {"text": "policy forward drop"}, {"text": "  "}]}`,
			want: []FieldError{{Path: "rules[0].text"}, {Path: "rules[1].text"}, {Path: "rules[2].text"}},
		},
		{
			name: "unknown member",
			body: `{"rulez": []}`,
			want: []FieldError{{Path: ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := f.store.Current()
			var got errorBody
			f.on(t).doJSON("PUT", "/api/rules", []byte(tt.body), http.StatusBadRequest, &got)
			for _, e := range got.Errors {
				if e.Message == "" {
					t.Errorf("error at %q without a message", e.Path)
				}
			}
			if diff := cmp.Diff(tt.want, got.Errors, cmp.Comparer(func(a, b FieldError) bool { return a.Path == b.Path })); diff != "" {
				t.Errorf("errors (-want +got, paths only):\n%s\n%+v", diff, got.Errors)
			}
			if after, _ := f.store.Current(); !bytes.Equal(before, after) {
				t.Error("invalid rules changed the config")
			}
		})
	}
}

func TestSetKey(t *testing.T) {
	tests := []struct {
		name, obj, key, val, want string
		wantErr                   bool
	}{
		{name: "replace", obj: `{"a":1,"rules":{"x":1},"b":[2]}`, key: "rules", val: `{"y":2}`, want: `{"a":1,"rules":{"y":2},"b":[2]}`},
		{name: "add", obj: `{"b":1,"a":2}`, key: "rules", val: `[]`, want: `{"b":1,"a":2,"rules":[]}`},
		{name: "empty", obj: ` {} `, key: "k", val: `true`, want: `{"k":true}`},
		{name: "escaped keys", obj: `{"a\"b":"\u00e9"}`, key: "r", val: `1`, want: `{"a\"b":"\u00e9","r":1}`},
		{name: "array", obj: `[1]`, key: "k", val: `1`, wantErr: true},
		{name: "broken", obj: `{"a":`, key: "k", val: `1`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := setKey([]byte(tt.obj), tt.key, []byte(tt.val))
			if (err != nil) != tt.wantErr {
				t.Fatalf("setKey: %s, %v", got, err)
			}
			if tt.wantErr {
				return
			}
			var compact bytes.Buffer
			json.Compact(&compact, got)
			if diff := cmp.Diff(tt.want, compact.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
