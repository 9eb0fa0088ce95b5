// Package mgmtnet keeps the management ports reachable: it puts back the
// route to the subnet of a management port's IPv4 address when gokrazy's
// DHCP client lost it, and has that client apply its lease again.
//
// gokrazy's DHCP client (github.com/gokrazy/gokrazy/cmd/dhcp) moves the
// routes of its interface to its own metric twice at boot: once when it
// applies the lease and once when its carrier watcher, polling every
// second, sees the link come up. When both run in the same moment they
// replace the kernel's prefix route with the metric-1 copy and then
// both delete "the route with metric 0", a request the kernel reads as
// any metric: the copy goes too. The port keeps its address and answers
// nothing — every reply finds "network is unreachable" — and the client,
// its default route gone too, does not look again before its renewal
// (which, by its code, then fails the same way). Under QEMU's TCG, where
// the link comes up right before the lease, that happened in about one boot
// in seven.
package mgmtnet

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// Repair is what one look at a port found and did.
type Repair struct {
	// Restored are the subnets whose routes were put back.
	Restored []netip.Prefix
	// Default says the port has a default route.
	Default bool
}

// Watcher repairs the management ports every Interval.
type Watcher struct {
	// Links names the management ports, asked again at every look.
	Links func() []string
	// Check looks at one port and repairs it (CheckLink in the box's
	// network namespace).
	Check func(name string) (Repair, error)
	// Reapply has gokrazy's DHCP client apply its lease again (its default
	// route, resolv.conf): RestartGokrazyDHCP.
	Reapply  func(ctx context.Context) error
	Interval time.Duration
	Log      *slog.Logger
}

// Run looks at the ports until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	warned := map[string]string{}
	for {
		for _, name := range w.Links() {
			w.look(ctx, name, warned)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// look checks one port; warned holds the last error logged per port, so
// that a lasting one is logged once.
func (w *Watcher) look(ctx context.Context, name string, warned map[string]string) {
	r, err := w.Check(name)
	if err != nil {
		if warned[name] != err.Error() {
			w.Log.Warn("mgmtnet: cannot check the management port", "port", name, "err", err)
			warned[name] = err.Error()
		}
		return
	}
	delete(warned, name)
	if len(r.Restored) == 0 {
		return
	}
	w.Log.Warn("mgmtnet: the management port had lost the route to its subnet (gokrazy's DHCP client raced its carrier watcher); put back",
		"port", name, "subnets", fmt.Sprint(r.Restored), "default_route", r.Default)
	if r.Default || w.Reapply == nil {
		return
	}
	if err := w.Reapply(ctx); err != nil {
		w.Log.Warn("mgmtnet: asking gokrazy's DHCP client to apply its lease again", "port", name, "err", err)
		return
	}
	w.Log.Info("mgmtnet: gokrazy's DHCP client restarted to apply its lease again (default route)", "port", name)
}

// gokrazyMetric is the metric gokrazy's DHCP client gives its routes:
// 1 on eth*, 5 on other ports (priorityFromName in cmd/dhcp).
func gokrazyMetric(name string) int {
	if strings.HasPrefix(name, "eth") {
		return 1
	}
	return 5
}
