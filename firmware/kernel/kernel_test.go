package kernel

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/firmware/watchdog"
)

func TestMissing(t *testing.T) {
	all := func(skip string) []byte {
		var b bytes.Buffer
		for _, r := range Required {
			if r.Option == skip {
				b.WriteString("# " + r.Option + " is not set\n")
				continue
			}
			b.WriteString(r.Option + "=y\n")
		}
		return b.Bytes()
	}
	for _, tt := range []struct {
		name   string
		config []byte
		want   []string
	}{
		{"all set", all(""), nil},
		{"jit not set", all("CONFIG_BPF_JIT"), []string{"CONFIG_BPF_JIT"}},
		{"module is not built in", bytes.Replace(all(""), []byte("CONFIG_IFB=y"), []byte("CONFIG_IFB=m"), 1), []string{"CONFIG_IFB"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Missing(tt.config)); diff != "" {
				t.Errorf("Missing (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommittedConfig: the committed config (what vmlinuz was built with)
// has every option e1kbox requires, and every option of the addendum as
// the addendum sets it (olddefconfig drops an option whose dependencies
// are not met, silently).
func TestCommittedConfig(t *testing.T) {
	config, err := os.ReadFile("config")
	if err != nil {
		t.Fatal(err)
	}
	if m := Missing(config); len(m) > 0 {
		t.Errorf("config lacks required options: %v", m)
	}
	addendum, err := os.ReadFile("config.addendum.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(config), "\n") {
		lines[l] = true
	}
	sc := bufio.NewScanner(bytes.NewReader(addendum))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		want := k + "=" + v
		if v == "n" {
			want = "# " + k + " is not set"
			if !lines[want] && !strings.Contains(string(config), "\n"+k+"=") {
				continue // absent counts as not set
			}
		}
		if !lines[want] {
			t.Errorf("the addendum's %s=%s is not in config (a dependency missing, or an option this kernel does not have)", k, v)
		}
	}
}

// TestCmdlineHasWatchdogParams: cmdline.txt (what gok writes into an image
// built with this kernel) carries the watchdog's parameters, as the images
// `firmware build` writes do.
func TestCmdlineHasWatchdogParams(t *testing.T) {
	b, err := os.ReadFile("cmdline.txt")
	if err != nil {
		t.Fatal(err)
	}
	cmdline := strings.TrimSpace(string(b))
	if got := watchdog.Append(cmdline); got != cmdline {
		t.Errorf("cmdline.txt lacks watchdog parameters: %q, want %q", cmdline, got)
	}
}
