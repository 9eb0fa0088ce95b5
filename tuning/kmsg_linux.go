package tuning

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// OpenKmsg opens /dev/kmsg non-blocking, positioned after the last record
// so that only messages from now on are read. The file is pollable: Read
// waits in the runtime's poller and Close ends a pending Read. Each Read
// returns one record; EPIPE means records were overwritten before they
// were read and the next Read continues.
func OpenKmsg() (io.ReadCloser, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek /dev/kmsg to the end: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/kmsg"), nil
}
