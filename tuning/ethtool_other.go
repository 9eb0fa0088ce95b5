//go:build !linux

package tuning

import (
	"errors"
	"fmt"
)

// SysEthtool is the ethtool ioctl client; it exists only on Linux.
type SysEthtool struct{}

// NewEthtool fails: ethtool ioctls exist only on Linux.
func NewEthtool() (*SysEthtool, error) {
	return nil, fmt.Errorf("ethtool socket: %w", errors.ErrUnsupported)
}

// Close does nothing.
func (s *SysEthtool) Close() error { return nil }
