package dataplane

import (
	"net/netip"
	"sync"
	"time"

	"e1kbox/appliance/dataplane/nat"
)

// What the engine saw of the LAN's hosts, for the LAN DHCP server (the
// supervisor wires these into it): the port a MAC is on, and when a
// host's address last carried traffic through the router.

// lanWalkEvery is how often LANActivity walks the connection table at
// most: a walk reads every slot (docs/dataplane.md, NAT mode).
const lanWalkEvery = 5 * time.Second

// lanConns are the addresses of the router's connections at the last
// walk, each with its newest connection's creation (Unix seconds).
type lanConns struct {
	mu      sync.Mutex
	walked  time.Time
	created map[netip.Addr]int64
}

// LANPort names the port where the FDB last saw mac: "" when it has no
// live entry for it, or the entry is the WAN's or the host port's.
func (e *Engine) LANPort(mac [6]byte) string {
	p, ok := e.fdb.Lookup(&mac, 0, e.Now())
	if !ok || p == 0 || p == e.wanID() {
		return ""
	}
	ports := e.topo.Load().ports
	if int(p) >= len(ports) || ports[p] == nil || ports[p].host {
		return ""
	}
	return ports[p].name
}

// LANActivity returns when the router last carried traffic of the LAN
// host ip at mac, zero for never (and in bridge mode): the last frame it
// sent to the host (the neighbour entry's, when it is resolved to mac) or
// the creation of the newest connection with ip as a LAN side's address,
// from a walk of the connection table at most every lanWalkEvery.
func (e *Engine) LANActivity(ip netip.Addr, mac [6]byte) time.Time {
	r := e.natr
	if r == nil || !ip.Is4() {
		return time.Time{}
	}
	var last time.Time
	if ns := r.NeighbourUsed(nat.LAN, ip.As4(), mac); ns != 0 {
		last = time.Unix(0, ns)
	}
	if c := e.lan.lookup(r, ip); c != 0 && time.Unix(c, 0).After(last) {
		last = time.Unix(c, 0)
	}
	return last
}

// lookup returns the newest connection's creation of address a (Unix s,
// 0 for none), walking the table first when the last walk is older than
// lanWalkEvery.
func (l *lanConns) lookup(r *nat.Router, a netip.Addr) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.walked) >= lanWalkEvery || now.Before(l.walked) {
		l.walked = now
		l.created = map[netip.Addr]int64{}
		buf := make([]nat.Conn, 0, connChunk)
		for cursor := 0; ; {
			buf, cursor = r.Conns(nat.Filter{}, cursor, connChunk, now.UnixNano(), buf[:0])
			for i := range buf {
				c := &buf[i]
				if c.ExpiresIn <= 0 {
					continue
				}
				// The LAN host is the original source (masquerade,
				// hairpin) or the reply's (a port forward's target).
				for _, h := range []netip.Addr{c.OrigSrc.Addr(), c.ReplySrc.Addr()} {
					if c.Created > l.created[h] {
						l.created[h] = c.Created
					}
				}
			}
			if cursor == 0 {
				break
			}
		}
	}
	return l.created[a]
}
