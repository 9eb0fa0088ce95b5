package config

import (
	"net/netip"
	"slices"
	"strings"
)

// Forward is a port forward: connections to WANPorts on the WAN address go
// to LANHost. A range maps one to one onto LANPort, LANPort+1, ...
type Forward struct {
	// Proto is tcp or udp.
	Proto string `json:"proto"`
	// WANPorts is the port or range on the WAN address, e.g. "443" or
	// "6000-6010".
	WANPorts PortRange `json:"wanPorts"`
	// LANHost is the IPv4 address of the LAN host, inside a LAN prefix.
	LANHost netip.Addr `json:"lanHost"`
	// LANPort is the first destination port on the LAN host. Default: the
	// first of WANPorts.
	LANPort uint16 `json:"lanPort"`
	// Comment is free text for the dashboard. Default "".
	Comment string `json:"comment,omitempty"`
}

// maxComment bounds Forward.Comment.
const maxComment = 128

func (f *Forward) applyDefaults() {
	if f.LANPort == 0 {
		f.LANPort = f.WANPorts.First
	}
}

// forwards checks the port forwards against each other and the LAN.
func (v *validator) forwards() {
	lan := v.c.routerPrefixes(RoleLAN)
	for i := range v.c.NAT.Forwards {
		v.forward(i, lan)
	}
}

func (v *validator) forward(i int, lan []netip.Prefix) {
	n := &v.c.NAT
	f := &n.Forwards[i]
	at := index("nat.forwards", i)
	if f.Proto != "tcp" && f.Proto != "udp" {
		v.add(at+".proto", "want tcp or udp, got %q", f.Proto)
	}
	if v.portRange(at+".wanPorts", f.WANPorts, false) {
		for j := range i {
			g := &n.Forwards[j]
			if g.Proto == f.Proto && g.WANPorts.First != 0 && g.WANPorts.First <= g.WANPorts.Last && g.WANPorts.Overlaps(f.WANPorts) {
				v.add(at+".wanPorts", "%s %s collides with nat.forwards[%d] (%s %s)", f.Proto, f.WANPorts, j, g.Proto, g.WANPorts)
				break
			}
		}
		if f.LANPort != 0 && int(f.LANPort)+f.WANPorts.Len()-1 > 65535 {
			v.add(at+".lanPort", "the range %d-%d (one port per WAN port) ends past 65535", f.LANPort, int(f.LANPort)+f.WANPorts.Len()-1)
		}
	}
	switch h := f.LANHost; {
	case !h.IsValid():
		v.add(at+".lanHost", "missing; want the LAN host's IPv4 address")
	case !h.Is4():
		v.add(at+".lanHost", "%s is not an IPv4 address (NAT is IPv4 only)", h)
	case slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Addr() == h }):
		v.add(at+".lanHost", "%s is the router's own LAN address", h)
	case slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Masked().Addr() == h || lastAddr(p) == h }):
		v.add(at+".lanHost", "%s is the network or broadcast address of the LAN", h)
	case len(lan) > 0 && !slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Contains(h) }):
		subnets := make([]string, len(lan))
		for k, p := range lan {
			subnets[k] = p.Masked().String()
		}
		v.add(at+".lanHost", "%s is not in the LAN (%s)", h, strings.Join(subnets, ", "))
	}
	if len(f.Comment) > maxComment {
		v.add(at+".comment", "longer than %d bytes", maxComment)
	}
}
