package boxupdate

import (
	"fmt"
	"os"
)

// kmsg writes a milestone to the kernel log (and so the console), where it
// sits between the kernel's own lines of a reboot: services' output goes to
// gokrazy's ring buffers, which a reboot loses. Without /dev/kmsg (tests)
// it writes nothing.
func kmsg(format string, args ...any) {
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "<5>e1kbox update: "+format+"\n", args...)
}
