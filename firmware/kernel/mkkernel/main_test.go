package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseChangelogDate(t *testing.T) {
	for _, tt := range []struct {
		name, changelog string
		want            time.Time
		wantErr         bool
	}{
		{"first entry counts", "linux (6.12.118-1) trixie-security; urgency=high\n\n  * New upstream stable update\n\n -- Jane Doe <jane@debian.org>  Fri, 20 Nov 2026 18:06:56 +0100\n\nlinux (6.12.117-1) trixie; urgency=medium\n\n -- Jane Doe <jane@debian.org>  Mon, 02 Nov 2026 10:00:00 +0000\n",
			time.Date(2026, 11, 20, 17, 6, 56, 0, time.UTC), false},
		{"no entry", "linux (6.12.118-1) trixie-security; urgency=high\n", time.Time{}, true},
		{"bad date", " -- Jane Doe <jane@debian.org>  yesterday\n", time.Time{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseChangelogDate(strings.NewReader(tt.changelog))
			if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
				t.Errorf("parseChangelogDate = %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
