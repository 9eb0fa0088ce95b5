package mgmtnet

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"e1kbox/internal/netnstest"
)

// handleIn is a netlink handle in ns.
func handleIn(t *testing.T, ns *netnstest.Namespace) *netlink.Handle {
	t.Helper()
	nh, err := netns.GetFromPath("/run/netns/" + ns.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nh.Close() })
	h, err := netlink.NewHandleAt(nh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// TestCheckLink loses the routes the way gokrazy's DHCP client's race
// does (the address stays, its subnet's route and the default route go)
// and checks that CheckLink puts the subnet's route back, so that the box
// answers on the port again, and changes nothing else.
func TestCheckLink(t *testing.T) {
	box, peer := netnstest.New(t, "mgmt-box"), netnstest.New(t, "mgmt-peer")
	netnstest.Veth(t, netnstest.End{NS: box, Name: "eth0", Addrs: []string{"10.0.2.15/24"}, Up: true},
		netnstest.End{NS: peer, Name: "p0", Addrs: []string{"10.0.2.2/24"}, Up: true})
	box.IP(t, "addr", "add", "10.0.9.1/24", "dev", "eth0", "noprefixroute")
	box.IP(t, "addr", "add", "10.0.8.1/32", "dev", "eth0")
	h := handleIn(t, box)

	r, err := CheckLink(h, "eth0")
	if err != nil || len(r.Restored) != 0 || r.Default {
		t.Fatalf("a port with its routes: %+v, %v; want nothing done, no default route", r, err)
	}
	// What the race leaves: no route on the port.
	box.IP(t, "route", "del", "10.0.2.0/24", "dev", "eth0")
	if out, err := box.Output("ping", "-c", "1", "-W", "1", "10.0.2.2"); err == nil || !strings.Contains(out, "unreachable") {
		t.Fatalf("ping without the route: %v\n%s; want network unreachable", err, out)
	}
	r, err = CheckLink(h, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Repair{Restored: []netip.Prefix{netip.MustParsePrefix("10.0.2.0/24")}}, r, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("repair (-want +got):\n%s", diff)
	}
	if got := box.IP(t, "-4", "route", "show", "dev", "eth0"); strings.TrimSpace(got) != "10.0.2.0/24 proto kernel scope link src 10.0.2.15 metric 1" {
		t.Errorf("routes after the repair: %q", got)
	}
	box.Run(t, "ping", "-c", "1", "-W", "2", "10.0.2.2")
	// With a default route, its metric is the port's.
	box.IP(t, "route", "add", "default", "via", "10.0.2.2", "dev", "eth0", "metric", "7")
	box.IP(t, "route", "del", "10.0.2.0/24", "dev", "eth0")
	if r, err = CheckLink(h, "eth0"); err != nil || len(r.Restored) != 1 || !r.Default {
		t.Fatalf("with a default route: %+v, %v", r, err)
	}
	if got := box.IP(t, "-4", "route", "show", "10.0.2.0/24"); !strings.Contains(got, "metric 7") {
		t.Errorf("route put back beside a default route of metric 7: %q", got)
	}
	if _, err := CheckLink(h, "eth9"); err == nil || !strings.Contains(err.Error(), "eth9") {
		t.Errorf("a missing port: %v", err)
	}
}
