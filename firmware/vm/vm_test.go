package vm

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTimeline(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []string // the milestone lines, without their times
	}{
		{
			name:   "whole lines",
			writes: []string{"[    0.000000] Command line: root=x\nnoise\n[   20.2] kexec_core: Starting new kernel\n"},
			want:   []string{"[    0.000000] Command line: root=x", "[   20.2] kexec_core: Starting new kernel"},
		},
		{
			name:   "a line split across writes, CRLF",
			writes: []string{"2026/11/30 15:36:07 e1kbox in", "it: test boot of build b\r", "\nrest"},
			want:   []string{"2026/11/30 15:36:07 e1kbox init: test boot of build b"},
		},
		{
			name:   "an unfinished line is not a milestone yet",
			writes: []string{"Kernel panic - not syncing"},
			want:   nil,
		},
		{
			name:   "nothing of note",
			writes: []string{"findGPTPartUUID: open /dev/sr0\n", "EXT4-fs mounted\n"},
			want:   nil,
		},
	}
	stamp := regexp.MustCompile(`^ *[+-][0-9]+\.[0-9]s `)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := &tailBuffer{max: 1 << 10}
			for _, w := range tt.writes {
				tb.Write([]byte(w))
			}
			var got []string
			for _, l := range strings.Split(tb.timeline(), "\n") {
				if l == "" {
					continue
				}
				if !stamp.MatchString(l) {
					t.Errorf("line %q has no time stamp", l)
				}
				got = append(got, stamp.ReplaceAllString(l, ""))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("timeline (-want +got):\n%s", diff)
			}
			if want := strings.Join(tt.writes, ""); tb.String() != want {
				t.Errorf("console = %q, want %q", tb.String(), want)
			}
		})
	}
}

func TestTimelineBounded(t *testing.T) {
	tb := &tailBuffer{max: 1 << 10}
	for range maxEvents + 10 {
		tb.Write([]byte("reboot: Restarting system\n"))
	}
	if n := strings.Count(tb.timeline(), "\n") + 1; n != maxEvents {
		t.Errorf("timeline keeps %d lines, want %d", n, maxEvents)
	}
	if len(tb.String()) > 1<<10 {
		t.Errorf("console tail is %d bytes, want at most %d", len(tb.String()), 1<<10)
	}
}
