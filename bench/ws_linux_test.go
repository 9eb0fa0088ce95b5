package main

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestBasicAuth(t *testing.T) {
	for _, tc := range []struct{ user, pw string }{{"gokrazy", "e1kbench"}, {"u", "p:with:colons"}, {"", ""}} {
		h := basicAuth(tc.user, tc.pw)
		enc, ok := strings.CutPrefix(h, "Basic ")
		if !ok {
			t.Fatalf("basicAuth(%q, %q) = %q: no Basic scheme", tc.user, tc.pw, h)
		}
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("basicAuth(%q, %q): %v", tc.user, tc.pw, err)
		}
		if want := tc.user + ":" + tc.pw; string(dec) != want {
			t.Errorf("basicAuth(%q, %q) decodes to %q, want %q", tc.user, tc.pw, dec, want)
		}
	}
}
