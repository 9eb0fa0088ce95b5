package dashboard

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/webui"
)

// Neighbours lists the router's ARP cache, then the IPv6 router's
// neighbour cache.
func (v *Box) Neighbours() ([]webui.Neighbour, error) {
	e, err := v.Plane.Engine()
	if err != nil {
		return nil, err
	}
	ns, err := dataplane.Neighbours(e.NAT())
	if err != nil {
		return nil, err
	}
	out := make([]webui.Neighbour, len(ns))
	for i, n := range ns {
		out[i] = webui.Neighbour{Side: n.Side, IP: n.IP, MAC: n.MAC, Resolved: n.Resolved, Confirmed: n.Confirmed}
	}
	return append(out, v6Neighbours(e.IPv6(), portNames(e), time.Now())...), nil
}

// v6Neighbours lists the IPv6 neighbour cache with the sides' port names.
func v6Neighbours(r6 *route6.Router, names map[uint16]string, now time.Time) []webui.Neighbour {
	if r6 == nil {
		return nil
	}
	cfg := r6.Config()
	port := [2]string{names[uint16(cfg.LAN.ID)], names[uint16(cfg.WAN.ID)]}
	ns := r6.Neighbours(now.UnixNano())
	out := make([]webui.Neighbour, 0, len(ns))
	for _, n := range ns {
		w := webui.Neighbour{Side: n.Side.String(), Port: port[n.Side&1], IP: netip.AddrFrom16(n.Addr), Resolved: n.State != route6.NeighIncomplete,
			State: n.State}
		if w.Resolved {
			w.MAC = net.HardwareAddr(n.MAC[:]).String()
			w.Confirmed = time.Unix(int64(n.Confirmed), 0).UTC()
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b webui.Neighbour) int {
		if c := strings.Compare(a.Side, b.Side); c != 0 {
			return c
		}
		return a.IP.Compare(b.IP)
	})
	return out
}

// portNames maps the engine's port ids to their names.
func portNames(e *dataplane.Engine) map[uint16]string {
	names := map[uint16]string{}
	for name, id := range e.Config().PortNames() {
		names[id] = name
	}
	return names
}
