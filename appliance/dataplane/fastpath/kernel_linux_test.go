package fastpath

import (
	"bufio"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	cfg := `# Automatically generated file; DO NOT EDIT.
CONFIG_BPF_SYSCALL=y
CONFIG_NET_XGRESS=y
# CONFIG_BPF_JIT is not set
CONFIG_NET_CLS_ACT=m
CONFIG_UNRELATED=y
CONFIG_CGROUP_BPF_EXTRA=y
`
	want := map[string]string{
		"CONFIG_BPF_SYSCALL":       "y",
		"CONFIG_NET_XGRESS":        "y",
		"CONFIG_BPF_JIT":           "n",
		"CONFIG_BPF_JIT_ALWAYS_ON": "n",
		"CONFIG_DEBUG_INFO_BTF":    "n",
		"CONFIG_NET_CLS_ACT":       "m",
		"CONFIG_XDP_SOCKETS":       "n",
		"CONFIG_CGROUP_BPF":        "n",
	}
	got := parseConfig(bufio.NewScanner(strings.NewReader(cfg)))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseConfig (-want +got):\n%s", diff)
	}
}

func TestJITState(t *testing.T) {
	jit := map[string]string{"CONFIG_BPF_JIT": "y", "CONFIG_BPF_JIT_ALWAYS_ON": "n"}
	always := map[string]string{"CONFIG_BPF_JIT": "y", "CONFIG_BPF_JIT_ALWAYS_ON": "y"}
	none := map[string]string{"CONFIG_BPF_JIT": "n", "CONFIG_BPF_JIT_ALWAYS_ON": "n"}
	for _, tc := range []struct {
		name   string
		sysctl string
		read   bool
		config map[string]string
		want   string
	}{
		{"sysctl read, JIT on", "1", true, jit, "1"},
		{"sysctl read, JIT off", "0", true, jit, "0"},
		{"sysctl read, no config", "2", true, nil, "2"},
		{"another namespace, always on (the bench's host)", "", false, always, "1"},
		{"no JIT in the kernel (the gokrazy kernel)", "", false, none, "absent"},
		{"another namespace, JIT switchable", "", false, jit, "unknown"},
		{"nothing to read", "", false, nil, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jitState(tc.sysctl, tc.read, tc.config); got != tc.want {
				t.Errorf("jitState(%q, %v, %v) = %q, want %q", tc.sysctl, tc.read, tc.config, got, tc.want)
			}
		})
	}
}
