package vm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadFactory reads the repository's two instance configs: the
// bridge (config.json) and the home router (examples/router).
func TestReadFactory(t *testing.T) {
	for _, tc := range []struct {
		config   string
		hostname string
		wan, lan int // DataTaps index, -1: none
		describe [2]string
	}{
		{"../../config.json", "e1kbox", -1, -1, [2]string{`bridge port "port1"`, `bridge port "port2"`}},
		{"../../examples/router/config.json", "e1kbox-router", 0, 1,
			[2]string{`WAN port "wan" (address by DHCP)`, `LAN port "lan" 192.168.1.1/24`}},
	} {
		t.Run(tc.config, func(t *testing.T) {
			f, err := ReadFactory(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			if f.Hostname != tc.hostname {
				t.Errorf("hostname %q, want %q", f.Hostname, tc.hostname)
			}
			got := [2]string{f.Describe(DataInterface(0)), f.Describe(DataInterface(1))}
			if diff := cmp.Diff(tc.describe, got); diff != "" {
				t.Errorf("eth1, eth2 (-want +got):\n%s", diff)
			}
			for role, want := range map[string]int{"wan": tc.wan, "lan": tc.lan} {
				i, p, err := f.DataPort(role)
				if want < 0 {
					if err == nil {
						t.Errorf("%s port %+v on a bridge", role, p)
					}
					continue
				}
				if err != nil || i != want || p.Role != role {
					t.Errorf("DataPort(%s) = %d, %+v, %v; want index %d", role, i, p, err, want)
				}
			}
		})
	}
}

func TestReadFactoryErrors(t *testing.T) {
	b, err := os.ReadFile("../../config.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	files := cfg["PackageConfig"].(map[string]any)["e1kbox/appliance"].(map[string]any)["ExtraFileContents"].(map[string]any)
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		factory any // nil: no factory file
		want    string
	}{
		{"no factory file", nil, "has no /etc/e1kbox/factory.json"},
		{"factory not JSON", "{", "unexpected end of JSON input"},
		{"no ports", `{"mode": "nat"}`, "lists no ports"},
	} {
		delete(files, FactoryFile)
		if tc.factory != nil {
			files[FactoryFile] = tc.factory
		}
		b, _ := json.Marshal(cfg)
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if f, err := ReadFactory(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.name, f, err, tc.want)
		}
	}
	if _, err := ReadFactory(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing config: no error")
	}
}
