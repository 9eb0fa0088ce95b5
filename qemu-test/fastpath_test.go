package qemutest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// fastPathForwards checks that the fast path runs on the image's kernel,
// on the e1000e ports, and forwards: host a pings dst through the box
// (bridged or NATed; echo requests after the first replies go through the
// kernel) and the fast path's counters grow, and the data ports' rings
// sit behind it (afterTcx: bound to EtherTypes, no taps). The image's
// kernel (e1kbox's) JIT-compiles the programs, and the appliance's
// measure of them at start found no error; it logs their ns per frame
// (TCG: compare them only with each other) and what the kernel offers.
func fastPathForwards(t *testing.T, b *box, a *host, dst string) {
	t.Helper()
	type state struct {
		Ports []struct {
			Name     string `json:"name"`
			Kind     string `json:"kind"`
			AfterTCX bool   `json:"afterTcx"`
		} `json:"ports"`
		FastPath struct {
			Mode     string            `json:"mode"`
			Reason   string            `json:"reason"`
			Packets  uint64            `json:"packets"`
			NATFlows int               `json:"natFlows"`
			Pairs    int               `json:"pairs"`
			Punts    map[string]uint64 `json:"punts"`
			Kernel   struct {
				Release string            `json:"release"`
				JIT     string            `json:"jit"`
				Config  map[string]string `json:"config"`
			} `json:"kernel"`
			SelfTest *selfTest `json:"selfTest"`
		} `json:"fastPath"`
	}
	var before, after state
	if err := b.api(http.MethodGet, "/api/dataplane", nil, &before); err != nil {
		t.Fatal(err)
	}
	if out, err := a.exec("ping", "-c", "30", "-i", "0.1", "-W", "2", dst); err != nil {
		t.Errorf("ping %s through the box: %v\n%s", dst, err, out)
	}
	if err := b.api(http.MethodGet, "/api/dataplane", nil, &after); err != nil {
		t.Fatal(err)
	}
	fp := after.FastPath
	t.Logf("fast path on the image's kernel %s: mode %s (reason %q), BPF JIT %s, config %v; ping added %d frames to it, %d NAT flows, %d MAC pairs; punts %v",
		fp.Kernel.Release, fp.Mode, fp.Reason, fp.Kernel.JIT, fp.Kernel.Config, fp.Packets-before.FastPath.Packets, fp.NATFlows, fp.Pairs, fp.Punts)
	if fp.Kernel.JIT != "1" {
		t.Errorf("the image's kernel %s does not JIT-compile the fast path: BPF JIT %q, want \"1\"", fp.Kernel.Release, fp.Kernel.JIT)
	}
	fp.SelfTest.check(t)
	if fp.Mode != "tcx" {
		t.Errorf("the fast path does not run on the image's kernel: mode %q, %s", fp.Mode, fp.Reason)
	}
	if fp.Packets <= before.FastPath.Packets {
		t.Errorf("the fast path forwarded none of the pings (%d frames before, %d after)", before.FastPath.Packets, fp.Packets)
	}
	for _, p := range after.Ports {
		if want := p.Kind == "data"; p.AfterTCX != want {
			t.Errorf("port %s (%s): afterTcx = %v, want %v", p.Name, p.Kind, p.AfterTCX, want)
		}
	}
}

// selfTest is /api/dataplane's fastPath.selfTest: the appliance's measure
// of its fast-path programs (BPF_PROG_TEST_RUN) and of the same frames in
// userspace.
type selfTest struct {
	JITed     bool       `json:"jited"`
	Paths     []pathCost `json:"paths"`
	Userspace []pathCost `json:"userspace"`
	Error     string     `json:"error"`
}

type pathCost struct {
	Path       string  `json:"path"`
	NsPerFrame float64 `json:"nsPerFrame"`
	Error      string  `json:"error"`
}

// check fails t unless s measured JIT-compiled programs on every path
// without an error, and logs the numbers.
func (s *selfTest) check(t *testing.T) {
	t.Helper()
	switch {
	case s == nil:
		t.Error("the appliance reported no measure of its fast-path programs (fastPath.selfTest)")
		return
	case s.Error != "":
		t.Errorf("the fast path's self-measure failed: %s", s.Error)
	case !s.JITed:
		t.Error("the fast path's self-measure ran interpreted programs (jited false)")
	case len(s.Paths) == 0:
		t.Error("the fast path's self-measure measured no path")
	}
	var line []string
	for _, p := range append(s.Paths, s.Userspace...) {
		if p.Error != "" || p.NsPerFrame <= 0 {
			t.Errorf("the fast path's self-measure of %s: %.1f ns/frame, error %q", p.Path, p.NsPerFrame, p.Error)
		}
		line = append(line, fmt.Sprintf("%s %.0f ns", p.Path, p.NsPerFrame))
	}
	t.Logf("fast path self-measure under TCG (programs, then userspace): %s", strings.Join(line, ", "))
}
