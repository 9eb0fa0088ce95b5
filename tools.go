//go:build tools

// Package e1kbox pins build-time dependencies in go.mod: the kernel and the
// gokrazy programs that go into the image are built, not imported.
package e1kbox

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/cilium/ebpf/cmd/bpf2go"
	_ "github.com/gokrazy/gokrazy"
	_ "github.com/gokrazy/gokrazy/cmd/dhcp"
	_ "github.com/gokrazy/kernel.amd64" // gokrazy's kernel: the build tests use it, and it still boots e1kbox
	_ "github.com/gokrazy/updater"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/gorilla/websocket"
	_ "github.com/mdlayher/ethtool"
	_ "github.com/mdlayher/packet"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/safchain/ethtool"
	_ "github.com/vishvananda/netlink"
	_ "golang.org/x/sys/unix"
)
