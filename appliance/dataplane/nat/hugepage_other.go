//go:build !linux

package nat

// adviseHuge is a no-op off Linux.
func adviseHuge(*table) {}
