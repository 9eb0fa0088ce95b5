package vm

import (
	"flag"
	"fmt"
)

// Flags registers the flags `firmware vm` offers for the VM on fs and
// returns the options they set once fs is parsed. The VM runs its vCPUs on
// one TCG thread unless -tcg-thread=multi: a router image's first boot
// with a thread per vCPU oopsed in 2 of 4 boots (int3 in sched_clock_cpu,
// "Fatal exception in interrupt"), one thread booted every time, as the
// QEMU tests do.
func Flags(fs *flag.FlagSet) *Options {
	o := &Options{OneTCGThread: true}
	fs.BoolVar(&o.UEFI, "uefi", false, "boot with UEFI (OVMF + systemd-boot) instead of BIOS")
	fs.IntVar(&o.HTTPPort, "http-port", 18080, "host port for the gokrazy UI (127.0.0.1)")
	fs.IntVar(&o.DashboardPort, "dashboard-port", 18081, "host port for the dashboard (127.0.0.1)")
	fs.Var((*tcgThread)(&o.OneTCGThread), "tcg-thread", "QEMU TCG threads: single (all vCPUs on one host thread) or multi (one thread per vCPU: faster forwarding, but first boots can oops)")
	return o
}

// tcgThread is Options.OneTCGThread as QEMU's -accel tcg,thread= names it.
type tcgThread bool

func (t *tcgThread) String() string {
	if t != nil && *t {
		return "single"
	}
	return "multi"
}

func (t *tcgThread) Set(s string) error {
	switch s {
	case "single":
		*t = true
	case "multi":
		*t = false
	default:
		return fmt.Errorf("%q: want single or multi", s)
	}
	return nil
}
