package offload

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/internal/testenv"
)

// measured is a self-test of costs by path: the kernel's (nat, bridge)
// and userspace's; a negative cost is a failed measurement.
func measured(nat, bridge, userNAT, userBridge float64) *SelfTest {
	cost := func(path string, ns float64) fastpath.PathCost {
		if ns < 0 {
			return fastpath.PathCost{Path: path, Error: path + " failed"}
		}
		return fastpath.PathCost{Path: path, NsPerFrame: ns}
	}
	return &SelfTest{
		SelfTest:  fastpath.SelfTest{Paths: []fastpath.PathCost{cost(fastpath.PathNAT, nat), cost(fastpath.PathBridge, bridge)}},
		Userspace: []fastpath.PathCost{cost(fastpath.PathNAT, userNAT), cost(fastpath.PathBridge, userBridge)},
	}
}

func TestAutoOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		jit  string
		st   *SelfTest
		path string
		want string
	}{
		{"JIT on, kernel dearer: as before", "1", measured(300, 250, 100, 90), fastpath.PathNAT, ""},
		{"JIT on with debug output", "2", measured(300, 250, 100, 90), fastpath.PathNAT, ""},
		{"JIT unknown (another namespace): as before", "unknown", measured(300, 250, 100, 90), fastpath.PathNAT, ""},
		{"JIT on, nothing measured", "1", &SelfTest{Error: "fastpath self-test: no"}, fastpath.PathNAT, ""},
		{"interpreted, kernel cheaper", "absent", measured(90, 250, 100, 300), fastpath.PathNAT, ""},
		{"interpreted, kernel dearer", "absent", measured(300, 80, 100, 90), fastpath.PathNAT,
			"BPF interpreted: 300 ns/frame vs 100 ns/frame in userspace"},
		{"JIT switched off, as dear", "0", measured(100, 80, 100, 90), fastpath.PathNAT,
			"BPF interpreted: 100 ns/frame vs 100 ns/frame in userspace"},
		{"interpreted, a bridge judged by the bridge's frame", "absent", measured(90, 250.4, 100, 99.6), fastpath.PathBridge,
			"BPF interpreted: 250 ns/frame vs 100 ns/frame in userspace"},
		{"interpreted, a bridge cheaper in the kernel", "absent", measured(300, 80, 100, 90), fastpath.PathBridge, ""},
		{"interpreted, the kernel's side failed", "absent", measured(-1, 80, 100, 90), fastpath.PathNAT,
			"BPF interpreted, and its cost was not measured: nat failed"},
		{"interpreted, userspace failed", "absent", measured(80, 80, -1, 90), fastpath.PathNAT,
			"BPF interpreted, and the userspace cost was not measured: nat failed"},
		{"interpreted, not loaded for the self-test", "absent", &SelfTest{Error: "fastpath self-test: refused"}, fastpath.PathNAT,
			"BPF interpreted, and its cost was not measured: fastpath self-test: refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := autoOff(tc.jit, tc.st, tc.path); got != tc.want {
				t.Errorf("autoOff(%q, …, %s) = %q, want %q", tc.jit, tc.path, got, tc.want)
			}
		})
	}
}

// TestUserspaceCost: the slow path's forwarding of the sample's frames
// is measured, with a cost above zero.
func TestUserspaceCost(t *testing.T) {
	paths := measureUserspace()
	if len(paths) != 2 || paths[0].Path != fastpath.PathNAT || paths[1].Path != fastpath.PathBridge {
		t.Fatalf("measured %+v, want nat and bridge", paths)
	}
	for _, p := range paths {
		if p.Error != "" || p.NsPerFrame <= 0 {
			t.Errorf("%s: %v ns per frame (%s)", p.Path, p.NsPerFrame, p.Error)
		}
		t.Logf("userspace %s: %.1f ns/frame", p.Path, p.NsPerFrame)
	}
}

// TestOpenMeasures: the fast path measures itself when it first loads,
// once per process, logs it and reports it in Stats, also after it is
// turned off; on this machine's kernel (JIT always on) auto runs it.
func TestOpenMeasures(t *testing.T) {
	testenv.Require(t, "root")
	selfTests.mu.Lock()
	selfTests.byMode, selfTests.last = nil, nil // as a process starts
	selfTests.mu.Unlock()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	open := func() *Manager {
		t.Helper()
		m, err := Open(Options{Mode: fastpath.ModeTCX, Auto: true, Log: log, NATFlows: 16, IPv6Flows: 16, NumPorts: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m := open()
	st, _ := m.Stats()
	if st.Mode != "tcx" || st.SelfTest == nil {
		t.Fatalf("Stats: mode %q, self-test %v; want tcx, measured", st.Mode, st.SelfTest)
	}
	if st.Kernel.JIT != "1" || !st.SelfTest.JITed {
		t.Errorf("JIT %q, programs JIT-compiled: %v; this machine's kernel has it always on", st.Kernel.JIT, st.SelfTest.JITed)
	}
	for _, path := range []string{fastpath.PathNAT, fastpath.PathBridge, fastpath.PathMiss} {
		if ns, ok := st.SelfTest.Cost(path); !ok || ns <= 0 {
			t.Errorf("%s: %v ns per frame, measured %v", path, ns, ok)
		}
	}
	for _, path := range []string{fastpath.PathNAT, fastpath.PathBridge} {
		if ns, ok := st.SelfTest.UserCost(path); !ok || ns <= 0 {
			t.Errorf("userspace %s: %v ns per frame, measured %v", path, ns, ok)
		}
	}
	if again, _ := open().Stats(); again.SelfTest != st.SelfTest {
		t.Error("a second Open measured again")
	}
	if off, _ := Off("turned off in the config").Stats(); off.SelfTest != st.SelfTest || off.Reason != "turned off in the config" {
		t.Errorf("Off: self-test %p, reason %q; want the process's (%p)", off.SelfTest, off.Reason, st.SelfTest)
	}
	text := logs.String()
	t.Log(text)
	if n := strings.Count(text, "fast path self-test"); n != 1 || !strings.Contains(text, " nat_ns=") || !strings.Contains(text, " userspace_bridge_ns=") {
		t.Errorf("logged %d times, want once with the numbers:\n%s", n, text)
	}
}
