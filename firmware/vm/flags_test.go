package vm

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFlagsCommandLine: `firmware vm`'s flags as QEMU's command line; one
// TCG thread unless -tcg-thread=multi.
func TestFlagsCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		accel string
		want  []string // more arguments QEMU must get, in this order
	}{
		{"defaults", nil, "tcg,thread=single", []string{"hostfwd=tcp:127.0.0.1:18080-:80,hostfwd=tcp:127.0.0.1:18081-:8080", "-device i6300esb"}},
		{"single", []string{"-tcg-thread=single"}, "tcg,thread=single", nil},
		{"multi: QEMU's default, a thread per vCPU", []string{"-tcg-thread", "multi"}, "tcg", nil},
		{"ports and UEFI", []string{"-http-port=1", "-dashboard-port=2", "-uefi"}, "tcg,thread=single",
			[]string{"hostfwd=tcp:127.0.0.1:1-:80,hostfwd=tcp:127.0.0.1:2-:8080", "-device i6300esb", "if=pflash,format=raw,unit=1,file=VARS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("vm", flag.ContinueOnError)
			o := Flags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.Image = "disk.img"
			o.defaults()
			args := o.args("MON", "QMP", "VARS")
			i := slices.Index(args, "-accel")
			if i < 0 || i+1 == len(args) {
				t.Fatalf("no -accel in %q", args)
			}
			if diff := cmp.Diff(tc.accel, args[i+1]); diff != "" {
				t.Errorf("-accel (-want +got):\n%s", diff)
			}
			line := strings.Join(args, " ")
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("command line lacks %q:\n%s", w, line)
				}
			}
		})
	}
}

func TestFlagsRejectUnknownThreads(t *testing.T) {
	fs := flag.NewFlagSet("vm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Flags(fs)
	if err := fs.Parse([]string{"-tcg-thread=two"}); err == nil || !strings.Contains(err.Error(), "want single or multi") {
		t.Errorf("-tcg-thread=two: %v, want an error naming single and multi", err)
	}
}

// TestOptionsZeroValue: a zero Options (the benchmarks) keeps a TCG
// thread per vCPU and the defaults of before; the watchdog comes after the
// NICs (their PCI slots unchanged).
func TestOptionsZeroValue(t *testing.T) {
	o := Options{Image: "disk.img", HTTPPort: 1, DashboardPort: 2, DataTaps: [2]string{"tapA", ""}}
	o.defaults()
	got := strings.Join(o.args("MON", "QMP", ""), " ")
	for _, w := range []string{"-accel tcg -cpu qemu64 -smp 2 -m 1024", "-monitor unix:MON,server,nowait -qmp unix:QMP,server,nowait",
		"-netdev tap,id=data1,ifname=tapA,script=no,downscript=no -device e1000e,netdev=data1,mac=52:54:00:e1:00:01",
		"-netdev user,id=data2,restrict=on -device e1000e,netdev=data2,mac=52:54:00:e1:00:02 -device i6300esb"} {
		if !strings.Contains(got, w) {
			t.Errorf("command line lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "pflash") {
		t.Errorf("BIOS boot with OVMF drives:\n%s", got)
	}
}
