package fastpath

import (
	"bufio"
	"compress/gzip"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelOptions are the kernel config options the fast path depends on
// or is shaped by, in the order KernelReport lists them.
var KernelOptions = []string{
	"CONFIG_BPF_SYSCALL", // bpf(2): needed
	"CONFIG_NET_XGRESS",  // tcx: needed for ModeTCX (and ingressdrop)
	"CONFIG_BPF_JIT",     // without it the interpreter runs the programs
	"CONFIG_BPF_JIT_ALWAYS_ON",
	"CONFIG_DEBUG_INFO_BTF", // not needed: no CO-RE
	"CONFIG_NET_CLS_ACT",
	"CONFIG_XDP_SOCKETS", // AF_XDP: not used
	"CONFIG_CGROUP_BPF",
}

// KernelReport is what the running kernel offers the fast path.
type KernelReport struct {
	Release string `json:"release"` // uname -r
	// Version is uname -v: the build's number, options and timestamp
	// (e1kbox's kernel has its Debian source package there).
	Version string `json:"version"`
	// Config maps each of KernelOptions to its value ("y", "m", or "n"
	// for not set); empty when /proc/config.gz is missing.
	Config map[string]string `json:"config,omitempty"`
	// JIT is /proc/sys/net/core/bpf_jit_enable ("0", "1", "2"). That
	// sysctl exists only in the initial network namespace; elsewhere (a
	// box run in a namespace, the bench) JIT comes from the config: "1"
	// when CONFIG_BPF_JIT_ALWAYS_ON is set, "absent" when CONFIG_BPF_JIT
	// is not (the interpreter runs BPF), "unknown" when neither tells.
	JIT string `json:"jit"`
}

// ReadKernel reports on the running kernel from uname, /proc/config.gz
// and /proc/sys/net/core/bpf_jit_enable.
func ReadKernel() KernelReport {
	var r KernelReport
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Release = unix.ByteSliceToString(u.Release[:])
		r.Version = unix.ByteSliceToString(u.Version[:])
	}
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			r.Config = parseConfig(bufio.NewScanner(z))
		}
	}
	b, err := os.ReadFile("/proc/sys/net/core/bpf_jit_enable")
	r.JIT = jitState(strings.TrimSpace(string(b)), err == nil, r.Config)
	return r
}

// jitState is KernelReport.JIT: the sysctl's value where it could be
// read, else what config (parseConfig's map, nil without one) says.
func jitState(sysctl string, read bool, config map[string]string) string {
	switch {
	case read:
		return sysctl
	case config == nil:
		return "unknown"
	case config["CONFIG_BPF_JIT"] != "y":
		return "absent"
	case config["CONFIG_BPF_JIT_ALWAYS_ON"] == "y":
		return "1"
	}
	return "unknown"
}

// parseConfig picks KernelOptions out of a kernel .config.
func parseConfig(s *bufio.Scanner) map[string]string {
	m := make(map[string]string, len(KernelOptions))
	for _, o := range KernelOptions {
		m[o] = "n"
	}
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if _, want := m[k]; ok && want {
			m[k] = v
		}
	}
	return m
}
