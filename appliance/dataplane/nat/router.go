package nat

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// DefaultMaxConns is the connection table's capacity when Config.MaxConns
// is 0.
const DefaultMaxConns = 65536

// Router is the NAT router shared by the workers: the configuration
// snapshot, the connection table, the NAT mappings and the ARP cache.
type Router struct {
	cfg   atomic.Pointer[snapshot]
	ct    *table
	maps  *mappings
	neigh *neighTable

	icmpLimit, arpLimit *rules.Limiter
	neighLimit          *rules.Limiter // new neighbour entries from unsolicited ARP
	maxFrame            int
	pendFrames          int
	outFrames           int
	fragEntries         int
	fast                fastCounters // frames the fast path forwarded (offload.go)

	mu      sync.Mutex // serializes Update and guards conf, workers
	conf    Config
	workers []*Worker
}

// New returns a Router for cfg (zero fields take their defaults).
func New(cfg Config) (*Router, error) {
	cfg = withDefaults(cfg)
	s, err := compile(&cfg)
	if err != nil {
		return nil, err
	}
	maps := newMappings(cfg.MaxConns, cfg.Seed)
	r := &Router{
		ct:          newTable(cfg.MaxConns, cfg.Seed, maps),
		maps:        maps,
		neigh:       newNeighTable(cfg.MaxNeighbours, cfg.Seed^0x5bd1e995, uint32(cfg.NeighProbes+1)),
		icmpLimit:   rules.NewLimiter(float64(cfg.ICMPRate), max(cfg.ICMPRate/20, 10)),
		arpLimit:    rules.NewLimiter(float64(cfg.ARPRate), max(cfg.ARPRate/5, 10)),
		neighLimit:  rules.NewLimiter(float64(cfg.ARPRate), max(cfg.ARPRate/5, 10)),
		maxFrame:    frame.EthernetHeaderLen + 9000,
		pendFrames:  cfg.PendingFrames,
		outFrames:   cfg.OutboxFrames,
		fragEntries: cfg.FragEntries,
		conf:        cfg,
	}
	r.cfg.Store(s)
	return r, nil
}

// Update applies a new configuration without stopping the workers or
// dropping connections. The table sizes (MaxConns, MaxNeighbours, queue
// sizes), the port ids and the seed cannot change. When the WAN address
// changes, the connections through the old one are deleted.
func (r *Router) Update(cfg Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.conf
	if cfg.Seed == 0 {
		cfg.Seed = old.Seed
	}
	cfg = withDefaults(cfg)
	if cfg.MaxConns != old.MaxConns || cfg.MaxNeighbours != old.MaxNeighbours ||
		cfg.PendingFrames != old.PendingFrames || cfg.OutboxFrames != old.OutboxFrames ||
		cfg.FragEntries != old.FragEntries || cfg.Seed != old.Seed ||
		cfg.LAN.ID != old.LAN.ID || cfg.WAN.ID != old.WAN.ID || cfg.Host != old.Host || cfg.IPv6 != old.IPv6 {
		return fmt.Errorf("nat update: table sizes, port ids and seed need a new router")
	}
	s, err := compile(&cfg)
	if err != nil {
		return fmt.Errorf("nat update: %w", err)
	}
	prev := r.cfg.Load()
	r.cfg.Store(s)
	r.conf = cfg
	for _, side := range []Side{LAN, WAN} {
		if a := prev.side[side].addr; a != 0 && a != s.side[side].addr {
			r.flushAddr(a)
		}
	}
	return nil
}

// SetWAN sets the WAN address and gateway, e.g. from a DHCP client (the
// hook for one: DHCP replies reach the host port as ToHost frames). An
// invalid addr unconfigures the WAN.
func (r *Router) SetWAN(addr netip.Prefix, gateway netip.Addr) error {
	r.mu.Lock()
	cfg := r.conf
	r.mu.Unlock()
	cfg.WAN.Addr = addr
	cfg.Gateway = gateway
	return r.Update(cfg)
}

// Config returns the configuration in force, defaults filled in.
func (r *Router) Config() Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conf
	c.Forwards = append([]PortForward(nil), c.Forwards...)
	return c
}

// flushAddr deletes the connections one of whose keys has address a.
func (r *Router) flushAddr(a uint32) {
	t := r.ct
	for i := range t.entries {
		g := t.cold[i].gen.Load()
		if g&1 == 0 {
			continue
		}
		var k [2]key
		if !r.readKeys(uint32(i), g, &k) {
			continue
		}
		if k[0].src() == a || k[0].dst() == a || k[1].src() == a || k[1].dst() == a {
			t.remove(uint32(i), g, rmAny, 0)
		}
	}
}

// readKeys copies the keys of entry idx if it is still incarnation gen.
func (r *Router) readKeys(idx, gen uint32, k *[2]key) bool {
	t := r.ct
	c := &t.cold[idx]
	sw := c.stripes.Load()
	if c.gen.Load() != gen {
		return false
	}
	s := &t.stripes[sw>>16]
	s.mu.Lock()
	ok := c.gen.Load() == gen && c.stripes.Load() == sw
	if ok {
		*k = t.entries[idx].keys
	}
	s.mu.Unlock()
	return ok
}

// NewWorker returns a worker for one dataplane worker goroutine. rw is
// its handle on the rule set (nil accepts everything). A Worker is not
// safe for concurrent use; different Workers of a Router are.
func (r *Router) NewWorker(rw *rules.Worker) *Worker {
	nbuf := r.pendFrames + r.outFrames
	w := &Worker{
		r:       r,
		rw:      rw,
		scratch: make([]byte, r.maxFrame),
		bufs:    make([][]byte, nbuf),
		freeBuf: make([]int32, 0, nbuf),
		pend:    make([]pendFrame, 0, r.pendFrames),
		out:     make([]outFrame, 0, r.outFrames),
		done:    make([]int32, 0, nbuf),
		frags:   make([]fragEntry, r.fragEntries),
		probes:  make([]uint64, 0, routing.MaxProbes),
	}
	w.attachIPv6(rw)
	backing := make([]byte, nbuf*r.maxFrame)
	for i := range w.bufs {
		w.bufs[i] = backing[i*r.maxFrame : (i+1)*r.maxFrame : (i+1)*r.maxFrame]
		w.freeBuf = append(w.freeBuf, int32(i))
	}
	r.mu.Lock()
	r.workers = append(r.workers, w)
	r.mu.Unlock()
	return w
}

// Neighbours returns the ARP cache entries.
func (r *Router) Neighbours() []Neighbour { return r.neigh.list(nil) }
