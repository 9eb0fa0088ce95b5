package config

import (
	"net/netip"
	"time"

	"e1kbox/rules"
)

// DHCPServer is the LAN's DHCPv4 server. It answers on the router's LAN
// address and hands out the router as gateway and DNS server.
type DHCPServer struct {
	// Enabled runs the server. Default: on in NAT mode (off in a version
	// 2 config migrated to 3, which had none), off in bridge mode.
	Enabled *bool `json:"enabled"`
	// Range is the pool, "192.168.1.100-192.168.1.250", inside the LAN
	// subnet. Default: the whole subnet but the network, broadcast,
	// router and host port addresses.
	Range AddrRange `json:"range,omitzero"`
	// LeaseTime is how long a lease lasts, 2m..30 days. Default 12h.
	LeaseTime Duration `json:"leaseTime"`
	// Static are fixed leases. Default none.
	Static []StaticLease `json:"static,omitempty"`
	// Probation is how long a device that took a lease has to use its
	// address (traffic through the box) before its lease counts as
	// unused, 10s..1h. Default 1m.
	Probation Duration `json:"probation"`
	// UnprovenShare is the percentage of the pool, 1..100, that leases
	// still within their probation hold at most (a starvation's leases).
	// Default 25.
	UnprovenShare int `json:"unprovenShare"`
	// NewDevicesPerSecond is how many leases devices new to the box bind
	// per second on each LAN port (a burst of twice that), 1..10000.
	// Default 50.
	NewDevicesPerSecond int `json:"newDevicesPerSecond"`
}

// IsEnabled reports whether the server runs.
func (d *DHCPServer) IsEnabled() bool { return d.Enabled != nil && *d.Enabled }

// StaticLease gives a device (by MAC) a fixed address and name.
type StaticLease struct {
	MAC rules.MAC `json:"mac"`
	// Address is an IPv4 address of the LAN subnet, not the router's; it
	// may lie inside or outside Range.
	Address netip.Addr `json:"address"`
	// Hostname is the device's DNS name under dns.domain (a DNS label).
	// Default: the name the device sends.
	Hostname string `json:"hostname,omitempty"`
}

// Defaults of the DHCP server.
const (
	DefaultLeaseTime           = 12 * time.Hour
	DefaultProbation           = time.Minute
	DefaultUnprovenShare       = 25
	DefaultNewDevicesPerSecond = 50
)

// Limits of the DHCP server.
const (
	minLeaseTime           = 2 * time.Minute
	maxLeaseTime           = 30 * 24 * time.Hour
	maxStaticLease         = 4096
	minProbation           = 10 * time.Second
	maxProbation           = time.Hour
	maxNewDevicesPerSecond = 10000
)

// applyDefaults fills the defaults; on says whether the router services
// run by default (NAT mode).
func (d *DHCPServer) applyDefaults(on bool) {
	if d.Enabled == nil {
		d.Enabled = ptr(on)
	}
	if d.LeaseTime == 0 {
		d.LeaseTime = Duration(DefaultLeaseTime)
	}
	if d.Probation == 0 {
		d.Probation = Duration(DefaultProbation)
	}
	if d.UnprovenShare == 0 {
		d.UnprovenShare = DefaultUnprovenShare
	}
	if d.NewDevicesPerSecond == 0 {
		d.NewDevicesPerSecond = DefaultNewDevicesPerSecond
	}
}

func (v *validator) dhcp() {
	lan, router := v.lanPrefix()
	d := &v.c.DHCP
	if t := d.LeaseTime.D(); t != 0 && (t < minLeaseTime || t > maxLeaseTime) {
		v.add("dhcp.leaseTime", "%s out of range %s..%s", d.LeaseTime, Duration(minLeaseTime), Duration(maxLeaseTime))
	}
	if !d.Range.IsZero() {
		v.addrRange("dhcp.range", d.Range, lan, router)
	}
	if t := d.Probation.D(); t != 0 && (t < minProbation || t > maxProbation) {
		v.add("dhcp.probation", "%s out of range %s..%s", d.Probation, Duration(minProbation), Duration(maxProbation))
	}
	if d.UnprovenShare < 0 || d.UnprovenShare > 100 {
		v.add("dhcp.unprovenShare", "%d out of range 1..100 (percent of the pool)", d.UnprovenShare)
	}
	if d.NewDevicesPerSecond < 0 || d.NewDevicesPerSecond > maxNewDevicesPerSecond {
		v.add("dhcp.newDevicesPerSecond", "%d out of range 1..%d", d.NewDevicesPerSecond, maxNewDevicesPerSecond)
	}
	if len(d.Static) > maxStaticLease {
		v.add("dhcp.static", "%d entries, at most %d", len(d.Static), maxStaticLease)
	}
	macs, addrs := map[rules.MAC]int{}, map[netip.Addr]int{}
	for i, s := range d.Static {
		at := index("dhcp.static", i)
		if v.unicastMAC(at+".mac", s.MAC, "the device's MAC", "") {
			if j, dup := macs[s.MAC]; dup {
				v.add(at+".mac", "%s already has a static lease at dhcp.static[%d]", s.MAC, j)
			}
			macs[s.MAC] = i
		}
		if v.lanHostAddr(at+".address", s.Address, lan, router) {
			if j, dup := addrs[s.Address]; dup {
				v.add(at+".address", "%s is already given to dhcp.static[%d]", s.Address, j)
			}
			addrs[s.Address] = i
		}
		if s.Hostname != "" && !isLabel(s.Hostname) {
			v.add(at+".hostname", "%q is not a DNS label (letters, digits and '-', 1-63, not starting or ending with '-')", s.Hostname)
		}
	}
}

// lanPrefix returns the router's LAN prefix and address in NAT mode.
func (v *validator) lanPrefix() (netip.Prefix, netip.Addr) {
	if a := v.c.RouterLAN(); a.IsValid() {
		return a.Masked(), a.Addr()
	}
	return netip.Prefix{}, netip.Addr{}
}

// lanHostAddr checks that a is a host address of the LAN subnet other
// than the router's.
func (v *validator) lanHostAddr(at string, a netip.Addr, lan netip.Prefix, router netip.Addr) bool {
	switch {
	case !a.IsValid():
		v.add(at, "missing; want an IPv4 address of the LAN")
	case !a.Is4():
		v.add(at, "%s is not an IPv4 address", a)
	case !lan.IsValid():
	case !lan.Contains(a):
		v.add(at, "%s is not in the LAN %s", a, lan)
	case a == router:
		v.add(at, "%s is the router's own LAN address", a)
	case a == lan.Addr() || a == lastAddr(lan):
		v.add(at, "%s is the network or broadcast address of the LAN", a)
	default:
		return true
	}
	return false
}

// addrRange checks the DHCP pool.
func (v *validator) addrRange(at string, r AddrRange, lan netip.Prefix, router netip.Addr) {
	if !v.lanHostAddr(at, r.First, lan, router) || !v.lanHostAddr(at, r.Last, lan, router) {
		return
	}
	if r.Last.Less(r.First) {
		v.add(at, "range %s is reversed (want %s-%s)", r, r.Last, r.First)
	}
	if !router.Less(r.First) && !r.Last.Less(router) {
		v.add(at, "range %s contains the router's address %s", r, router)
	}
}
