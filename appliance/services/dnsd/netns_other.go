//go:build !linux

package dnsd

import "net"

// netns stands for the process's network namespace: other systems have
// no per-thread namespaces.
type netns struct{}

func captureNetns() (*netns, error) { return nil, nil }

func (n *netns) do(f func() error) error { return f() }

func (n *netns) close() {}

func listenConfig() net.ListenConfig { return net.ListenConfig{} }
