package dataplane

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/hostport"
	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/dataplane/nat"
)

// builder opens what the engine runs: the ports' links (up, MTU, kernel
// drop), the host port, the router, and the workers with their RX rings
// and TX sockets, wired to the engine's tables. New and port restarts use
// it; the caller holds the engine's lock.
type builder struct {
	log     *slog.Logger
	nl      *netlink.Handle
	t       *tables
	cur     *atomic.Pointer[settings]
	deps    *workerDeps
	handles *handlePool
	nextID  int // the next worker's id
}

// openPorts prepares every data port's link and opens the host port; it
// returns the ports by id ([0] nil, the host port last).
func (b *builder) openPorts(cfg *Config) ([]*portInfo, error) {
	ports := make([]*portInfo, len(cfg.Ports)+1, len(cfg.Ports)+2)
	for i := range cfg.Ports {
		p := &cfg.Ports[i]
		mtu, err := b.prepareLink(p)
		if err != nil {
			return ports, err
		}
		ports[i+1] = &portInfo{id: uint16(i + 1), name: p.portName(), iface: p.Interface, mtu: mtu}
		b.attachDrop(ports[i+1], cfg.dropVLAN(i))
	}
	h := cfg.HostPort
	if h == nil {
		return ports, nil
	}
	hc := hostport.Config{Name: h.Interface, MTU: h.MTU, Addrs: h.Addresses}
	if h.MAC != ([6]byte{}) {
		hc.MAC = net.HardwareAddr(h.MAC[:])
	}
	lanMAC, err := b.boxStack(cfg, &hc)
	if err != nil {
		return ports, err
	}
	host, err := hostport.Open(hc)
	if err != nil {
		return ports, fmt.Errorf("dataplane: host port: %w", err)
	}
	b.t.host = host
	copy(b.t.hostMAC[:], host.MAC())
	if lanMAC != nil {
		if err := b.routeBoxStack(host.Ifindex(), lanMAC, hc.Addrs); err != nil {
			return ports, err
		}
	}
	return append(ports, &portInfo{id: uint16(len(ports)), name: h.portName(), iface: host.Name(), host: true, mtu: host.MTU()}), nil
}

// attachDrop keeps the kernel's network stack off data port pi's received
// frames once the rings have it (ingressdrop): the data ports carry no
// kernel address, and in NAT mode the kernel would otherwise route every
// frame to the router's MAC only to drop it. Without it (no tcx in the
// kernel) forwarding works the same, at that cost, but the WAN clients
// get no replies over a WAN VLAN. wanVLAN is the WAN's VLAN on the NAT
// WAN port (Config.dropVLAN), whose replies it hands them.
func (b *builder) attachDrop(pi *portInfo, wanVLAN uint16) {
	d, err := ingressdrop.Attach(pi.iface, wanVLAN)
	if err != nil {
		pi.kdropErr = err.Error()
		b.log.Warn("dataplane: the kernel keeps processing this port's frames", "port", pi.name, "err", err)
		return
	}
	pi.kdrop = d
}

// dropVLAN is the WAN VLAN port i's kernel drop hands the WAN clients
// the replies of (ingressdrop.Attach): NAT.WANVLAN's on the WAN port in
// NAT mode, else 0 (untagged).
func (c *Config) dropVLAN(i int) uint16 {
	if modeOf(c) != ModeNAT || c.NAT == nil || c.Ports[i].Role != RoleWAN {
		return 0
	}
	return c.NAT.WANVLAN.ID
}

// retagDrop moves the WAN port's kernel drop to cfg's WAN VLAN when it
// changed (ingressdrop.Drop.SetWANVLAN): the WAN clients follow it.
func (e *Engine) retagDrop(cfg *Config) {
	if e.natr == nil {
		return
	}
	i := e.natp.wanID - 1
	pi := e.ports[i+1]
	if vid := cfg.dropVLAN(i); pi.kdrop != nil && pi.kdrop.WANVLAN != vid {
		if err := pi.kdrop.SetWANVLAN(vid); err != nil {
			e.b.log.Warn("dataplane: the WAN clients keep the WAN's former VLAN", "port", pi.name, "err", err)
		}
	}
}

// bindAfterTCX moves the data ports' rings behind tcx ingress, where the
// fast path runs: each port's kernel drop becomes a demote
// (ingressdrop.AttachDemote) and its workers bind their rings to IPv4,
// IPv6, ARP and the demote's marker, which carries every other frame
// (portBindings). The packets the fast path forwards then never reach a
// packet socket, so the rings need no socket filter (docs/dataplane.md,
// Hooks). A port where the demote does not attach keeps its tap and drop.
func (b *builder) bindAfterTCX(cfg *Config, ports []*portInfo) {
	for i := range cfg.Ports {
		pi := ports[i+1]
		if pi.kdrop == nil || pi.kdrop.Demote {
			continue
		}
		d, err := ingressdrop.AttachDemote(pi.iface, pi.kdrop.WANVLAN)
		if err != nil {
			b.log.Warn("dataplane: the port's rings stay packet taps", "port", pi.name, "err", err)
			continue
		}
		// The demote runs after the drop, which would starve the rings.
		if err := pi.kdrop.Close(); err != nil {
			b.log.Warn("dataplane: closing the kernel drop", "port", pi.name, "err", err)
		}
		pi.kdrop = d
	}
}

// smallRing is the frame count of the rings of the rare frames (ARP; on
// a routed-only port the marked ones: loop probes, other EtherTypes,
// tagged frames) of a port bound after tcx: the kernel's minimum of two
// 128 KiB blocks at MTU 1500.
const smallRing = 128

// portBindings are the EtherTypes the rings of a port bound after tcx
// take (afpacket.Config.Bind): IPv4 and IPv6 on rings of the configured
// size, ARP on a small one, and the demote's marker (every other frame,
// VLAN-tagged ones included) on a ring of the configured size where the
// port bridges, a small one where it only routes (Config.routedOnly: the
// router drops those frames).
func portBindings(routed bool) []afpacket.Binding {
	marked := afpacket.Binding{EtherType: ingressdrop.MarkerTPID}
	if routed {
		marked.Frames = smallRing
	}
	return []afpacket.Binding{{EtherType: frame.EtherTypeIPv4}, {EtherType: frame.EtherTypeIPv6},
		{EtherType: frame.EtherTypeARP, Frames: smallRing}, marked}
}

// prepareLink sets port p's interface up and to the port's MTU (the
// kernel's TX length check follows the interface MTU) and returns the MTU
// in force.
func (b *builder) prepareLink(p *Port) (int, error) {
	link, err := b.nl.LinkByName(p.Interface)
	if err != nil {
		return 0, fmt.Errorf("dataplane: port %s: interface %s: %w", p.portName(), p.Interface, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := b.nl.LinkSetUp(link); err != nil {
			return 0, fmt.Errorf("dataplane: port %s: set %s up: %w", p.portName(), p.Interface, err)
		}
	}
	mtu := p.MTU
	if mtu == 0 {
		mtu = link.Attrs().MTU
	} else if mtu != link.Attrs().MTU {
		if err := b.nl.LinkSetMTU(link, mtu); err != nil {
			return 0, fmt.Errorf("dataplane: port %s: set %s MTU %d: %w", p.portName(), p.Interface, mtu, err)
		}
	}
	return mtu, nil
}

// openNAT creates the router: its WAN port is the RoleWAN port, its LAN
// side the LAN segment, named by the first LAN port's id. The MACs default
// to the interfaces'; the LAN MTU is the smallest of the segment's ports.
func (b *builder) openNAT(cfg *Config, ports []*portInfo) error {
	p := natPorts{lanMTU: maxNATMTU}
	for i := range cfg.Ports {
		pi := ports[i+1]
		link, err := b.nl.LinkByName(pi.iface)
		if err != nil {
			return fmt.Errorf("dataplane: port %s: interface %s: %w", pi.name, pi.iface, err)
		}
		var mac [6]byte
		copy(mac[:], link.Attrs().HardwareAddr)
		switch cfg.Ports[i].Role {
		case RoleWAN:
			p.wanID, p.wanMAC, p.wanMTU = int(pi.id), mac, pi.mtu
		case RoleLAN:
			if p.lanID == 0 {
				p.lanID, p.lanMAC = int(pi.id), mac
			}
			p.lanMTU = min(p.lanMTU, pi.mtu)
		}
	}
	if b.t.host != nil {
		p.hostID = len(ports) - 1
		p.lanMTU = min(p.lanMTU, ports[len(ports)-1].mtu)
	}
	if m := cfg.NAT.LANMAC; m != ([6]byte{}) {
		p.lanMAC = m
	}
	if m := cfg.NAT.WANMAC; m != ([6]byte{}) {
		p.wanMAC = m
	}
	if cfg.NAT.IPv6 {
		v6, err := newRoute6(p, cfg.NAT)
		if err != nil {
			return fmt.Errorf("dataplane: %w", err)
		}
		p.v6 = v6
	}
	r, err := nat.New(cfg.natConfig(p))
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	b.t.natr, b.t.natp = r, p
	return nil
}

// openWorkers opens each data port's workers and the host port's worker.
// It returns what it opened, also on error (the caller closes it).
func (b *builder) openWorkers(cfg *Config, ports []*portInfo) ([]*worker, error) {
	var all []*worker
	for i := range cfg.Ports {
		ws, err := b.openPort(cfg, ports, i, nil)
		all = append(all, ws...)
		if err != nil {
			return all, err
		}
	}
	if b.t.host == nil {
		return all, nil
	}
	h, ok := b.handles.get()
	if !ok {
		return all, fmt.Errorf("dataplane: no rules handle for the host port's worker")
	}
	w := b.newWorker(ports, ports[len(ports)-1], nil, h, nil)
	all = append(all, w)
	if err := b.openTX(cfg, w, ports); err != nil {
		return all, err
	}
	w.buf = make([]byte, 65536+64)
	return all, nil
}

// openPort opens the workers of cfg.Ports[i] (port id i+1 in ports): an
// RX ring each (a fanout group when there are several) and their TX
// sockets. reuse are the stopped workers of the port's previous
// incarnation: the new ones take over their rules and NAT handles and
// their counters. It returns what it opened, also on error.
func (b *builder) openPort(cfg *Config, ports []*portInfo, i int, reuse []*worker) ([]*worker, error) {
	p := &cfg.Ports[i]
	in := ports[i+1]
	n := max(p.Workers, 1)
	cpu, pinned := cfg.CPU.WorkerCPU(p.Interface)
	var fanout *afpacket.Fanout
	if n > 1 {
		// The previous incarnation's group is gone: its sockets are closed.
		fanout = &afpacket.Fanout{ID: uint16(os.Getpid()*MaxPorts + i), Mode: afpacket.FanoutHash}
	}
	var ws []*worker
	for m := range n {
		var prev *worker
		if m < len(reuse) {
			prev = reuse[m]
		}
		h := 0
		if prev != nil {
			h = prev.rulesID
		} else if free, ok := b.handles.get(); ok {
			h = free
		} else {
			return ws, fmt.Errorf("%w: port %s: no free worker handle for %d workers", ErrRestartRequired, in.name, n)
		}
		rc := rxConfig(cfg.Ring, in.mtu, fanout)
		if in.afterTCX() {
			rc.Bind = portBindings(cfg.routedOnly(i))
		} else {
			rc.SocketFilter = b.t.fp.FilterFD()
		}
		rx, err := afpacket.Open(p.Interface, rc)
		if err != nil {
			if prev == nil {
				b.handles.put(h)
			}
			return ws, fmt.Errorf("dataplane: port %s: %w", in.name, err)
		}
		w := b.newWorker(ports, in, rx, h, prev)
		w.fwd.prober = m == 0
		w.fwd.marked = in.afterTCX()
		ws = append(ws, w)
		if err := b.openTX(cfg, w, ports); err != nil {
			return ws, err
		}
		if pinned {
			w.cpu = memberCPU(cfg.CPU.CPUs, cpu, m)
		}
	}
	// The counters of the previous incarnation's extra workers fold into
	// the first new one: the port's totals keep growing.
	for _, old := range reuse[min(n, len(reuse)):] {
		ws[0].fwd.c.add(&old.fwd.c)
		b.handles.put(old.rulesID)
	}
	return ws, nil
}

// rxConfig is the RX ring of a port with MTU mtu.
func rxConfig(rc Ring, mtu int, fanout *afpacket.Fanout) afpacket.Config {
	ac := afpacket.Config{MTU: mtu, BlockSize: rc.BlockSize, BlockCount: rc.BlockCount,
		BlockTimeout: rc.BlockTimeout, TxFrames: DefaultReplyFrames, Fanout: fanout}
	if rc.Kind == RingFrames || rc.Kind == "" && DefaultRingKind == RingFrames && rc.BlockSize == 0 && rc.BlockCount == 0 {
		ac.FrameRing, ac.RxFrames = true, orDefault(rc.Frames, DefaultRxFrames)
		ac.BlockSize, ac.BlockCount, ac.BlockTimeout = 0, 0, 0
		return ac
	}
	if ac.BlockSize == 0 && ac.BlockCount == 0 {
		ac.BlockSize, ac.BlockCount = DefaultRxBlockSize, DefaultRxBlocks
	}
	return ac
}

// newWorker makes the worker of port in on ring rx (nil: the host port)
// with rules handle h. prev, when set, is the stopped worker it replaces:
// it inherits its counters and its NAT worker.
func (b *builder) newWorker(ports []*portInfo, in *portInfo, rx *afpacket.Socket, h int, prev *worker) *worker {
	w := &worker{id: b.nextID, rulesID: h, deps: b.deps, port: in, rx: rx, cpu: -1, shared: newSharedCounters(len(ports)),
		quit: make(chan struct{}), done: make(chan struct{})}
	b.nextID++
	tx := make([]txPort, len(ports))
	rw := b.t.rules.Worker(h)
	w.fwd = newFwd(in, ports, tx, b.t.fdb, rw, b.cur)
	w.fwd.loop = b.deps.loop
	w.fwd.fp = b.t.fp.NewWorker()
	if prev != nil {
		w.shared = prev.shared
		w.fwd.c.add(&prev.fwd.c)
	}
	if r := b.t.natr; r != nil {
		var nw *nat.Worker
		if prev != nil {
			nw = prev.fwd.nw
		} else {
			nw = r.NewWorker(rw)
		}
		w.fwd.setNAT(nw, uint16(b.t.natp.wanID), b.t.natp.lanID, b.t.natp.lanMAC, uint16(b.t.natp.hostID))
		if in.id == uint16(b.t.natp.wanID) {
			w.fwd.ppp = b.t.ppp
		}
	}
	return w
}

// openTX opens w's TX paths: its own ring for replies on its ingress
// port, a TX-only socket to each other data port, a stage into the host
// port.
func (b *builder) openTX(cfg *Config, w *worker, ports []*portInfo) error {
	txs := make([]*afpacket.Socket, len(ports))
	w.txs.Store(&txs)
	for _, out := range ports[1:] {
		switch {
		case out.host:
			w.stage = newHostStage(b.t.host.Write, out.mtu+frame.EthernetHeaderLen+2*frame.VLANTagLen)
			w.fwd.tx[out.id] = w.stage
		case out == w.port:
			if w.rx != nil {
				w.fwd.tx[out.id] = w.rx // its own TX ring answers rejects
				txs[out.id] = w.rx
			}
		default:
			s, err := b.openTXTo(cfg, out)
			if err != nil {
				return fmt.Errorf("dataplane: worker %d (%s): TX to %s: %w", w.id, w.port.name, out.name, err)
			}
			txs[out.id] = s
			w.fwd.tx[out.id] = s
		}
	}
	return nil
}

func (b *builder) openTXTo(cfg *Config, out *portInfo) (*afpacket.Socket, error) {
	txFrames := cfg.Ring.TxFrames
	if txFrames == 0 {
		txFrames = DefaultTxFrames
	}
	return afpacket.Open(out.iface, afpacket.Config{NoRX: true, MTU: out.mtu, TxFrames: txFrames, TxCopy: b.txCopy(out.iface)})
}

// txCopy reports whether frames to iface are better copied than sent from
// a mapped TX ring (see afpacket.Config.TxCopy): on veth, whose peer copies
// zero-copy frames again; a NIC takes the ring's pages as they are.
func (b *builder) txCopy(iface string) bool {
	link, err := b.nl.LinkByName(iface)
	return err == nil && link.Type() == "veth"
}

// memberCPU spreads the fanout members of a port over the CPUs, starting
// at the port's planned CPU.
func memberCPU(cpus []int, first, m int) int {
	if m == 0 || len(cpus) == 0 {
		return first
	}
	i := slices.Index(cpus, first)
	if i < 0 {
		return first
	}
	return cpus[(i+m)%len(cpus)]
}
