package dashboard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/webui"
)

func TestKernelSource(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"#1 SMP PREEMPT_DYNAMIC Debian 6.12.118-1", "Debian 6.12.118-1"},            // e1kbox's kernel
		{"#1 SMP PREEMPT_DYNAMIC Debian 6.1.140-1 (2025-05-22)", "Debian 6.1.140-1"}, // Debian's own
		{"#1 SMP PREEMPT_DYNAMIC @0", ""},
		{"#27-Ubuntu SMP PREEMPT_DYNAMIC Tue Jul 22 17:38:49 UTC 2025", ""},
		{"#1 SMP Debian", ""},
		{"", ""},
	} {
		if got := kernelSource(tc.version); got != tc.want {
			t.Errorf("kernelSource(%q) = %q, want %q", tc.version, got, tc.want)
		}
	}
}

func TestJITOnOff(t *testing.T) {
	for jit, want := range map[string]string{"1": "on", "2": "on", "0": "off", "absent": "none", "unknown": "unknown", "": "unknown"} {
		if got := jitOnOff(jit); got != want {
			t.Errorf("jitOnOff(%q) = %q, want %q", jit, got, want)
		}
	}
}

// TestReadWatchdog reads watchdogs from a fake sysfs.
func TestReadWatchdog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // under sys/class/watchdog/watchdog0; nil: no such directory
		want  webui.Watchdog
	}{
		{"none", nil, webui.Watchdog{Identity: "none"}},
		{"iTCO running", map[string]string{"identity": "iTCO_wdt\n", "timeout": "30\n", "state": "active\n"},
			webui.Watchdog{Identity: "iTCO_wdt", TimeoutSeconds: 30, State: "active"}},
		{"i6300esb stopped", map[string]string{"identity": "i6300ESB timer\n", "timeout": "60\n", "state": "inactive\n"},
			webui.Watchdog{Identity: "i6300ESB timer", TimeoutSeconds: 60, State: "inactive"}},
		{"no sysfs attributes (CONFIG_WATCHDOG_SYSFS off)", map[string]string{"dev": "252:0\n"}, webui.Watchdog{Identity: "watchdog0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.files != nil {
				dir := filepath.Join(root, "sys/class/watchdog/watchdog0")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, text := range tc.files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if diff := cmp.Diff(tc.want, readWatchdog(root)); diff != "" {
				t.Errorf("readWatchdog (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFastPathCost(t *testing.T) {
	st := &offload.SelfTest{
		SelfTest: fastpath.SelfTest{JITed: true, Paths: []fastpath.PathCost{
			{Path: fastpath.PathBridge, NsPerFrame: 95}, {Path: fastpath.PathNAT, NsPerFrame: 121}, {Path: fastpath.PathMiss, NsPerFrame: 90}}},
		Userspace: []fastpath.PathCost{{Path: fastpath.PathNAT, NsPerFrame: 216}, {Path: fastpath.PathBridge, Error: "userspace: failed"}},
	}
	for _, tc := range []struct {
		name string
		st   *offload.SelfTest
		nat  bool
		want *webui.FastPathCost
	}{
		{"nat", st, true, &webui.FastPathCost{JIT: true, Path: "nat", Hit: 121, Userspace: 216, Miss: 90}},
		{"bridge, userspace not measured", st, false, &webui.FastPathCost{JIT: true, Path: "bridge", Hit: 95, Miss: 90}},
		{"not measured", &offload.SelfTest{Error: "fastpath self-test: refused"}, true, nil},
		{"before the first load", nil, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fastPathCost(tc.st, tc.nat)); diff != "" {
				t.Errorf("fastPathCost (-want +got):\n%s", diff)
			}
		})
	}
}
