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
)

// Errors returned by Socket methods.
var (
	ErrClosed = errors.New("afpacket: socket closed")
	ErrNoRing = errors.New("afpacket: socket has no such ring")
)

// Stats are a socket's counters since Open.
type Stats struct {
	// RxPackets counts frames the kernel put in the RX ring.
	RxPackets uint64
	// RxDrops counts frames the kernel dropped because the ring was full.
	RxDrops uint64
	// RxFreezes counts how often the ring filled up (the kernel's
	// tp_freeze_q_cnt).
	RxFreezes uint64
	// RxTruncated counts frames that did not fit a block and arrived cut
	// short (Packet.Truncated).
	RxTruncated uint64
	// RxCorrupt counts blocks whose layout did not add up; their remaining
	// frames were skipped.
	RxCorrupt uint64

	// TxSent counts frames the kernel took for transmission.
	TxSent uint64
	// TxENOBUFS counts send attempts that found the driver queue full.
	TxENOBUFS uint64
	// TxEAGAIN counts send attempts that found the send buffer exhausted.
	TxEAGAIN uint64
	// TxWrongFormat counts frames the kernel rejected (TP_STATUS_WRONG_FORMAT,
	// e.g. larger than a lowered MTU); they were dropped and their slots
	// reused.
	TxWrongFormat uint64
	// TxOversize counts frames Append rejected as longer than the MTU
	// allows or than a slot holds; TxRunt those shorter than an Ethernet
	// header. They were never queued.
	TxOversize uint64
	TxRunt     uint64
	// TxStalls counts the times Flush gave up after TxRetryTimeout (once
	// per stall, not per call while it lasts).
	TxStalls uint64
	// TxDropped counts queued frames discarded because the socket was
	// closed before they were flushed.
	TxDropped uint64
}

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
	efd     int // eventfd that Close signals to wake a poller
	mem     []byte
	life    lifecycle

	_   [cacheLine]byte
	rx  rxRing
	pfd [2]unix.PollFd
	ts  unix.Timespec // ppoll timeout, kept here so that polling does not allocate

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
	s := &Socket{name: ifname, ifindex: ifi.Index, geo: g, fd: -1, efd: -1}
	if err := s.setup(cfg); err != nil {
		s.teardown()
		return nil, fmt.Errorf("afpacket: open %s: %w", ifname, err)
	}
	s.life.final = s.teardown
	return s, nil
}

func (s *Socket) setup(cfg Config) error {
	g := s.geo
	// Protocol 0: no frames are queued before the rings exist and bind
	// registers the ETH_P_ALL hook.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	s.fd = fd
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3, "PACKET_VERSION"); err != nil {
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
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, want); err != nil {
			if err := s.setInt(unix.SOL_SOCKET, unix.SO_SNDBUF, want, "SO_SNDBUF"); err != nil {
				return err
			}
		}
	}
	if !cfg.NoRX {
		req := unix.TpacketReq3{
			Block_size:     uint32(g.RxBlockSize),
			Block_nr:       uint32(g.RxBlockCount),
			Frame_size:     rxFrameSize,
			Frame_nr:       uint32(g.RxBlockSize / rxFrameSize * g.RxBlockCount),
			Retire_blk_tov: uint32(g.RxTimeout / time.Millisecond),
		}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("PACKET_RX_RING %+v: %w", req, err)
		}
	}
	if !cfg.NoTX && !cfg.TxCopy {
		req := unix.TpacketReq3{
			Block_size: uint32(g.TxBlockSize),
			Block_nr:   uint32(g.TxBlockCount),
			Frame_size: uint32(g.TxFrameSize),
			Frame_nr:   uint32(g.TxFrames),
		}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
			return fmt.Errorf("PACKET_TX_RING %+v: %w", req, err)
		}
	}
	mapped := g.RxBytes()
	if !cfg.TxCopy {
		mapped += g.TxBytes()
	}
	var mem []byte
	if mapped > 0 {
		if mem, err = unix.Mmap(fd, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return fmt.Errorf("mmap %d bytes: %w", mapped, err)
		}
		s.mem = mem
	}
	if !cfg.NoRX {
		s.rx = rxRing{mem: mem[:g.RxBytes()], blockSize: g.RxBlockSize, blocks: g.RxBlockCount}
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
	proto := uint16(0)
	if !cfg.NoRX {
		proto = htons(unix.ETH_P_ALL)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: s.ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if !cfg.NoPromisc && !cfg.NoRX {
		mreq := unix.PacketMreq{Ifindex: int32(s.ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("PACKET_ADD_MEMBERSHIP promisc: %w", err)
		}
	}
	if cfg.Fanout != nil {
		if err := s.setFanout(*cfg.Fanout); err != nil {
			return err
		}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	s.efd = efd
	s.pfd = [2]unix.PollFd{
		{Fd: int32(fd), Events: unix.POLLIN | unix.POLLERR},
		{Fd: int32(efd), Events: unix.POLLIN},
	}
	return nil
}

func (s *Socket) setInt(level, opt, v int, name string) error {
	if err := unix.SetsockoptInt(s.fd, level, opt, v); err != nil {
		return fmt.Errorf("%s=%d: %w", name, v, err)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sendto asks the kernel to transmit every SEND_REQUEST slot from its head.
func (s *Socket) sendto() error {
	return unix.Sendto(s.fd, nil, unix.MSG_DONTWAIT, &s.sa)
}

// sendCopy hands the queued slots to the kernel with sendmmsg (TxCopy)
// and marks those it took free, as the kernel does in a mapped ring. A
// frame the kernel refuses (EINVAL, EMSGSIZE) at the head is marked
// TP_STATUS_WRONG_FORMAT, like the mapped ring's kernel does, and dropped
// by reap.
func (s *Socket) sendCopy() error {
	t := s.tx
	n, err := s.copy.send(s.fd, t)
	for i := range n {
		k := (t.khead + i) % len(t.slots)
		storeStatus(t.mem, t.slots[k]+offStatus, unix.TP_STATUS_AVAILABLE)
	}
	if n == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EMSGSIZE)) {
		storeStatus(t.mem, t.slots[t.khead]+offStatus, unix.TP_STATUS_WRONG_FORMAT)
	}
	return err
}

// teardown releases everything setup acquired. It runs once, when the
// socket is closed and no method holds the mapping any more.
func (s *Socket) teardown() error {
	var errs []error
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
	if s.efd >= 0 {
		if err := unix.Close(s.efd); err != nil {
			errs = append(errs, fmt.Errorf("close eventfd: %w", err))
		}
		s.efd = -1
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
	return nil
}

func (s *Socket) setFanout(f Fanout) error {
	if err := unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, f.sockoptValue()); err != nil {
		return fmt.Errorf("PACKET_FANOUT id %d mode %d: %w", f.ID, f.Mode, err)
	}
	return nil
}

// NextBlock returns the next retired RX block, waiting up to timeout for
// one; a negative timeout waits until a block arrives or the socket is
// closed, zero does not wait. It returns (nil, nil) when the timeout
// expires, ErrClosed once Close was called, and an error wrapping
// unix.ENETDOWN when the interface went down (the socket keeps working once
// it is up again). A block still held from the previous call is released
// first. The returned Block is reused by the next call.
func (s *Socket) NextBlock(timeout time.Duration) (*Block, error) {
	if s.rx.blocks == 0 {
		return nil, ErrNoRing
	}
	if s.rx.held {
		s.ReleaseBlock()
	}
	if !s.life.acquire() {
		return nil, ErrClosed
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if s.rx.ready() {
			return s.rx.open(), nil // the reference is dropped by ReleaseBlock
		}
		if s.life.closed() {
			s.life.release()
			return nil, ErrClosed
		}
		if timeout == 0 {
			s.life.release()
			return nil, nil
		}
		var tsp *unix.Timespec // nil: wait without limit
		if timeout > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				s.life.release()
				return nil, nil
			}
			s.ts = unix.NsecToTimespec(int64(left))
			tsp = &s.ts
		}
		_, err := unix.Ppoll(s.pfd[:], tsp, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			s.life.release()
			return nil, fmt.Errorf("afpacket: %s: poll: %w", s.name, err)
		}
		if s.pfd[1].Revents != 0 {
			s.life.release()
			return nil, ErrClosed
		}
		if s.pfd[0].Revents&unix.POLLNVAL != 0 {
			s.life.release()
			return nil, fmt.Errorf("afpacket: %s: poll: %w", s.name, unix.EBADF)
		}
		if s.pfd[0].Revents&unix.POLLERR != 0 {
			soerr, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && soerr != 0 {
				s.life.release()
				return nil, fmt.Errorf("afpacket: %s: %w", s.name, unix.Errno(soerr))
			}
		}
	}
}

// ReleaseBlock hands the current block back to the kernel. Frames of the
// block must not be used afterwards. It is a no-op without a current block.
func (s *Socket) ReleaseBlock() {
	if !s.rx.held {
		return
	}
	truncated, corrupt := s.rx.release()
	if truncated > 0 {
		s.rxTruncated.Add(uint64(truncated))
	}
	if corrupt {
		s.rxCorrupt.Add(1)
	}
	s.life.release()
}

// txReady makes sure the TX goroutine holds a reference on the mapping.
func (s *Socket) txReady() bool {
	if s.txHeld {
		return !s.life.closed()
	}
	if !s.life.acquire() {
		return false
	}
	s.txHeld = true
	return true
}

// Append copies frame (from the destination MAC on, without FCS) into the
// next free TX slot. It returns false if the frame was not queued: the ring
// is full (Flush, then retry), the frame is too long or too short (counted
// in Stats, never truncated), or the socket is closed.
func (s *Socket) Append(frame []byte) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.append(frame)
}

// AppendTagged is Append for a frame whose VLAN tag was stripped on receive:
// it writes the frame with a tpid/tci tag inserted after the MAC addresses,
// in the same single copy. Only tpid 0x8100 frames may exceed MTU+14 bytes.
func (s *Socket) AppendTagged(frame []byte, tpid, tci uint16) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.appendTagged(frame, tpid, tci)
}

// TxSlot returns the data area of the next free TX slot so that a frame can
// be built in place, or nil if the ring is full or the socket closed. Queue
// it with TxCommit; until then it is not sent and TxSlot returns the same
// slot again.
func (s *Socket) TxSlot() []byte {
	if s.tx == nil || !s.txReady() {
		return nil
	}
	return s.tx.buffer()
}

// TxCommit queues the slot returned by TxSlot with its first n bytes as the
// frame. It returns false if n violates the length rules (counted) or no
// slot is free.
func (s *Socket) TxCommit(n int) bool {
	if s.tx == nil || !s.txReady() {
		return false
	}
	return s.tx.commitBuffer(n)
}

// Flush transmits the queued frames with one sendto (more only while the
// driver queue is full). Frames are never dropped on ENOBUFS or EAGAIN: Flush
// backs off and retries, and if the kernel takes nothing for TxRetryTimeout
// it returns an error wrapping ErrTxStalled (and the last errno) with the
// frames still queued. The kernel also answers ENOBUFS while the link has no
// carrier; so that a dead port does not cost every batch the full timeout,
// Flush then tries only once per call until the kernel takes frames again.
// Meanwhile the ring fills and Append reports it full.
func (s *Socket) Flush() error {
	if s.tx == nil {
		return ErrNoRing
	}
	if !s.txHeld {
		return nil
	}
	if s.life.closed() {
		s.txDropped.Add(uint64(s.tx.drop()))
		s.txHeld = false
		s.life.release()
		return ErrClosed
	}
	err := s.tx.flush()
	if s.tx.queued == 0 {
		s.txHeld = false
		s.life.release()
	}
	if err != nil {
		return fmt.Errorf("afpacket: %s: %w", s.name, err)
	}
	return nil
}

// Queued is the number of frames appended but not yet taken by the kernel.
func (s *Socket) Queued() int {
	if s.tx == nil {
		return 0
	}
	return s.tx.queued
}

// Stats returns the socket's counters. The kernel resets its counters on
// every read; Stats accumulates them, so the values only grow.
func (s *Socket) Stats() Stats {
	if s.rx.blocks > 0 && s.life.acquire() {
		s.readKernelStats()
		s.life.release()
	}
	s.statsMu.Lock()
	st := Stats{
		RxPackets: s.kstats.packets,
		RxDrops:   s.kstats.drops,
		RxFreezes: s.kstats.freezes,
	}
	s.statsMu.Unlock()
	st.RxTruncated = s.rxTruncated.Load()
	st.RxCorrupt = s.rxCorrupt.Load()
	st.TxDropped = s.txDropped.Load()
	if t := s.tx; t != nil {
		st.TxSent = t.sent.Load()
		st.TxENOBUFS = t.enobufs.Load()
		st.TxEAGAIN = t.eagain.Load()
		st.TxWrongFormat = t.wrongFormat.Load()
		st.TxOversize = t.oversize.Load()
		st.TxRunt = t.runt.Load()
		st.TxStalls = t.stalls.Load()
	}
	return st
}

// readKernelStats adds PACKET_STATISTICS (reset by the read) to the totals.
func (s *Socket) readKernelStats() {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	ks, err := unix.GetsockoptTpacketStatsV3(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return
	}
	// For TPACKET_V3 the kernel counts drops in tp_packets too.
	s.kstats.packets += uint64(ks.Packets - min(ks.Drops, ks.Packets))
	s.kstats.drops += uint64(ks.Drops)
	s.kstats.freezes += uint64(ks.Freeze_q_cnt)
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
	var one [8]byte // eventfd counter increment, native endian
	ne.PutUint64(one[:], 1)
	if _, err := unix.Write(s.efd, one[:]); err != nil {
		s.life.release()
		return fmt.Errorf("afpacket: %s: wake poller: %w", s.name, err)
	}
	s.life.release()
	return s.life.finalErr()
}

// lifecycle counts the users of a socket's mapping and descriptors and runs
// the final teardown once the socket is closed and the last user is gone.
type lifecycle struct {
	state atomic.Int64 // closedBit | number of holders
	once  sync.Once
	final func() error
	mu    sync.Mutex
	err   error
}

const closedBit = 1 << 62

func (l *lifecycle) hold() { l.state.Add(1) }

// acquire takes a reference unless the socket is closed.
func (l *lifecycle) acquire() bool {
	if l.state.Add(1)&closedBit != 0 {
		l.release()
		return false
	}
	return true
}

func (l *lifecycle) release() {
	if l.state.Add(-1) == closedBit {
		l.once.Do(l.finalize)
	}
}

func (l *lifecycle) closed() bool { return l.state.Load()&closedBit != 0 }

// markClosed sets the closed bit and reports whether this call set it.
func (l *lifecycle) markClosed() bool {
	for {
		old := l.state.Load()
		if old&closedBit != 0 {
			return false
		}
		if l.state.CompareAndSwap(old, old|closedBit) {
			return true
		}
	}
}

func (l *lifecycle) finalize() {
	var err error
	if l.final != nil {
		err = l.final()
	}
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// finalErr is the teardown error if teardown already ran.
func (l *lifecycle) finalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
