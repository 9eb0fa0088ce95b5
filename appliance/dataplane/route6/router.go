package route6

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/routing"
)

// Router is the IPv6 router shared by the workers: the configuration,
// the connection table and the neighbour cache.
type Router struct {
	cfg      cfgPtr
	ct       *conntrack
	neigh    *neighbours
	lim      Limits
	gw       atomic.Pointer[gateway] // learnt from the WAN's RAs
	mu       sync.Mutex              // guards conf and workers
	conf     Config
	workers  []*Worker
	sweepPos atomic.Uint64
	off      offloadState // the fast path's (offload.go)
	wan      *wanTable    // the WAN addresses (wanaddr.go); lock order r.mu, then wan.mu
	seed     uint64       // keys the workers' hashes of WAN sources
}

// gateway is a default router learnt from an RA, until a time.
type gateway struct {
	addr  [16]byte
	until uint32
}

// New checks cfg, allocates the tables and returns the router.
func New(cfg Config, lim Limits) (*Router, error) {
	if lim.MaxConns == 0 {
		lim.MaxConns = 65536
	}
	if lim.Neighbours == 0 {
		lim.Neighbours = 1024
	}
	if lim.Pending == 0 {
		lim.Pending = 64
	}
	if lim.MaxFrame == 0 {
		lim.MaxFrame = 9216 + 18
	}
	if lim.MaxConns < 0 || lim.Neighbours < 0 || lim.Pending < 0 || lim.MaxFrame < 1280+18 {
		return nil, fmt.Errorf("route6: limits %+v out of range", lim)
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	r := &Router{ct: newConntrack(lim.MaxConns), neigh: newNeighbours(lim.Neighbours), lim: lim, wan: &wanTable{},
		seed: binary.LittleEndian.Uint64(seed[:])}
	if err := r.SetConfig(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// SetConfig replaces the configuration; connections, neighbours and the
// WAN addresses of SetWANAddressing stay (a new WAN link-local address is
// probed by DAD, but used at once).
func (r *Router) SetConfig(cfg Config) error {
	s, err := cfg.check()
	if err != nil {
		return fmt.Errorf("route6: %w", err)
	}
	r.mu.Lock()
	r.conf = cfg
	r.wan.mu.Lock()
	r.wan.linkLocal(s.side[WAN].Addrs[0].As16())
	r.storeLocked(s)
	r.wan.mu.Unlock()
	r.mu.Unlock()
	r.changed()
	return nil
}

// Config returns the configuration in force.
func (r *Router) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conf
}

// SetPrefixes changes what a delegation decides, keeping the ports: the
// LAN's prefixes, the delegated ones, and the box's global addresses on
// the LAN (after its link-local ones, which stay). The WAN's come from
// SetWANAddressing. On a point-to-point WAN (a PPPoE session) a
// renumbering (a new delegation that no longer holds a prefix of the old
// one: a new session's) flushes the connections of LAN addresses in the
// prefixes it took away, whose replies the new session does not bring;
// on another WAN they stay while their /64 is deprecated (the ISP may
// route the old prefix until its lifetime ends).
func (r *Router) SetPrefixes(lan, delegated []netip.Prefix, lanAddrs []netip.Addr) error {
	cfg := r.Config()
	var gone []netip.Prefix
	if cfg.WANPointToPoint && len(delegated) > 0 {
		for _, p := range cfg.Delegated {
			if !slices.Contains(delegated, p) {
				gone = append(gone, p.Masked())
			}
		}
	}
	cfg.LANPrefixes, cfg.Delegated = lan, delegated
	var a []netip.Addr
	for _, x := range cfg.LAN.Addrs {
		if x.IsLinkLocalUnicast() {
			a = append(a, x)
		}
	}
	cfg.LAN.Addrs = append(a, lanAddrs...)
	if err := r.SetConfig(cfg); err != nil {
		return err
	}
	if r.ct.flushLAN(gone) > 0 {
		r.changed() // the fast path's flows of them go too
	}
	return nil
}

// Gateway is the WAN next hop in use (configured or learnt), if any.
func (r *Router) Gateway(now int64) (netip.Addr, bool) {
	a, ok := r.gateway(r.cfg.Load(), uint32(now/1e9))
	return netip.AddrFrom16(a), ok
}

func (r *Router) gateway(s *snapshot, now uint32) ([16]byte, bool) {
	if s.gateway != ([16]byte{}) {
		return s.gateway, true
	}
	if s.ptp { // the link is down (or not up yet): no route
		return [16]byte{}, false
	}
	if g := r.gw.Load(); g != nil && now < g.until {
		return g.addr, true
	}
	return [16]byte{}, false
}

// Stats sums the workers' counters.
func (r *Router) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s Stats
	for _, w := range r.workers {
		w.c.add(&s)
	}
	s.Actions[routing.Forward] += r.off.forwarded.Load()
	s.DADFailures = r.wan.dadFail.Load()
	return s
}

// Conns lists up to max live connections at now (Unix nanoseconds).
func (r *Router) Conns(max int, now int64) []Conn { return r.ct.list(nil, max, uint32(now/1e9)) }

// EachConn calls fn with every live connection at now (Unix
// nanoseconds) until fn returns false. It walks the table a bucket at a
// time, copying a bucket's few entries under its lock and calling fn
// without it, so a slow fn (a web page being built) never holds up a
// worker; a connection opened or closed during the walk may be missed.
// c is valid only during the call.
func (r *Router) EachConn(now int64, fn func(c *Conn) bool) { r.ct.each(uint32(now/1e9), fn) }

// ConnCount is the number of live connections at now.
func (r *Router) ConnCount(now int64) int { return r.ct.count(uint32(now / 1e9)) }

// Neighbours lists the neighbour cache at now.
func (r *Router) Neighbours(now int64) []Neighbour { return r.neigh.list(nil, uint32(now/1e9)) }
