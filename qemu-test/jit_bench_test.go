package qemutest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"e1kbox/firmware/build"
	"e1kbox/firmware/vm"
)

// gokrazyKernel is gokrazy's stock kernel package: no BPF JIT.
const gokrazyKernel = "github.com/gokrazy/kernel.amd64"

// BenchmarkFastPathJIT boots the image on gokrazy's kernel (the fast path
// interpreted) and on e1kbox's (JIT-compiled), alternately, rounds times
// each, and compares what the appliance's self-measure at start
// (BPF_PROG_TEST_RUN, /api/dataplane fastPath.selfTest) gives for each
// program path: TCG slows both kernels alike, so the ratio is what
// counts, not the ns. It also reports what fastPath "auto" decided on
// the interpreter. Run: make bench-jit.
func BenchmarkFastPathJIT(b *testing.B) {
	requireQEMU(b)
	bs := theBuilds(b)
	cfgPath, err := testConfig(filepath.Join(bs.dir, "gokrazy-kernel-config.json"), func(cfg map[string]any) { cfg["KernelPackage"] = gokrazyKernel })
	if err != nil {
		b.Fatal(err)
	}
	interp, err := build.Run(build.Options{ConfigPath: cfgPath, SourceDir: repoRoot, OutDir: filepath.Join(bs.dir, "gokrazy-kernel"), Log: quietLog()})
	if err != nil {
		b.Fatalf("building the image on gokrazy's kernel: %v", err)
	}
	const rounds = 3
	kernels := []struct {
		name string
		m    *build.Manifest
	}{{"gokrazy (interpreter)", interp}, {"e1kbox (JIT)", bs.good}}
	ns := map[string]map[string][]float64{} // kernel → path → ns per round
	decisions := map[string]string{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, k := range kernels {
				st := selfMeasure(b, k.m, k.name, decisions)
				if ns[k.name] == nil {
					ns[k.name] = map[string][]float64{}
				}
				for _, p := range st.Paths {
					ns[k.name][p.Path] = append(ns[k.name][p.Path], p.NsPerFrame)
				}
				for _, p := range st.Userspace {
					ns[k.name]["userspace "+p.Path] = append(ns[k.name]["userspace "+p.Path], p.NsPerFrame)
				}
			}
		}
	}
	table := jitTable(ns, kernels[0].name, kernels[1].name, decisions)
	fmt.Fprintf(os.Stderr, "\n%s", table)
	if err := os.WriteFile(filepath.Join(artifacts, "fastpath-jit-tcg.md"), []byte(table), 0o644); err != nil {
		b.Logf("saving the table: %v", err)
	}
}

// selfMeasure boots m and returns its fast path's self-measure; it
// records the fast path's mode and reason in decisions[name].
func selfMeasure(b *testing.B, m *build.Manifest, name string, decisions map[string]string) selfTest {
	var st struct {
		FastPath struct {
			Mode   string `json:"mode"`
			Reason string `json:"reason"`
			Kernel struct {
				Release string `json:"release"`
				JIT     string `json:"jit"`
			} `json:"kernel"`
			SelfTest *selfTest `json:"selfTest"`
		} `json:"fastPath"`
	}
	bx := boot(b, m, vm.Options{})
	defer bx.Kill()
	if err := bx.api(http.MethodGet, "/api/dataplane", nil, &st); err != nil {
		b.Fatal(err)
	}
	fp := st.FastPath
	decisions[name] = fmt.Sprintf("kernel %s, BPF JIT %s: fast path %s %s", fp.Kernel.Release, fp.Kernel.JIT, fp.Mode, fp.Reason)
	if fp.SelfTest == nil || fp.SelfTest.Error != "" || len(fp.SelfTest.Paths) == 0 {
		b.Fatalf("%s: no self-measure of the fast path: %+v", name, fp.SelfTest)
	}
	return *fp.SelfTest
}

// jitTable is the benchmark's Markdown table: per path the median ns per
// frame (min–max over the rounds) on each kernel and their ratio.
func jitTable(ns map[string]map[string][]float64, interp, jit string, decisions map[string]string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "fast path self-measure under QEMU TCG, ns per frame, median (min – max) of %d boots each:\n\n", len(ns[jit][firstKey(ns[jit])]))
	fmt.Fprintf(&s, "| path | %s | %s | interpreter / JIT |\n|---|---:|---:|---:|\n", interp, jit)
	var paths []string
	for p := range ns[jit] {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		a, bb := ns[interp][p], ns[jit][p]
		if len(a) == 0 || len(bb) == 0 {
			continue
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %.1fx |\n", p, spread(a), spread(bb), median(a)/median(bb))
	}
	for _, k := range []string{interp, jit} {
		fmt.Fprintf(&s, "\n- %s: %s", k, decisions[k])
	}
	s.WriteString("\n")
	return s.String()
}

func firstKey(m map[string][]float64) string {
	for k := range m {
		return k
	}
	return ""
}

func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

func spread(v []float64) string {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return fmt.Sprintf("%.0f (%.0f – %.0f)", median(c), c[0], c[len(c)-1])
}
