//go:build !linux

package tuning

import (
	"errors"
	"fmt"
	"io"
)

// OpenKmsg fails: /dev/kmsg exists only on Linux.
func OpenKmsg() (io.ReadCloser, error) {
	return nil, fmt.Errorf("open /dev/kmsg: %w", errors.ErrUnsupported)
}
