package dashboard

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/webui"
)

// kernelInfo is the running kernel for the System page: uname and the
// BPF JIT as the engine read them at its start, with the fast path's
// self-test (fp; nil without an engine: read now), and the watchdog from
// root's sysfs. nat: the box routes (its fast path's flows are NAT
// connections).
func kernelInfo(root string, fp *dataplane.FastPathStats, nat bool) *webui.KernelInfo {
	var k fastpath.KernelReport
	if fp != nil {
		k = fp.Kernel
	} else {
		k = fastpath.ReadKernel()
	}
	info := &webui.KernelInfo{Release: k.Release, Version: k.Version, Source: kernelSource(k.Version), JIT: jitOnOff(k.JIT),
		Watchdog: readWatchdog(root)}
	if fp != nil {
		info.FastPath = fastPathCost(fp.SelfTest, nat)
	}
	return info
}

// debianSource finds a Debian source package's version in uname -v, where
// Debian's kernels (and e1kbox's, built from Debian's source) put it.
var debianSource = regexp.MustCompile(`\bDebian (\d\S*)`)

// kernelSource is the source package a kernel was built from, as its
// uname -v names it ("Debian 6.12.118-1"); "" when it names none.
func kernelSource(version string) string {
	if m := debianSource.FindStringSubmatch(version); m != nil {
		return "Debian " + m[1]
	}
	return ""
}

// jitOnOff is fastpath.KernelReport.JIT in words: "on", "off", "none"
// (no JIT in the kernel) or "unknown".
func jitOnOff(jit string) string {
	switch jit {
	case "1", "2": // 2: on, with debug output
		return "on"
	case "0":
		return "off"
	case "absent":
		return "none"
	}
	return "unknown"
}

// readWatchdog reads the first hardware watchdog's sysfs attributes under
// root (they need the kernel's CONFIG_WATCHDOG_SYSFS): "none" without a
// watchdog; a missing attribute stays unknown.
func readWatchdog(root string) webui.Watchdog {
	dir := filepath.Join(root, "sys/class/watchdog/watchdog0")
	if _, err := os.Stat(dir); err != nil {
		return webui.Watchdog{Identity: "none"}
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name)) // missing: unknown
		return strings.TrimSpace(string(b))
	}
	w := webui.Watchdog{Identity: read("identity"), State: read("state")}
	if w.Identity == "" {
		w.Identity = "watchdog0"
	}
	w.TimeoutSeconds, _ = strconv.Atoi(read("timeout")) // unknown: 0
	return w
}

// fastPathCost sums the fast path's self-test up for the dashboard: a hit
// of the box's kind of flow (NAT or bridge), a miss and the slow path's
// cost of the same frame; nil before it was measured.
func fastPathCost(st *offload.SelfTest, nat bool) *webui.FastPathCost {
	if st == nil || len(st.Paths) == 0 {
		return nil
	}
	c := &webui.FastPathCost{JIT: st.JITed, Path: fastpath.PathBridge}
	if nat {
		c.Path = fastpath.PathNAT
	}
	c.Hit, _ = st.Cost(c.Path) // unmeasured: 0
	c.Miss, _ = st.Cost(fastpath.PathMiss)
	c.Userspace, _ = st.UserCost(c.Path)
	return c
}
