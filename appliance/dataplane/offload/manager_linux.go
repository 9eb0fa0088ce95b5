package offload

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// Timing and sizes of the manager.
const (
	// HarvestInterval is how often the manager reads the kernel's flow
	// counters into conntrack, the FDB, the rules and the port counters.
	HarvestInterval = 500 * time.Millisecond
	// MaxTurns is the most harvests that pass between one flow's turns,
	// when its counts go into conntrack, the FDB and the rules and it is
	// judged (turnsFor); the port counters take every harvest.
	MaxTurns = 16
	// Idle is how long a flow may go without a packet before it leaves
	// the kernel (a NAT or IPv6 flow leaves after half its timeout if that
	// is shorter): the maps hold the active flows.
	Idle = 30 * time.Second
	// Reoffer is how long a worker waits before it offers the same flow
	// again (while the first offer is pending or was refused).
	Reoffer = 250 * time.Millisecond
	// queueDepth is the depth of the workers' offer queue; offers beyond
	// it are dropped (the flow is offered again by its next frames).
	queueDepth = 4096
	// offerBatch is how many queued offers the manager takes in one go.
	offerBatch = 256
	// marks is the size of the hash filter of offloaded connections.
	marks = 1 << 16
)

// Port is a data port the program runs on.
type Port struct {
	ID          uint16
	Name, Iface string
	// Ingress: the port has its own tcx ingress program (package
	// ingressdrop), which tcx mode needs behind the fast path's;
	// IngressErr says why it has none.
	Ingress    bool
	IngressErr string
}

// View is what the manager reads of the engine's state while it runs.
// Its methods are called with the manager's lock held: they must not
// call the Manager.
type View interface {
	// Forwards reports whether data port id forwards now (its link up,
	// not blocked by loop protection; not the host port) and its MTU.
	Forwards(id uint16) (mtu int, ok bool)
	// Settings returns the engine's configuration in force.
	Settings() Settings
}

// Settings are the engine's configuration in force as the manager judges
// flows by it: loaded once per harvest.
type Settings interface {
	// Learns reports whether the FDB learns the sources of port id.
	Learns(id uint16) bool
	// IngressVLAN is the VLAN of a frame that arrives on port in with an
	// outer tag tag of VLAN vid (fastpath.Untagged: none); false where
	// the port does not carry it.
	IngressVLAN(in uint16, tag fastpath.Tag, vid uint16) (uint16, bool)
	// Egress is the form a frame of VLAN vid leaves port out in; false
	// where the port does not carry the VLAN.
	Egress(out, vid uint16) (fastpath.Egress, bool)
	// WANLink is the WAN link's 802.1Q VLAN and the tag of its data
	// frames; 0, 0: an untagged WAN.
	WANLink() (vid, tci uint16)
	// WANPPPoE is the WAN link's PPPoE session: on, the WAN is a PPPoE
	// link; sid 0, no session is up; ac the access concentrator's MAC.
	WANPPPoE() (on bool, sid uint16, ac [6]byte)
}

// Options are what a Manager works with: the engine's tables and ports.
type Options struct {
	Mode fastpath.Mode
	// Auto: the config's fastPath is "auto", which runs the fast path
	// where the kernel's BPF JIT is on and, without it, only where the
	// self-test measured it cheaper than the rings (autoOff).
	Auto bool
	// Log gets the self-test's numbers (nil: slog.Default()).
	Log *slog.Logger
	// NATFlows and IPv6Flows size the program's flow maps.
	NATFlows, IPv6Flows int
	// Ports are the data ports the program runs on; NumPorts bounds the
	// ids of all ports.
	Ports    []Port
	NumPorts int
	View     View
	FDB      *bridge.FDB
	Rules    *rules.Set
	// Counter is the manager's own rules handle: it counts the frames of
	// the bridged flows under the verdicts they were installed with.
	Counter *rules.Worker
	NAT     *nat.Router    // NAT mode only
	IPv6    *route6.Router // NAT mode with IPv6 only
	WAN     uint16         // the WAN port's id in NAT mode, 0 in bridge mode
	// Start is the origin of the engine's clock (the FDB's times).
	Start time.Time
}

// Manager is the fast path's flow manager: the loaded program, the flows
// it installed and the counters of what the kernel forwarded. Its methods
// are safe on a nil or Off Manager, which forwards nothing.
type Manager struct {
	o      Options
	prog   *fastpath.Program
	reason string // why the fast path is off ("" while it runs)
	kernel fastpath.KernelReport
	self   *SelfTest // nil before the fast path first loaded
	offers chan offer

	mu      sync.Mutex // the flows and everything below
	closed  bool
	ifindex []int    // by port id; 0 where the program is not attached
	ifaces  []string // the interface it was attached to, by port id
	nat     table[nat.Tuple, natFlow]
	v6      table[route6.Flow, v6Flow]
	pairs   map[fastpath.PairKey]*pair
	micros  map[fastpath.MicroKey]*micro
	// A harvest's judgements of the next hops (most flows share one).
	hops4   map[hop[[4]byte]]bool
	hops6   map[hop[[16]byte]]bool
	gw6     [16]byte // a harvest's route6 gateway, when gw6ok
	gw6ok   bool
	ppp     pppSession // the PPPoE session the program was told of (pppoe_linux.go)
	gen     uint64     // the rule table the bridged flows were judged by
	flagsOK bool       // its forward chain does not match TCP flags
	slots   slotTable

	// mark counts, by connection hash, the NAT and IPv6 flows installed
	// for either direction of a connection: a worker that sees a TCP
	// SYN, FIN or RST of a marked one takes it out of the kernel first.
	mark [marks]atomic.Int32

	c counters
}

// counters are the manager's counters, read by Stats.
type counters struct {
	rx, tx             []portCounter // by port id
	installed, evicted atomic.Uint64
	refused, dropped   atomic.Uint64 // offers refused by the manager, lost on a full queue
	errors             atomic.Uint64
	lastErr            atomic.Pointer[string]
}

type portCounter struct{ packets, bytes atomic.Uint64 }

// Stats are the fast path's state and counters.
type Stats struct {
	// Mode is the hook it runs in ("tcx", "xdp"), or "off".
	Mode string `json:"mode"`
	// Reason says why it is off: turned off in the config, or what the
	// kernel lacks or refused.
	Reason string `json:"reason,omitempty"`
	// Kernel is what the kernel offers (config options, BPF JIT).
	Kernel fastpath.KernelReport `json:"kernel"`
	// SelfTest is what the programs cost per frame on this kernel,
	// measured when the fast path first loaded (absent before).
	SelfTest *SelfTest `json:"selfTest,omitempty"`
	// NATFlows, IPv6Flows (routed IPv6 connection directions), Pairs and
	// Microflows are the flows in the kernel now.
	NATFlows   int `json:"natFlows"`
	IPv6Flows  int `json:"ipv6Flows"`
	Pairs      int `json:"pairs"`
	Microflows int `json:"microflows"`
	// Packets and Bytes the kernel forwarded (also in the ports' counters).
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Installed and Evicted count flows; Refused offers the manager
	// turned down (the flow changed, or it is not one the fast path can
	// forward), Dropped offers lost on a full queue.
	Installed uint64 `json:"installed"`
	Evicted   uint64 `json:"evicted"`
	Refused   uint64 `json:"refused"`
	Dropped   uint64 `json:"dropped"`
	// Punts are the frames the kernel program left to the rings, by
	// reason (fastpath.Punt names).
	Punts     map[string]uint64 `json:"punts,omitempty"`
	Errors    uint64            `json:"errors"`
	LastError string            `json:"lastError,omitempty"`
}

// PortCount is what the kernel forwarded from and to one port.
type PortCount struct {
	RxPackets, RxBytes, TxPackets, TxBytes uint64
}

// Off is a manager without a program: the rings carry every frame, and
// Stats says why (reason).
// The self-test of this process, if any, comes with it.
func Off(reason string) *Manager {
	return &Manager{reason: reason, kernel: fastpath.ReadKernel(), self: lastSelfTest()}
}

// Open loads the program in o.Mode, measures it once per process
// (SelfTest) and attaches it to o.Ports (after the ports, before the
// workers, whose RX rings get its socket filter). With o.Auto it may
// decide the rings are cheaper on this kernel: then the error is the
// reason (autoOff). On error nothing stays loaded.
func Open(o Options) (*Manager, error) {
	prog, err := fastpath.Load(fastpath.Options{Mode: o.Mode, NATFlows: o.NATFlows, IPv6Flows: o.IPv6Flows})
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	kernel := fastpath.ReadKernel()
	self := selfTest(prog.Mode(), kernel, o.Log)
	if o.Auto {
		path := fastpath.PathBridge
		if o.NAT != nil {
			path = fastpath.PathNAT
		}
		if why := autoOff(kernel.JIT, self, path); why != "" {
			return nil, errors.Join(errors.New(why), prog.Close())
		}
	}
	m := &Manager{o: o, prog: prog, kernel: kernel, self: self, offers: make(chan offer, queueDepth),
		ifindex: make([]int, o.NumPorts), ifaces: make([]string, o.NumPorts),
		nat: newTable[nat.Tuple, natFlow](), v6: newTable[route6.Flow, v6Flow](),
		pairs: map[fastpath.PairKey]*pair{}, micros: map[fastpath.MicroKey]*micro{},
		hops4: map[hop[[4]byte]]bool{}, hops6: map[hop[[16]byte]]bool{}}
	for _, p := range o.Ports {
		if err := m.attach(p); err != nil {
			prog.Close()
			return nil, err
		}
	}
	m.c.rx, m.c.tx = make([]portCounter, o.NumPorts), make([]portCounter, o.NumPorts)
	m.slots.init(prog, o.NumPorts)
	if o.IPv6 != nil {
		o.IPv6.OnChange(m.v6Changed)
	}
	return m, nil
}

// attach runs the program on data port p. In tcx mode it needs the
// port's own tcx ingress (ingressdrop), which drops what the fast path
// leaves to the rings once they have it.
func (m *Manager) attach(p Port) error {
	m.ifaces[p.ID] = p.Iface
	if m.prog.Mode() == fastpath.ModeTCX && !p.Ingress {
		return fmt.Errorf("fastpath: port %s has no tcx ingress (%s)", p.Name, p.IngressErr)
	}
	ifi, err := net.InterfaceByName(p.Iface)
	if err != nil {
		return fmt.Errorf("fastpath: port %s: %w", p.Name, err)
	}
	if err := m.prog.Attach(ifi.Index); err != nil {
		return fmt.Errorf("fastpath: port %s: %w", p.Name, err)
	}
	m.ifindex[p.ID] = ifi.Index
	return nil
}

// On reports whether the fast path runs.
func (m *Manager) On() bool { return m != nil && m.prog != nil }

// Kernel is what the kernel offers the fast path.
func (m *Manager) Kernel() fastpath.KernelReport { return m.kernel }

// FilterFD is the socket filter for the RX rings, 0 for none.
func (m *Manager) FilterFD() int {
	if !m.On() {
		return 0
	}
	return max(m.prog.FilterFD(), 0)
}

// Close detaches the program and releases it.
func (m *Manager) Close() error {
	if !m.On() {
		return nil
	}
	if m.o.IPv6 != nil {
		m.o.IPv6.OnChange(nil)
	}
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return m.prog.Close()
}

// Run is the manager's goroutine: it installs offered flows and harvests
// the counters until stop is closed.
func (m *Manager) Run(stop <-chan struct{}) {
	if !m.On() {
		return
	}
	t := time.NewTicker(HarvestInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case o := <-m.offers:
			m.mu.Lock()
			m.install(&o)
			m.installQueued()
			m.mu.Unlock()
		case <-t.C:
			m.mu.Lock()
			m.harvest(false)
			m.o.Counter.Sync() // lets the rules reuse counter slots of removed rules
			m.mu.Unlock()
		}
	}
}

// installQueued installs the offers queued meanwhile, up to offerBatch.
func (m *Manager) installQueued() {
	for range offerBatch {
		select {
		case o := <-m.offers:
			m.install(&o)
		default:
			return
		}
	}
}

// Sync carries what the kernel forwarded into the tables now (conntrack
// counters and deadlines, the FDB, the rules' counters, the port
// counters) and takes out the flows whose connection is gone: the tables
// are up to date when it returns (for the API's listings).
func (m *Manager) Sync() {
	if !m.On() {
		return
	}
	m.mu.Lock()
	m.harvest(true)
	m.mu.Unlock()
}

// SyncCounts brings the port and router counters up to date: the
// harvest's count pass alone (for the engine's Snapshot, which the
// dashboard and the metrics read every second).
func (m *Manager) SyncCounts() {
	if !m.On() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots.high == 0 {
		return
	}
	if err := m.slots.read(); err != nil {
		m.fail(err)
		return
	}
	m.countSlots()
}

// fail counts an error of the manager (a map update the kernel refused).
func (m *Manager) fail(err error) {
	m.c.errors.Add(1)
	s := err.Error()
	m.c.lastErr.Store(&s)
}

// Stats returns the fast path's state and counters, and what the kernel
// forwarded by port id (the counts Packets and Bytes sum).
func (m *Manager) Stats() (Stats, []PortCount) {
	if m == nil {
		return Stats{Mode: "off"}, nil
	}
	st := Stats{Mode: "off", Reason: m.reason, Kernel: m.kernel, SelfTest: m.self}
	if !m.On() {
		return st, nil
	}
	st.Mode = string(m.prog.Mode())
	ports := make([]PortCount, len(m.c.rx))
	for id := range ports {
		p := &ports[id]
		p.RxPackets, p.RxBytes = m.c.rx[id].packets.Load(), m.c.rx[id].bytes.Load()
		p.TxPackets, p.TxBytes = m.c.tx[id].packets.Load(), m.c.tx[id].bytes.Load()
		st.Packets += p.RxPackets
		st.Bytes += p.RxBytes
	}
	m.mu.Lock()
	st.NATFlows, st.IPv6Flows, st.Pairs, st.Microflows = len(m.nat.flows), len(m.v6.flows), len(m.pairs), len(m.micros)
	m.mu.Unlock()
	st.Installed, st.Evicted = m.c.installed.Load(), m.c.evicted.Load()
	st.Refused, st.Dropped = m.c.refused.Load(), m.c.dropped.Load()
	st.Errors = m.c.errors.Load()
	if p := m.c.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	if punts, err := m.prog.Punts(); err == nil {
		st.Punts = map[string]uint64{}
		for i, n := range punts {
			if n > 0 {
				st.Punts[fastpath.Punt(i).String()] = n
			}
		}
	}
	return st, ports
}
