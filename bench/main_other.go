//go:build !linux

package main

import "errors"

// benchMain needs Linux network namespaces.
func benchMain(*options) error {
	return errors.New("bench runs on Linux only (network namespaces, AF_PACKET)")
}
