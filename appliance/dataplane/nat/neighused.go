package nat

// NeighbourUsed returns when the router last sent a frame to neighbour ip
// on side (Unix ns, to the second), or 0: never, or the entry is not
// resolved to mac. The DHCP server asks it, through the engine, whether a
// LAN host uses the address it leased.
func (r *Router) NeighbourUsed(side Side, ip [4]byte, mac [6]byte) int64 {
	n, ok := r.neigh.get(side, be32(ip))
	if !ok || !n.resolved || n.mac != mac {
		return 0
	}
	return n.used
}
