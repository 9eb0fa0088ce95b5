package afpacket

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/pollwait"
)

// Errors returned by Socket methods.
var (
	ErrClosed = errors.New("afpacket: socket closed")
	ErrNoRing = errors.New("afpacket: socket has no such ring")
)

// Socket is an AF_PACKET socket bound to one interface with a TPACKET_V3 RX
// ring and a fixed-frame TX ring in one mapping.
//
// The RX methods (NextBlock, ReleaseBlock) must be called from one goroutine
// and the TX methods (Append, AppendTagged, TxSlot, TxCommit, Flush) from
// one goroutine, which may be a different one. Stats, SetFanout and Close
// are safe from any goroutine.
type Socket struct {
	name    string
	ifindex int
	geo     Geometry
	fd      int
	mem     []byte
	life    lifecycle

	_  [cacheLine]byte
	rx rxRing
	// more are the RX-only sockets of Config.Bind's further EtherTypes;
	// rings is every RX ring (rx first), cur the one whose block is held
	// and next the one NextBlock looks at first (round robin).
	more  []*Socket
	rings []*rxRing
	cur   *rxRing
	next  int
	// wait parks NextBlock's goroutine in the runtime's netpoller until
	// the ring has a block, Close or Wake wakes it or the socket reports an
	// error (package pollwait says why not ppoll).
	wait *pollwait.Waiter

	_  [cacheLine]byte
	tx *txRing
	// txHeld is set while queued frames pin the mapping (from the first
	// Append after a Flush until the Flush that empties the queue).
	txHeld bool
	sa     unix.SockaddrLinklayer
	copy   *copySender // TxCopy
	_      [cacheLine]byte

	rxTruncated, rxCorrupt, txDropped atomic.Uint64

	statsMu sync.Mutex
	kstats  struct{ packets, drops, freezes uint64 }
}

// Open creates a socket on the interface ifname in the calling thread's
// network namespace, maps its rings and binds it. See Config for options.
func Open(ifname string, cfg Config) (*Socket, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket: open %s: %w", ifname, err)
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = ifi.MTU
	}
	g, err := cfg.Geometry(mtu)
	if err != nil {
		return nil, fmt.Errorf("afpacket: open %s: %w", ifname, err)
	}
	if cfg.FrameRing && !cfg.NoRX {
		cfg.TxCopy = true // the mapped TX ring's layout is TPACKET_V3's
	}
	s := &Socket{name: ifname, ifindex: ifi.Index, geo: g, fd: -1}
	if err := s.setup(cfg); err != nil {
		s.teardown()
		return nil, fmt.Errorf("afpacket: open %s: %w", ifname, err)
	}
	s.life.final = s.teardown
	return s, nil
}

func (s *Socket) setup(cfg Config) error {
	if err := s.open(cfg); err != nil {
		return err
	}
	if err := s.openBindings(cfg); err != nil {
		return err
	}
	return s.setupPoll()
}

// openBindings opens an RX-only socket for each of cfg.Bind's EtherTypes
// after the first (which the Socket's own descriptor took).
func (s *Socket) openBindings(cfg Config) error {
	for k, b := range cfg.Bind[min(1, len(cfg.Bind)):] {
		bc := cfg
		bc.NoTX, bc.TxCopy = true, false
		bc.Bind = []Binding{b}
		bc.Fanout = bindingFanout(cfg.Fanout, k+1)
		if b.Frames > 0 {
			bc.RxFrames = b.Frames
		}
		g, err := bc.Geometry(s.geo.MTU)
		if err != nil {
			return fmt.Errorf("EtherType %#04x: %w", b.EtherType, err)
		}
		m := &Socket{name: s.name, ifindex: s.ifindex, geo: g, fd: -1}
		s.more = append(s.more, m) // teardown releases it, also on error
		if err := m.open(bc); err != nil {
			return fmt.Errorf("EtherType %#04x: %w", b.EtherType, err)
		}
	}
	return nil
}

// open creates the socket, maps its rings and binds it.
func (s *Socket) open(cfg Config) error {
	// Protocol 0: no frames are queued before the rings exist and bind
	// registers the ETH_P_ALL hook (or the binding's EtherType).
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	s.fd = fd
	if err := s.setOptions(cfg); err != nil {
		return err
	}
	if err := s.requestRings(cfg); err != nil {
		return err
	}
	if err := s.mapRings(cfg); err != nil {
		return err
	}
	if cfg.SocketFilter > 0 {
		if err := s.setInt(unix.SOL_SOCKET, unix.SO_ATTACH_BPF, cfg.SocketFilter, "SO_ATTACH_BPF"); err != nil {
			return err
		}
	}
	return s.bind(cfg)
}

// setOptions sets the options that come before the rings: the TPACKET
// version, qdisc bypass, ignoring outgoing frames and the send buffer.
func (s *Socket) setOptions(cfg Config) error {
	g := s.geo
	version := unix.TPACKET_V3
	if g.RxFrames > 0 {
		version = unix.TPACKET_V2
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VERSION, version, "PACKET_VERSION"); err != nil {
		return err
	}
	if !cfg.UseQdisc && !cfg.NoTX {
		if err := s.setInt(unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"); err != nil {
			return err
		}
	}
	if !cfg.KeepOutgoing && !cfg.NoRX {
		if err := s.setInt(unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"); err != nil {
			return err
		}
	}
	if !cfg.NoTX {
		// Every frame in flight is charged to the send buffer; size it for
		// the whole ring so that the ring, not the buffer, is the limit.
		// SO_SNDBUFFORCE needs CAP_NET_ADMIN; fall back to the capped one.
		want := min(g.TxFrames*(g.TxFrameSize+1024), math.MaxInt32/2)
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, want); err != nil {
			if err := s.setInt(unix.SOL_SOCKET, unix.SO_SNDBUF, want, "SO_SNDBUF"); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestRings asks the kernel for the RX ring and the mapped TX ring.
func (s *Socket) requestRings(cfg Config) error {
	g := s.geo
	if g.RxFrames > 0 {
		if err := s.setRing(unix.PACKET_RX_RING, "PACKET_RX_RING", g.RxBlockSize, g.RxBlockCount, g.RxFrameSize, g.RxFrames, 0); err != nil {
			return err
		}
	} else if !cfg.NoRX {
		frames := g.RxBlockSize / rxFrameSize * g.RxBlockCount
		if err := s.setRing(unix.PACKET_RX_RING, "PACKET_RX_RING", g.RxBlockSize, g.RxBlockCount, rxFrameSize, frames, g.RxTimeout); err != nil {
			return err
		}
	}
	if !cfg.NoTX && !cfg.TxCopy {
		return s.setRing(unix.PACKET_TX_RING, "PACKET_TX_RING", g.TxBlockSize, g.TxBlockCount, g.TxFrameSize, g.TxFrames, 0)
	}
	return nil
}

// setRing asks the kernel for a ring (opt, named name) of blocks blocks of
// blockSize bytes holding frames frames of frameSize bytes, a V3 RX ring's
// blocks retired after timeout. It passes a tpacket_req3 at any TPACKET
// version: a V2 socket reads the tpacket_req at its front.
func (s *Socket) setRing(opt int, name string, blockSize, blocks, frameSize, frames int, timeout time.Duration) error {
	req := unix.TpacketReq3{
		Block_size:     uint32(blockSize),
		Block_nr:       uint32(blocks),
		Frame_size:     uint32(frameSize),
		Frame_nr:       uint32(frames),
		Retire_blk_tov: uint32(timeout / time.Millisecond),
	}
	if err := unix.SetsockoptTpacketReq3(s.fd, unix.SOL_PACKET, opt, &req); err != nil {
		return fmt.Errorf("%s %+v: %w", name, req, err)
	}
	return nil
}

// mapRings maps the rings (RX first, then TX) and sets up the socket's
// views of them; a TxCopy TX ring lives in process memory instead.
func (s *Socket) mapRings(cfg Config) error {
	g := s.geo
	mapped := g.RxBytes()
	if !cfg.TxCopy {
		mapped += g.TxBytes()
	}
	var mem []byte
	if mapped > 0 {
		var err error
		if mem, err = unix.Mmap(s.fd, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return fmt.Errorf("mmap %d bytes: %w", mapped, err)
		}
		s.mem = mem
	}
	if !cfg.NoRX {
		s.rx = rxRing{mem: mem[:g.RxBytes()], blockSize: g.RxBlockSize, blocks: g.RxBlockCount,
			frameSize: g.RxFrameSize, frames: g.RxFrames}
	}
	if !cfg.NoTX {
		// Send with an explicit address of protocol 0 so that the kernel
		// takes skb->protocol from each frame's Ethernet header instead of
		// the socket's bound ETH_P_ALL.
		s.sa = unix.SockaddrLinklayer{Ifindex: s.ifindex}
		if cfg.TxCopy {
			s.tx = newTxRing(make([]byte, g.TxBytes()), g)
			s.copy = newCopySender(s.tx, s.ifindex)
			s.tx.send = s.sendCopy
		} else {
			s.tx = newTxRing(mem[g.RxBytes():], g)
			s.tx.send = s.sendto
		}
	}
	return nil
}

// bind binds the socket to its interface, then turns on promiscuous mode
// and joins the fanout group as cfg asks.
func (s *Socket) bind(cfg Config) error {
	proto := uint16(0)
	if !cfg.NoRX {
		proto = htons(unix.ETH_P_ALL)
		if len(cfg.Bind) > 0 {
			proto = htons(cfg.Bind[0].EtherType)
		}
	}
	if err := unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: s.ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if !cfg.NoPromisc && !cfg.NoRX {
		mreq := unix.PacketMreq{Ifindex: int32(s.ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(s.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("PACKET_ADD_MEMBERSHIP promisc: %w", err)
		}
	}
	if cfg.Fanout != nil {
		if err := s.setFanout(*cfg.Fanout); err != nil {
			return err
		}
	}
	return nil
}

// setupPoll creates the waiter NextBlock waits on, which Close and Wake
// wake.
func (s *Socket) setupPoll() error {
	if s.rx.blocks == 0 { // NoRX: NextBlock answers ErrNoRing
		return nil
	}
	s.rings = []*rxRing{&s.rx}
	fds := []int{s.fd}
	for _, m := range s.more {
		s.rings = append(s.rings, &m.rx)
		fds = append(fds, m.fd)
	}
	var err error
	s.wait, err = pollwait.New(s.name, s.anyReady, fds...)
	return err
}

// anyReady reports whether any RX ring has frames for user space.
func (s *Socket) anyReady() bool {
	for _, r := range s.rings {
		if r.ready() {
			return true
		}
	}
	return false
}

// readyRing is the first ring from s.next on that has frames for user
// space, nil if none has; the one after it is looked at first next time.
func (s *Socket) readyRing() *rxRing {
	if len(s.rings) == 1 {
		if s.rx.ready() {
			return &s.rx
		}
		return nil
	}
	for i := range s.rings {
		j := (s.next + i) % len(s.rings)
		if r := s.rings[j]; r.ready() {
			s.next = (j + 1) % len(s.rings)
			return r
		}
	}
	return nil
}

// fdOf is the descriptor behind the Waiter's event index i (0: the
// socket, then the further bindings).
func (s *Socket) fdOf(i int) int {
	if i == 0 {
		return s.fd
	}
	return s.more[i-1].fd
}

func (s *Socket) setInt(level, opt, v int, name string) error {
	if err := unix.SetsockoptInt(s.fd, level, opt, v); err != nil {
		return fmt.Errorf("%s=%d: %w", name, v, err)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// teardown releases everything setup acquired. It runs once, when the
// socket is closed and no method holds the mapping any more.
func (s *Socket) teardown() error {
	var errs []error
	for _, m := range s.more {
		if err := m.teardown(); err != nil {
			errs = append(errs, fmt.Errorf("EtherType socket: %w", err))
		}
	}
	if s.fd >= 0 && s.rx.blocks > 0 {
		s.readKernelStats()
	}
	if s.mem != nil {
		if err := unix.Munmap(s.mem); err != nil {
			errs = append(errs, fmt.Errorf("munmap: %w", err))
		}
		s.mem = nil
	}
	if s.fd >= 0 {
		if err := unix.Close(s.fd); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
		s.fd = -1
	}
	if s.wait != nil {
		if err := s.wait.Close(); err != nil {
			errs = append(errs, err)
		}
		s.wait = nil
	}
	return errors.Join(errs...)
}

// Name is the interface name the socket is bound to.
func (s *Socket) Name() string { return s.name }

// Ifindex is the interface index the socket is bound to.
func (s *Socket) Ifindex() int { return s.ifindex }

// Geometry is the ring layout in use.
func (s *Socket) Geometry() Geometry { return s.geo }

// SetFanout joins the socket to a fanout group (PACKET_FANOUT). A socket can
// join only one group, once.
func (s *Socket) SetFanout(f Fanout) error {
	if !s.life.acquire() {
		return ErrClosed
	}
	defer s.life.release()
	if err := s.setFanout(f); err != nil {
		return fmt.Errorf("afpacket: %s: %w", s.name, err)
	}
	for k, m := range s.more {
		if err := m.setFanout(*bindingFanout(&f, k+1)); err != nil {
			return fmt.Errorf("afpacket: %s: %w", s.name, err)
		}
	}
	return nil
}

func (s *Socket) setFanout(f Fanout) error {
	if err := unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, f.sockoptValue()); err != nil {
		return fmt.Errorf("PACKET_FANOUT id %d mode %d: %w", f.ID, f.Mode, err)
	}
	return nil
}

// Close closes the socket: a goroutine blocked in NextBlock returns
// ErrClosed at once, later calls fail with ErrClosed, and queued TX frames
// are discarded. The ring is unmapped and the descriptor closed as soon as
// no block is held and no frames are queued (at once if none are, otherwise
// at the ReleaseBlock or Flush that lets go). Close is safe to call more
// than once; later calls return nil.
func (s *Socket) Close() error {
	s.life.hold()
	if !s.life.markClosed() {
		s.life.release()
		return nil
	}
	if err := s.wake(); err != nil {
		s.life.release()
		return fmt.Errorf("afpacket: %s: wake poller: %w", s.name, err)
	}
	s.life.release()
	return s.life.finalErr()
}

// wake wakes a waiting NextBlock (Close, Wake); without an RX ring none
// waits.
func (s *Socket) wake() error {
	if s.wait == nil {
		return nil
	}
	return s.wait.Wake()
}
