package mgmtnet

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CheckLink puts back, through h, the route to the subnet of every
// global IPv4 address of the port name that has none on the port (the
// kernel's own prefix route: scope link, the address as source, at the
// metric of the port's other routes or gokrazy's), and says whether the
// port has a default route. Addresses added with noprefixroute are left
// alone.
func CheckLink(h *netlink.Handle, name string) (Repair, error) {
	var r Repair
	l, err := h.LinkByName(name)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return r, fmt.Errorf("%s: addresses: %w", name, err)
	}
	idx := l.Attrs().Index
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: idx, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return r, fmt.Errorf("%s: routes: %w", name, err)
	}
	metric := gokrazyMetric(name)
	have := map[netip.Prefix]bool{}
	for _, rt := range routes {
		if rt.Dst == nil || rt.Dst.IP.IsUnspecified() {
			r.Default = true
			metric = rt.Priority
			continue
		}
		if p, ok := prefixOf(rt.Dst); ok {
			have[p] = true
		}
	}
	for _, a := range addrs {
		if a.Scope != unix.RT_SCOPE_UNIVERSE || a.Flags&unix.IFA_F_NOPREFIXROUTE != 0 {
			continue
		}
		p, ok := prefixOf(a.IPNet)
		if !ok || p.Bits() == 32 || have[p.Masked()] {
			continue
		}
		p = p.Masked()
		rt := &netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)},
			Src: a.IP, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_KERNEL, Priority: metric, Table: unix.RT_TABLE_MAIN}
		if err := h.RouteAdd(rt); err != nil {
			return r, fmt.Errorf("%s: adding the route to %v: %w", name, p, err)
		}
		have[p] = true
		r.Restored = append(r.Restored, p)
	}
	return r, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}
