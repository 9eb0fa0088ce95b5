package plane

import (
	"errors"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/router"
)

// ipv6Prefixes is what a delegation gives the IPv6 router: the LAN's
// prefixes (the current /64 first, then the deprecated ones still in use),
// the delegated prefixes and the box's own LAN addresses; and the
// addresses hostAddrs6 put on the host port.
type ipv6Prefixes struct {
	lan, delegated []netip.Prefix
	box            []router.BoxAddr
	onHost         []netip.Prefix
}

// SetIPv6WAN gives the running IPv6 router (and a new engine's) the box's
// WAN addressing.
func (p *Plane) SetIPv6WAN(w router.WANAddressing) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v6wan = w
	p.applyWAN6Locked()
}

func (p *Plane) applyWAN6Locked() {
	if p.engine == nil || p.engine.IPv6() == nil {
		return
	}
	w := p.v6wan
	a := route6.WANAddressing{SLAAC: w.SLAAC && len(w.Secret) > 0, Secret: w.Secret, NetIface: w.Interface, DHCPv6: w.DHCPv6,
		OnEvent: p.wanEvent(w.Decline)}
	for _, l := range w.Leased {
		a.Leased = append(a.Leased, route6.Leased{Addr: l.Addr, Preferred: unixSeconds(l.Preferred), Valid: unixSeconds(l.Valid)})
	}
	if err := p.engine.IPv6().SetWANAddressing(a, time.Now().UnixNano()); err != nil {
		p.log.Error("dataplane: the IPv6 WAN addresses not applied", "err", err)
	}
}

// unixSeconds is t as route6's lifetime deadlines have it: Unix seconds,
// route6.Forever for what lies beyond them.
func unixSeconds(t time.Time) uint32 {
	if s := t.Unix(); s < int64(route6.Forever) {
		return uint32(max(s, 0))
	}
	return route6.Forever
}

// wanEvent logs the IPv6 router's WAN address events and has a duplicate
// DHCPv6 address declined (decline may be nil).
func (p *Plane) wanEvent(decline func(netip.Addr)) func(route6.WANEvent) {
	return func(ev route6.WANEvent) {
		args := []any{"addr", ev.Addr, "origin", ev.Origin.String()}
		if ev.Origin == route6.OriginSLAAC {
			args = append(args, "prefix", ev.Prefix, "dadCounter", ev.DADCounter)
		}
		switch {
		case ev.State == route6.AddrTentative:
			p.log.Info("IPv6: WAN address tentative: duplicate address detection", args...)
		case ev.State == route6.AddrPreferred:
			p.log.Info("IPv6: WAN address in use", args...)
		case ev.State == route6.AddrDeprecated:
			p.log.Info("IPv6: WAN address deprecated (its preferred lifetime ended)", args...)
		case ev.State == route6.AddrRemoved:
			p.log.Info("IPv6: WAN address removed", args...)
		case ev.Origin == route6.OriginDHCPv6:
			p.log.Warn("IPv6: another node on the WAN has the DHCPv6 address: declining it", args...)
			if decline != nil {
				decline(ev.Addr)
			}
		case ev.Retry:
			p.log.Warn("IPv6: another node on the WAN has the SLAAC address: trying the next identifier", args...)
		case ev.Origin == route6.OriginSLAAC:
			p.log.Error("IPv6: other nodes on the WAN have every SLAAC address tried: no address in the prefix", args...)
		default:
			p.log.Error("IPv6: another node on the WAN has the box's link-local address (the same MAC?); it stays in use", args...)
		}
	}
}

// SetIPv6 gives the running IPv6 router the delegation's prefixes and the
// box's LAN addresses (none: nothing is routed), and puts the addresses on
// the host port's kernel interface; a new engine gets them too.
func (p *Plane) SetIPv6(lan, delegated []netip.Prefix, box []router.BoxAddr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v6 = ipv6Prefixes{lan: lan, delegated: delegated, box: box, onHost: p.v6.onHost}
	p.applyIPv6Locked()
}

func (p *Plane) applyIPv6Locked() {
	if p.engine == nil || p.engine.IPv6() == nil {
		return
	}
	var addrs []netip.Addr
	for _, b := range p.v6.box {
		addrs = append(addrs, b.Prefix.Addr())
	}
	if err := p.engine.IPv6().SetPrefixes(p.v6.lan, p.v6.delegated, addrs); err != nil {
		p.log.Error("dataplane: IPv6 prefixes not applied", "err", err)
		return
	}
	p.log.Info("dataplane: IPv6 prefixes", "lan", p.v6.lan, "delegated", p.v6.delegated, "box", addrs)
	if p.applied != nil {
		p.hostAddrs6(router.HostInterface(p.applied))
	}
}

// hostAddrs6 makes the box's LAN IPv6 addresses the host port's (name),
// so its stack answers on them: added without duplicate address detection
// (the router answers neighbour solicitations for them, and the DNS
// forwarder binds at once), deprecated ones with preferred lifetime 0 (the
// stack answers on them but picks them for nothing new); the ones it added
// before and no longer wants are removed. Other addresses (hostPort's own)
// are left alone. The host port stops autoconfiguring (accept_ra and
// autoconf 0).
func (p *Plane) hostAddrs6(name string) {
	link, err := netlink.LinkByName(name)
	if err != nil {
		p.log.Warn("host port: IPv6 addresses not set", "interface", name, "err", err)
		return
	}
	// The stack hears its own RAs (multicast loopback) and would
	// autoconfigure from them: it is the LAN's router, not a host there.
	// Set before any prefix is announced (the first call has none).
	for _, knob := range []string{"accept_ra", "autoconf"} {
		f := "/proc/sys/net/ipv6/conf/" + name + "/" + knob
		if err := os.WriteFile(f, []byte("0\n"), 0o644); err != nil {
			p.log.Warn("host port: IPv6 autoconfiguration not turned off", "knob", f, "err", err)
		}
	}
	var keep []netip.Prefix
	for _, b := range p.v6.box {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: b.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(b.Prefix.Bits(), 128)},
			Flags: unix.IFA_F_NODAD, PreferedLft: math.MaxUint32, ValidLft: math.MaxUint32}
		if b.Deprecated {
			a.PreferedLft = 0
		}
		if err := netlink.AddrReplace(link, a); err != nil {
			p.log.Warn("host port: IPv6 address not set", "interface", name, "address", b.Prefix, "err", err)
			continue
		}
		keep = append(keep, b.Prefix)
	}
	for _, old := range p.v6.onHost {
		if slices.Contains(keep, old) {
			continue
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: old.Addr().AsSlice(), Mask: net.CIDRMask(old.Bits(), 128)}}
		if err := netlink.AddrDel(link, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			p.log.Warn("host port: old IPv6 address not removed", "interface", name, "address", old, "err", err)
			keep = append(keep, old) // try again next time
		}
	}
	p.v6.onHost = keep
}
