package config

import (
	"encoding/json"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testEnv = Env{Interfaces: []string{"lo", "eth0", "eth1", "eth2", "eth3"}}

// example returns a fresh copy of testdata/example.json.
func example(t testing.TB) *Config {
	t.Helper()
	b, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(example.json): %v", err)
	}
	return c
}

// bridgeConfig returns a small valid bridge-mode config.
func bridgeConfig(t testing.TB) *Config {
	t.Helper()
	c, err := Parse([]byte(`{"version": 2, "mode": "bridge",
		"ports": [{"name": "port1", "interface": "eth1"}, {"name": "port2", "interface": "eth2"}],
		"hostPort": {"addresses": ["192.168.1.2/24"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestValidateExamples(t *testing.T) {
	for name, c := range map[string]*Config{"example.json": example(t), "bridge": bridgeConfig(t)} {
		if err := c.Validate(testEnv); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
	}
}

// validateCase is an edit of example.json (or of bridgeConfig) and the
// errors Validate must then find.
type validateCase struct {
	name   string
	bridge bool // start from bridgeConfig instead of example.json
	edit   func(c *Config)
	// want maps each expected error path to a substring of its message.
	want map[string]string
}

// runValidate runs each case: the paths of the errors are exactly those
// of want, and each message contains want's substring.
func runValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := example(t)
			if tt.bridge {
				c = bridgeConfig(t)
			}
			tt.edit(c)
			err := c.Validate(testEnv)
			got := map[string]string{}
			for _, fe := range AsErrors(err) {
				if _, dup := got[fe.Path]; dup {
					got[fe.Path] += " | "
				}
				got[fe.Path] += fe.Message
			}
			wantPaths, gotPaths := keys(tt.want), keys(got)
			if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
				t.Fatalf("error paths (-want +got):\n%s\nerrors: %v", diff, err)
			}
			for path, sub := range tt.want {
				if !strings.Contains(got[path], sub) {
					t.Errorf("%s: message %q does not contain %q", path, got[path], sub)
				}
			}
		})
	}
}

// TestValidateDocument checks the top-level fields (validate.go).
func TestValidateDocument(t *testing.T) {
	runValidate(t, []validateCase{
		{
			name: "fast path",
			edit: func(c *Config) { c.FastPath = "ebpf" },
			want: map[string]string{"fastPath": `want auto, tcx, xdp or off, got "ebpf"`},
		},
		{
			name: "version and mode",
			edit: func(c *Config) { c.Version = 4; c.Mode = "router" },
			want: map[string]string{
				"version": "is 4; want 3",
				"mode":    `want bridge or nat, got "router"`,
			},
		},
	})
}

func keys(m map[string]string) []string {
	return append([]string{}, slices.Sorted(maps.Keys(m))...)
}

func TestErrorsJSON(t *testing.T) {
	c := example(t)
	c.Ports[0].MTU = 1
	err := c.Validate(testEnv)
	b, jerr := json.Marshal(err)
	if jerr != nil {
		t.Fatal(jerr)
	}
	want := `[{"path":"ports[0].mtu","message":"1 out of range 68..9216"}]`
	if string(b) != want {
		t.Errorf("json.Marshal(err) = %s, want %s", b, want)
	}
	if got := err.Error(); got != "ports[0].mtu: 1 out of range 68..9216" {
		t.Errorf("Error() = %q", got)
	}
}

func TestValidateWithoutEnv(t *testing.T) {
	c := example(t)
	c.Ports[0].Interface = "eth42"
	if err := c.Validate(Env{}); err != nil {
		t.Errorf("Validate without interface list: %v", err)
	}
	if err := c.Validate(testEnv); err == nil {
		t.Error("Validate with interface list accepted an unknown interface")
	}
}
