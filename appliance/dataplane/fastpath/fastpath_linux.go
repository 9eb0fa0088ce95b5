package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Mode is the hook the fast path runs in.
type Mode string

// The modes.
const (
	ModeTCX Mode = "tcx" // tcx ingress; a socket filter for rings that stay packet taps
	ModeXDP Mode = "xdp" // generic XDP, before the taps
)

// Options size the maps; zero fields take the defaults.
type Options struct {
	Mode Mode
	// NATFlows, IPv6Flows, Pairs and Micro bound the flows of each kind;
	// the stats array has a slot for each.
	NATFlows, IPv6Flows, Pairs, Micro int
}

// Default map sizes.
const (
	DefaultNATFlows  = 65536
	DefaultIPv6Flows = 65536
	DefaultPairs     = 4096
	DefaultMicro     = 32768
)

// Program is the loaded fast path: its programs, maps and attachments.
// Its methods are safe for concurrent use.
type Program struct {
	mode  Mode
	slots int
	ncpu  int         // possible CPUs: the stats array has slots for each
	stats statsMemory // the stats array, mapped
	progs struct {
		Filter *ebpf.Program `ebpf:"fp_filter"`
		TCX    *ebpf.Program `ebpf:"fp_tcx"`
		XDP    *ebpf.Program `ebpf:"fp_xdp"`
	}
	maps fastpathMaps

	mu    sync.Mutex
	links map[int]link.Link // by ifindex
	live  liveFlags         // what the live map holds
}

// liveFlags is the live map's value (struct live in bpf/abi.h): the
// flow maps that have held a flow, which the programs look up.
type liveFlags struct {
	NAT, IPv6 uint32
}

// liveMap names a flow map the programs skip until it has held a flow.
type liveMap int

// The flow maps by how the programs look them up.
const (
	liveAlways liveMap = iota // pairs and microflows: looked up from the start
	liveNAT
	liveIPv6
)

// markLive opens the NAT (or the IPv6) flow map to lookups, before its
// first flow is put: until then the programs skip the map. It stays open.
func (p *Program) markLive(m liveMap) error {
	if m == liveAlways {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.live
	switch m {
	case liveNAT:
		next.NAT = 1
	case liveIPv6:
		next.IPv6 = 1
	}
	if next == p.live {
		return nil
	}
	if err := p.maps.Live.Put(uint32(0), &next); err != nil {
		return fmt.Errorf("fastpath: live map: %w", err)
	}
	p.live = next
	return nil
}

// Load loads the programs of opts.Mode and creates the maps. An error
// means the kernel cannot run the fast path (it says why); the dataplane
// then forwards everything on its rings.
func Load(opts Options) (*Program, error) {
	if opts.Mode == "" {
		opts.Mode = ModeTCX
	}
	if opts.Mode != ModeTCX && opts.Mode != ModeXDP {
		return nil, fmt.Errorf("fastpath: unknown mode %q", opts.Mode)
	}
	spec, err := loadFastpath()
	if err != nil {
		return nil, fmt.Errorf("fastpath: %w", err)
	}
	n := orDefault(opts.NATFlows, DefaultNATFlows)
	pairs := orDefault(opts.Pairs, DefaultPairs)
	micro := orDefault(opts.Micro, DefaultMicro)
	r6 := orDefault(opts.IPv6Flows, DefaultIPv6Flows)
	spec.Maps[fastpathMapNatFlows].MaxEntries = uint32(n)
	spec.Maps[fastpathMapR6Flows].MaxEntries = uint32(r6)
	spec.Maps[fastpathMapBrPairs].MaxEntries = uint32(pairs)
	spec.Maps[fastpathMapBrMicro].MaxEntries = uint32(micro)
	p := &Program{mode: opts.Mode, slots: n + r6 + pairs + micro, links: map[int]link.Link{}}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("fastpath: %w", err)
	}
	p.ncpu = ncpu
	spec.Maps[fastpathMapStats].MaxEntries = uint32(p.slots * ncpu)
	if err := spec.Variables[fastpathVarNslots].Set(uint32(p.slots)); err != nil {
		return nil, fmt.Errorf("fastpath: sizing the stats array: %w", err)
	}
	// Only the mode's programs are loaded (the verifier's time is the
	// biggest part of Load).
	for name := range spec.Programs {
		keep := name == fastpathProgFpXdp
		if opts.Mode == ModeTCX {
			keep = name == fastpathProgFpFilter || name == fastpathProgFpTcx
		}
		if !keep {
			delete(spec.Programs, name)
		}
	}
	if opts.Mode == ModeTCX {
		var o struct {
			fastpathMaps
			Filter *ebpf.Program `ebpf:"fp_filter"`
			TCX    *ebpf.Program `ebpf:"fp_tcx"`
		}
		err = spec.LoadAndAssign(&o, nil)
		p.maps, p.progs.Filter, p.progs.TCX = o.fastpathMaps, o.Filter, o.TCX
	} else {
		var o struct {
			fastpathMaps
			XDP *ebpf.Program `ebpf:"fp_xdp"`
		}
		err = spec.LoadAndAssign(&o, nil)
		p.maps, p.progs.XDP = o.fastpathMaps, o.XDP
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("fastpath: the kernel's verifier refused the %s program: %w", opts.Mode, ve)
		}
		return nil, fmt.Errorf("fastpath: loading the %s program: %w", opts.Mode, err)
	}
	if err := p.mapStats(); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// Mode returns the hook the program runs in.
func (p *Program) Mode() Mode { return p.mode }

// Slots is the size of the stats array: valid slots are 0..Slots()-1.
func (p *Program) Slots() int { return p.slots }

// FilterFD is the socket filter's descriptor in ModeTCX, for every RX ring
// socket (SO_ATTACH_BPF); -1 in ModeXDP, which needs none.
func (p *Program) FilterFD() int {
	if p.progs.Filter == nil {
		return -1
	}
	return p.progs.Filter.FD()
}

// Attach runs the fast path on the port with this interface index: a tcx
// ingress link at the head of the port's tcx programs, or a generic XDP
// link. The link holds the attachment only while it is open, so a crashed
// process leaves the port to the kernel's usual path.
func (p *Program) Attach(ifindex int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.links[ifindex]; ok {
		return nil
	}
	var l link.Link
	var err error
	switch p.mode {
	case ModeTCX:
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p.progs.TCX, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
	case ModeXDP:
		l, err = link.AttachXDP(link.XDPOptions{Interface: ifindex, Program: p.progs.XDP, Flags: link.XDPGenericMode})
	}
	if err != nil {
		return fmt.Errorf("fastpath: attaching the %s program to interface %d: %w", p.mode, ifindex, err)
	}
	p.links[ifindex] = l
	return nil
}

// Detach removes the fast path from the port with this interface index.
func (p *Program) Detach(ifindex int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.links[ifindex]
	if !ok {
		return nil
	}
	delete(p.links, ifindex)
	if err := l.Close(); err != nil {
		return fmt.Errorf("fastpath: detaching from interface %d: %w", ifindex, err)
	}
	return nil
}

// Close detaches every port and releases the programs and maps.
func (p *Program) Close() error {
	p.mu.Lock()
	var errs []error
	for ifi, l := range p.links {
		errs = append(errs, l.Close())
		delete(p.links, ifi)
	}
	p.mu.Unlock()
	for _, prog := range []*ebpf.Program{p.progs.Filter, p.progs.TCX, p.progs.XDP} {
		if prog != nil {
			errs = append(errs, prog.Close())
		}
	}
	errs = append(errs, p.stats.unmap(), p.maps.Close())
	return errors.Join(errs...)
}

// ne16 and ne32 turn a number into the value whose in-memory bytes are
// its network byte order (what a __be16/__be32 field of the maps holds).
func ne16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

func ne32(a [4]byte) uint32 { return binary.NativeEndian.Uint32(a[:]) }
