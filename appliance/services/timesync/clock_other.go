//go:build !linux || !(amd64 || arm64)

package timesync

import (
	"errors"
	"fmt"
	"time"
)

func (systemClock) Step(offset time.Duration) error {
	return fmt.Errorf("step clock by %v: %w", offset, errors.ErrUnsupported)
}

func (systemClock) Slew(offset time.Duration) error {
	return fmt.Errorf("slew clock by %v: %w", offset, errors.ErrUnsupported)
}

func (systemClock) MarkSynced(maxError, estError time.Duration) error {
	return fmt.Errorf("mark clock synchronized: %w", errors.ErrUnsupported)
}
