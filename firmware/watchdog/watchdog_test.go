package watchdog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAppend(t *testing.T) {
	all := strings.Join(Params, " ")
	tests := []struct {
		name, cmdline, want string
	}{
		{"gokrazy's kernel command line", "root=/dev/sda2 ro init=/gokrazy/init panic=10\n",
			"root=/dev/sda2 ro init=/gokrazy/init panic=10 " + all},
		{"empty", "", all},
		{"already there: nothing twice", "ro " + all, "ro " + all},
		{"a value of the box's own is kept (dashes are underscores to the kernel)",
			"ro watchdog.open-timeout=300 i6300esb.nowayout=0",
			"ro watchdog.open-timeout=300 i6300esb.nowayout=0 watchdog.stop_on_reboot=0"},
		{"a parameter of another driver is not one of ours", "iTCO_wdt.nowayout=1",
			"iTCO_wdt.nowayout=1 " + all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Append(tt.cmdline)); diff != "" {
				t.Errorf("Append(%q) (-want +got):\n%s", tt.cmdline, diff)
			}
		})
	}
}

// TestParams: the parameters the design rests on, by name, and each set
// once (docs/firmware.md explains them).
func TestParams(t *testing.T) {
	got := map[string]string{}
	for _, p := range Params {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			t.Fatalf("%q is not name=value", p)
		}
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	want := map[string]string{"watchdog.stop_on_reboot": "0", "i6300esb.nowayout": "1", "watchdog.open_timeout": "60"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Params (-want +got):\n%s", diff)
	}
}
