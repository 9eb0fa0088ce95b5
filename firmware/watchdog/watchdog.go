// Package watchdog holds the kernel parameters that keep a hardware watchdog running through a kexec test boot.
package watchdog

import "strings"

// Params are the kernel command-line parameters every e1kbox boot gets,
// so that a watchdog gokrazy's init started keeps running through the
// kexec into an update's test boot and resets a test boot whose kernel
// never reaches userspace (docs/firmware.md, The watchdog across updates).
var Params = []string{
	// The reboot path, kexec included, stops every watchdog whose driver
	// asks for it (i6300esb, iTCO_wdt and sp5100_tco do); 0 keeps them
	// running into the new kernel.
	"watchdog.stop_on_reboot=0",
	// i6300esb's probe disables the timer unless its lock bit is set;
	// nowayout sets the bit when gokrazy starts the timer, and only a
	// platform reset clears it.
	"i6300esb.nowayout=1",
	// A watchdog the new kernel finds running (iTCO_wdt tells it so) is
	// pinged by the kernel until userspace opens it: by default forever,
	// even while the kernel waits for a root device that never comes.
	"watchdog.open_timeout=60",
}

// Append returns the kernel command line cmdline (arguments separated by
// spaces) with each of Params it does not set yet appended; a value
// cmdline already gives a parameter is kept.
func Append(cmdline string) string {
	set := map[string]bool{}
	for _, a := range strings.Fields(cmdline) {
		set[key(a)] = true
	}
	out := strings.TrimRight(cmdline, " \t\r\n")
	for _, p := range Params {
		if !set[key(p)] {
			out += " " + p
		}
	}
	return strings.TrimLeft(out, " ")
}

// key is a parameter's name as the kernel compares it: dashes and
// underscores are the same.
func key(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	return strings.ReplaceAll(name, "-", "_")
}
