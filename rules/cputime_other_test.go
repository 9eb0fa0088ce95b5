//go:build !linux

package rules

// threadCPU is not available: benchmarks report wall time only.
func threadCPU() int64 { return -1 }
