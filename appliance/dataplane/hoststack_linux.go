package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/hostport"
)

// In NAT mode the host port is the box's own stack behind the router: the
// kernel side of the TAP has the router's LAN MAC and LAN address, so LAN
// hosts find the box's services (DHCP, DNS, the dashboard) at their
// gateway's address, and the kernel reaches everything off the LAN
// through the router like a LAN host: its default route goes via
// boxGateway, a link-local next hop whose neighbour entry is the router's
// LAN MAC. A policy rule sends what the box sends from its LAN address
// through that route whatever else the main table holds (a management
// port's default route, say); the main table's default via the router
// has boxMetric, behind one a management port's DHCP client installs.
var boxGateway = net.IPv4(169, 254, 0, 1).To4()

const (
	boxTable    = 215 // the policy routing table of the box's LAN address
	boxPriority = 215 // the rule's priority
	boxMetric   = 1024
)

// boxStack completes the host port's config in NAT mode, the router's LAN
// MAC (whatever HostPort.MAC says: frames to the router's MAC must be the
// kernel's own) and the LAN address first, and returns the router's LAN
// MAC; nil outside NAT mode.
func (b *builder) boxStack(cfg *Config, hc *hostport.Config) (net.HardwareAddr, error) {
	if modeOf(cfg) != ModeNAT || cfg.NAT == nil || !cfg.NAT.LANAddr.IsValid() {
		return nil, nil
	}
	mac, err := b.lanMACOf(cfg)
	if err != nil {
		return nil, err
	}
	hc.MAC = mac
	addrs := []netip.Prefix{cfg.NAT.LANAddr}
	for _, a := range hc.Addrs {
		if a != cfg.NAT.LANAddr {
			addrs = append(addrs, a)
		}
	}
	hc.Addrs = addrs
	return mac, nil
}

// lanMACOf is the router's LAN MAC: NAT.LANMAC, or the first LAN port's
// interface's, as openNAT picks it.
func (b *builder) lanMACOf(cfg *Config) (net.HardwareAddr, error) {
	if m := cfg.NAT.LANMAC; m != ([6]byte{}) {
		return net.HardwareAddr(m[:]), nil
	}
	for _, p := range cfg.Ports {
		if p.Role != RoleLAN {
			continue
		}
		link, err := b.nl.LinkByName(p.Interface)
		if err != nil {
			return nil, fmt.Errorf("dataplane: port %s: interface %s: %w", p.portName(), p.Interface, err)
		}
		return slices.Clone(link.Attrs().HardwareAddr), nil
	}
	return nil, errors.New("dataplane: NAT mode without a LAN port")
}

// routeBoxStack installs the box stack's routes on the TAP (ifindex),
// whose addresses are addrs, the LAN address first: the neighbour
// boxGateway at the router's LAN MAC, the default routes via it (main
// table, boxMetric; boxTable, with the TAP's subnets on link) and the rule
// that sends traffic from the LAN address through boxTable. The routes and
// the neighbour go with the TAP; the rule is replaced each time.
func (b *builder) routeBoxStack(ifindex int, lanMAC net.HardwareAddr, addrs []netip.Prefix) error {
	src := addrs[0].Addr()
	n := &netlink.Neigh{LinkIndex: ifindex, Family: unix.AF_INET, State: netlink.NUD_PERMANENT, IP: boxGateway, HardwareAddr: lanMAC}
	if err := b.nl.NeighSet(n); err != nil {
		return fmt.Errorf("dataplane: host port: neighbour %s: %w", boxGateway, err)
	}
	for _, table := range []int{unix.RT_TABLE_MAIN, boxTable} {
		r := &netlink.Route{LinkIndex: ifindex, Gw: boxGateway, Flags: int(netlink.FLAG_ONLINK), Table: table,
			Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
		if table == unix.RT_TABLE_MAIN {
			r.Priority = boxMetric
		}
		if err := b.nl.RouteReplace(r); err != nil {
			return fmt.Errorf("dataplane: host port: default route via %s (table %d): %w", boxGateway, table, err)
		}
	}
	for _, a := range addrs {
		if !a.Addr().Is4() {
			continue
		}
		p := a.Masked()
		r := &netlink.Route{LinkIndex: ifindex, Table: boxTable, Scope: netlink.SCOPE_LINK, Src: a.Addr().AsSlice(),
			Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
		if err := b.nl.RouteReplace(r); err != nil {
			return fmt.Errorf("dataplane: host port: route %s (table %d): %w", p, boxTable, err)
		}
	}
	rules, err := b.nl.RuleList(unix.AF_INET)
	if err != nil {
		return fmt.Errorf("dataplane: host port: rules: %w", err)
	}
	for i := range rules {
		if rules[i].Table == boxTable {
			if err := b.nl.RuleDel(&rules[i]); err != nil {
				return fmt.Errorf("dataplane: host port: old rule: %w", err)
			}
		}
	}
	rule := netlink.NewRule()
	rule.Family, rule.Table, rule.Priority = unix.AF_INET, boxTable, boxPriority
	rule.Src = &net.IPNet{IP: src.AsSlice(), Mask: net.CIDRMask(32, 32)}
	if err := b.nl.RuleAdd(rule); err != nil {
		return fmt.Errorf("dataplane: host port: rule from %s: %w", src, err)
	}
	return nil
}
