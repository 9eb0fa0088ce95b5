package offload

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"e1kbox/appliance/dataplane/fastpath"
)

// SelfTest is what the fast path's programs cost a frame on this kernel
// (fastpath.MeasureSelf) next to what the slow path's forwarding costs
// the same frame in this process (a lower bound of the rings' cost), and
// what fastPath "auto" made of it.
type SelfTest struct {
	fastpath.SelfTest
	// Userspace are the slow path's costs of the NAT and the bridge
	// frame.
	Userspace []fastpath.PathCost `json:"userspace"`
	// Error says why the programs were not measured at all.
	Error string `json:"error,omitempty"`
}

// selfTests are the self-tests of this process, by mode: the kernel does
// not change while it runs, so each mode is measured once, when the fast
// path first loads in it (a restart of the engine measures nothing), and
// last is the latest, which Off reports.
var selfTests struct {
	mu     sync.Mutex
	byMode map[fastpath.Mode]*SelfTest
	last   *SelfTest
}

// selfTest returns mode's self-test, measured now if it was not yet (and
// then logged).
func selfTest(mode fastpath.Mode, kernel fastpath.KernelReport, log *slog.Logger) *SelfTest {
	selfTests.mu.Lock()
	defer selfTests.mu.Unlock()
	if st := selfTests.byMode[mode]; st != nil {
		return st
	}
	start := time.Now()
	st := &SelfTest{}
	var err error
	st.SelfTest, err = fastpath.MeasureSelf(mode)
	if err != nil {
		st.Error = err.Error()
	}
	st.Userspace = measureUserspace()
	logSelfTest(log, st, kernel, time.Since(start))
	if selfTests.byMode == nil {
		selfTests.byMode = map[fastpath.Mode]*SelfTest{}
	}
	selfTests.byMode[mode], selfTests.last = st, st
	return st
}

// lastSelfTest is the latest self-test of this process, nil before the
// first.
func lastSelfTest() *SelfTest {
	selfTests.mu.Lock()
	defer selfTests.mu.Unlock()
	return selfTests.last
}

// logSelfTest logs the self-test's numbers, once per mode and process.
func logSelfTest(log *slog.Logger, st *SelfTest, kernel fastpath.KernelReport, took time.Duration) {
	args := []any{"mode", st.Mode, "jit", kernel.JIT, "jited", st.JITed, "frames", st.Frames, "rounds", st.Rounds,
		"took", took.Round(time.Millisecond)}
	var failed []any
	add := func(prefix string, paths []fastpath.PathCost) {
		for _, p := range paths {
			if p.Error != "" {
				failed = append(failed, prefix+p.Path, p.Error)
				continue
			}
			args = append(args, prefix+p.Path+"_ns", fmt.Sprintf("%.1f", p.NsPerFrame))
		}
	}
	add("", st.Paths)
	add("userspace_", st.Userspace)
	if st.Error != "" {
		failed = append(failed, "err", st.Error)
	}
	log.Info("fast path self-test: ns per frame", args...)
	if len(failed) > 0 {
		log.Warn("fast path self-test: not measured", failed...)
	}
}

// UserCost is the slow path's ns per frame of path; false when it was not
// measured.
func (st *SelfTest) UserCost(path string) (float64, bool) {
	u := fastpath.SelfTest{Paths: st.Userspace}
	return u.Cost(path)
}

// autoOff says why fastPath "auto" leaves every frame to the rings on this
// kernel, "" to run the fast path. With the kernel's BPF JIT on (or
// unknown) the fast path runs. Without it (jit "0" or "absent": the
// interpreter runs the programs) it runs only when the self-test measured
// a hit of path (the box's kind: PathNAT or PathBridge) cheaper in the
// kernel than in userspace. The userspace side is a lower bound of the
// rings' cost and the kernel's an upper bound of a hit's (in tcx mode the
// program is measured classifying the frame again, which behind a ring's
// filter it does not), so the fast path is kept only where it is clearly
// cheaper.
func autoOff(jit string, st *SelfTest, path string) string {
	if jit != "0" && jit != "absent" {
		return ""
	}
	fast, ok := st.Cost(path)
	if !ok {
		return fmt.Sprintf("BPF interpreted, and its cost was not measured: %s", st.why(st.Paths, path))
	}
	user, ok := st.UserCost(path)
	if !ok {
		return fmt.Sprintf("BPF interpreted, and the userspace cost was not measured: %s", st.why(st.Userspace, path))
	}
	if fast < user {
		return ""
	}
	return fmt.Sprintf("BPF interpreted: %.0f ns/frame vs %.0f ns/frame in userspace", fast, user)
}

// why says why paths have no number for path.
func (st *SelfTest) why(paths []fastpath.PathCost, path string) string {
	for _, p := range paths {
		if p.Path == path && p.Error != "" {
			return p.Error
		}
	}
	if st.Error != "" {
		return st.Error
	}
	return "no " + path + " measurement"
}
