package afpacket

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Ring defaults. They are chosen for a forwarding worker on a 1 Gbit/s port:
//
//   - RX blocks of 256 KiB hold about 1600 minimum-size frames or 150
//     full-size (1518-byte) frames, so at 1.5 Mpps a block fills in about 1 ms
//     and one poll/release pair is amortised over a large batch, while a
//     9000-byte jumbo frame (and even a 64 KiB super-frame) still fits a block.
//   - 16 blocks (4 MiB) buffer about 16 ms of line-rate minimum-size traffic,
//     or 16 block timeouts when traffic is sparse, against consumer stalls.
//   - A block is retired after 2 ms even when not full, which bounds the
//     latency a quiet flow sees (the kernel rounds this up to its timer tick).
//   - 1024 TX slots cover one full RX block of forwarded frames plus the
//     e1000e descriptor ring (256 by default) still in flight.
const (
	DefaultBlockSize      = 256 << 10
	DefaultBlockCount     = 16
	DefaultBlockTimeout   = 2 * time.Millisecond
	DefaultTxFrames       = 1024
	DefaultTxRetryTimeout = 20 * time.Millisecond
	// DefaultRxFrames is a FrameRing's size: 8192 frames, 10 ms of
	// minimum-size frames at 800 kpps (16 MiB at MTU 1500).
	DefaultRxFrames = 8192
)

// Frame and ring layout constants of the TPACKET_V3 ABI (linux/if_packet.h).
const (
	ethHdrLen  = 14
	vlanTagLen = 4
	tpAlign    = unix.TPACKET_ALIGNMENT // 16

	// tpHdrLen is TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): a TX slot's
	// frame data starts here and an RX frame's struct sockaddr_ll sits here.
	tpHdrLen = (unix.SizeofTpacket3Hdr + tpAlign - 1) &^ (tpAlign - 1)
	// rxMacOff is where the kernel puts an Ethernet frame behind its RX
	// header: TPACKET_ALIGN(TPACKET3_HDRLEN + 16) - 14 with TPACKET3_HDRLEN =
	// 48 + sizeof(struct sockaddr_ll).
	rxMacOff = (tpHdrLen+unix.SizeofSockaddrLinklayer+16+tpAlign-1)&^(tpAlign-1) - ethHdrLen
	// blockHdrLen is sizeof(struct tpacket_block_desc) rounded as the kernel
	// does (BLK_PLUS_PRIV(0)).
	blockHdrLen = 48
	// rxFrameSize is the nominal frame size passed in tpacket_req3 for the RX
	// ring. V3 RX frames are variable-sized inside a block; the value only
	// has to satisfy the kernel's frame_nr = block_size/frame_size*block_nr
	// bookkeeping.
	rxFrameSize = 2048
	// txBlockTarget is the preferred TX block size: the kernel allocates each
	// block as one high-order page group, so 64 KiB keeps the allocation easy
	// while wasting at most one slot's worth per block.
	txBlockTarget = 64 << 10
	cacheLine     = 64
)

// FanoutMode selects how the kernel spreads a port's frames over the
// sockets of a fanout group (PACKET_FANOUT_*).
type FanoutMode uint16

// Fanout modes.
const (
	FanoutHash     FanoutMode = unix.PACKET_FANOUT_HASH // by flow hash: a flow stays on one socket
	FanoutLB       FanoutMode = unix.PACKET_FANOUT_LB   // round robin
	FanoutCPU      FanoutMode = unix.PACKET_FANOUT_CPU  // by the CPU that received the frame
	FanoutRollover FanoutMode = unix.PACKET_FANOUT_ROLLOVER
	FanoutRandom   FanoutMode = unix.PACKET_FANOUT_RND
	FanoutQueue    FanoutMode = unix.PACKET_FANOUT_QM // by recorded RX queue
)

// Fanout puts a socket into a PACKET_FANOUT group so that several sockets,
// each with its own ring and worker, share one port's traffic.
type Fanout struct {
	// ID names the group; it is unique per network namespace. All members
	// must use the same Mode and flags.
	ID uint16
	// Mode is the distribution policy.
	Mode FanoutMode
	// Defrag reassembles IP fragments before hashing so that all fragments
	// of a datagram reach the same socket (PACKET_FANOUT_FLAG_DEFRAG).
	Defrag bool
	// Rollover moves a frame to the next socket when the selected socket's
	// ring is full (PACKET_FANOUT_FLAG_ROLLOVER), trading flow affinity for
	// fewer drops.
	Rollover bool
}

func (f Fanout) sockoptValue() int {
	typ := uint32(f.Mode)
	if f.Defrag {
		typ |= unix.PACKET_FANOUT_FLAG_DEFRAG
	}
	if f.Rollover {
		typ |= unix.PACKET_FANOUT_FLAG_ROLLOVER
	}
	return int(uint32(f.ID) | typ<<16)
}

// Config configures Open. The zero value is a port socket with both rings,
// default sizes, PACKET_IGNORE_OUTGOING, PACKET_QDISC_BYPASS and promiscuous
// mode on.
type Config struct {
	// MTU sizes the TX slots and checks that the RX blocks can hold a full
	// frame. 0 uses the interface MTU at Open.
	MTU int

	// BlockSize is the RX block size in bytes, a multiple of the page size
	// that holds at least one maximum-size frame. 0 picks DefaultBlockSize,
	// raised for very large MTUs.
	BlockSize int
	// BlockCount is the number of RX blocks (at least 2). 0 picks
	// DefaultBlockCount.
	BlockCount int
	// BlockTimeout is the RX block retire timeout (tp_retire_blk_tov),
	// rounded up to whole milliseconds. 0 picks DefaultBlockTimeout.
	BlockTimeout time.Duration

	// FrameRing makes the RX ring a TPACKET_V2 ring of fixed-size frames
	// instead of TPACKET_V3 blocks: the kernel hands every frame over as
	// soon as it is written (and wakes a poller), where a V3 block waits
	// until it is full or its retire timeout (rounded up to the kernel's
	// timer tick) passes. NextBlock then returns the frames ready at the
	// head of the ring as one batch. BlockSize, BlockCount and
	// BlockTimeout are not used; RxFrames sizes the ring. The socket's own
	// TX path is TxCopy (the V3 TX ring layout needs TPACKET_V3).
	FrameRing bool
	// RxFrames is the number of RX frames of a FrameRing (rounded up to
	// whole blocks); 0 picks DefaultRxFrames.
	RxFrames int

	// TxFrames is the minimum number of TX slots; the ring is rounded up to
	// whole TX blocks. 0 picks DefaultTxFrames.
	TxFrames int
	// TxRetryTimeout bounds how long Flush keeps retrying while the driver
	// queue is full (ENOBUFS) or the socket send buffer is exhausted
	// (EAGAIN). Frames left queued are not lost; the next Flush sends them.
	// 0 picks DefaultTxRetryTimeout.
	TxRetryTimeout time.Duration

	// TxCopy keeps the TX slots in process memory and hands them to the
	// kernel with sendmmsg(2), which copies each frame into a plain
	// linear skb, instead of a mapped PACKET_TX_RING, whose skbs point at
	// the ring's pages (zero copy). Zero copy pays off on a NIC that DMAs
	// the frames; on veth every such skb is copied again when it crosses
	// into the peer's namespace (skb_copy_ubufs: a page allocation and a
	// copy per frame), so there TxCopy is cheaper. The API is the same.
	TxCopy bool

	// NoRX opens a TX-only socket: no RX ring, bound with protocol 0 so the
	// kernel never queues received frames on it.
	NoRX bool
	// NoTX opens an RX-only socket without a TX ring.
	NoTX bool
	// KeepOutgoing disables PACKET_IGNORE_OUTGOING: the RX ring then also
	// sees frames other sockets transmit on the port through the qdisc path.
	KeepOutgoing bool
	// UseQdisc disables PACKET_QDISC_BYPASS: TX frames then pass the
	// interface's qdisc (and are visible to other packet taps).
	UseQdisc bool
	// NoPromisc leaves the interface's promiscuous mode alone. A bridge port
	// needs promiscuous mode, so it is on by default.
	NoPromisc bool
	// Fanout, when non-nil, joins the socket to a fanout group after bind.
	Fanout *Fanout
	// SocketFilter, when positive, is the descriptor of a BPF socket
	// filter program (BPF_PROG_TYPE_SOCKET_FILTER) attached with
	// SO_ATTACH_BPF before the socket is bound, so that no frame reaches
	// the ring unfiltered. The socket holds its own reference.
	SocketFilter int
	// Bind, when set, binds the RX side to these EtherTypes instead of
	// all of them (ETH_P_ALL), each on a socket and ring of its own: the
	// first on the Socket's own descriptor (which also sends), the others
	// on RX-only sockets that share its fanout mode. NextBlock takes from
	// whichever ring has frames. A socket bound to an EtherType is not a
	// packet tap: the kernel hands it frames after tcx ingress, so frames
	// a tcx program redirects or drops never reach its rings, and after it
	// cleared a VLAN tag no VLAN device took (such frames arrive untagged,
	// as PACKET_OTHERHOST). A bound FrameRing's frames hold two inline
	// tags more than a tap's: a tcx program may move a frame's offloaded
	// tag back into it and put one of its own in front (ingressdrop's
	// marker). At most MaxBindings.
	Bind []Binding
}

// MaxBindings is the most EtherTypes a Socket binds (Config.Bind).
const MaxBindings = 4

// Binding is one EtherType a Socket receives on a ring of its own
// (Config.Bind).
type Binding struct {
	// EtherType in host order, e.g. unix.ETH_P_IP.
	EtherType uint16
	// Frames sizes a FrameRing binding's ring (0: the Config's RxFrames);
	// a block ring's bindings all take the Config's geometry.
	Frames int
}

// bindingFanout is the fanout group of binding k of a socket in group f:
// a group's members must share the EtherType, so every binding after the
// first has a group of its own, its ID f.ID with bits 13-14 flipped by k.
func bindingFanout(f *Fanout, k int) *Fanout {
	if f == nil || k == 0 {
		return f
	}
	g := *f
	g.ID ^= uint16(k) << 13
	return &g
}

// Geometry is the concrete ring layout Open uses for a Config and an MTU.
type Geometry struct {
	MTU int // the MTU the layout was computed for

	RxBlockSize  int           // bytes per RX block (0 without RX ring)
	RxBlockCount int           // RX blocks
	RxTimeout    time.Duration // block retire timeout, whole milliseconds (0 for a FrameRing)
	// RxFrameSize and RxFrames are a FrameRing's frames (0 for blocks).
	RxFrameSize, RxFrames int

	TxFrameSize  int // bytes per TX slot including the 48-byte header (0 without TX ring)
	TxBlockSize  int // bytes per TX block, a multiple of the page size
	TxBlockCount int // TX blocks
	TxFrames     int // TX slots in total

	TxRetryTimeout time.Duration
}

// RxBytes is the size of the RX ring.
func (g Geometry) RxBytes() int { return g.RxBlockSize * g.RxBlockCount }

// TxBytes is the size of the TX ring.
func (g Geometry) TxBytes() int { return g.TxBlockSize * g.TxBlockCount }

// MaxFrameLen is the longest frame the TX ring accepts: MTU plus the
// Ethernet header plus one 802.1Q tag. Untagged frames (and frames whose
// outer TPID is not 0x8100) are limited to MTU+14, as the kernel enforces.
func (g Geometry) MaxFrameLen() int { return g.MTU + ethHdrLen + vlanTagLen }

// rxFootprint is the space one received frame of the maximum size takes in
// a block: the block header, the frame header up to the MAC offset, and the
// frame including one inline (inner) VLAN tag, aligned.
func rxFootprint(mtu int) int {
	return blockHdrLen + alignUp(rxMacOff+mtu+ethHdrLen+vlanTagLen, tpAlign)
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// ErrConfig wraps every configuration error Geometry returns.
var ErrConfig = errors.New("afpacket: invalid config")

// Geometry computes the ring layout for the given MTU: it is the helper that
// sizes rings from the MTU. It fails if the configuration cannot hold a
// maximum-size frame or breaks a kernel constraint.
func (c Config) Geometry(mtu int) (Geometry, error) {
	page := os.Getpagesize()
	if mtu < 68 || mtu > 65535 {
		return Geometry{}, fmt.Errorf("%w: MTU %d outside 68..65535", ErrConfig, mtu)
	}
	if c.NoRX && c.NoTX {
		return Geometry{}, fmt.Errorf("%w: NoRX and NoTX leave no ring", ErrConfig)
	}
	if err := c.checkBind(); err != nil {
		return Geometry{}, err
	}
	g := Geometry{MTU: mtu}
	if !c.NoRX && c.FrameRing {
		if err := c.frameGeometry(&g, page); err != nil {
			return Geometry{}, err
		}
	} else if !c.NoRX {
		fp := rxFootprint(mtu)
		bs := c.BlockSize
		switch {
		case bs == 0:
			bs = DefaultBlockSize
			for bs < 4*fp {
				bs *= 2
			}
		case bs < 0 || bs%page != 0:
			return Geometry{}, fmt.Errorf("%w: block size %d is not a positive multiple of the page size %d", ErrConfig, bs, page)
		case bs < fp:
			return Geometry{}, fmt.Errorf("%w: block size %d cannot hold a %d-byte frame (needs %d)", ErrConfig, bs, mtu+ethHdrLen+vlanTagLen, fp)
		}
		n, err := setting(c.BlockCount, DefaultBlockCount, 2, 0, "block count")
		if err != nil {
			return Geometry{}, err
		}
		tov, err := setting(c.BlockTimeout, DefaultBlockTimeout, 0, time.Minute, "block timeout")
		if err != nil {
			return Geometry{}, err
		}
		g.RxBlockSize, g.RxBlockCount = bs, n
		g.RxTimeout = ((tov + time.Millisecond - 1) / time.Millisecond) * time.Millisecond
	}
	if !c.NoTX {
		fs := alignUp(tpHdrLen+g.MaxFrameLen(), cacheLine)
		bs := txBlockTarget
		if fs > bs {
			bs = alignUp(fs, page)
		}
		bs = alignUp(bs, page)
		perBlock := bs / fs
		want, err := setting(c.TxFrames, DefaultTxFrames, 0, 0, "TX frame count")
		if err != nil {
			return Geometry{}, err
		}
		blocks := (want + perBlock - 1) / perBlock
		g.TxFrameSize, g.TxBlockSize, g.TxBlockCount = fs, bs, blocks
		g.TxFrames = blocks * perBlock
		rt, err := setting(c.TxRetryTimeout, DefaultTxRetryTimeout, 0, 0, "TX retry timeout")
		if err != nil {
			return Geometry{}, err
		}
		g.TxRetryTimeout = rt
	}
	return g, nil
}

// rx2MacOff is where the kernel puts an Ethernet frame in a TPACKET_V2
// frame: TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14, with TPACKET2_HDRLEN =
// 32 + sizeof(struct sockaddr_ll).
const rx2MacOff = (tp2HdrLen+unix.SizeofSockaddrLinklayer+16+tpAlign-1)&^(tpAlign-1) - ethHdrLen

// tp2HdrLen is TPACKET_ALIGN(sizeof(struct tpacket2_hdr)).
const tp2HdrLen = 32

// frameRingBlock is a FrameRing's block size: frames are a power of two
// that divides it, so that frame i lies at i*frameSize in the mapping.
const frameRingBlock = 128 << 10

// frameGeometry sizes a FrameRing: frames a power of two that hold the
// frame header and a maximum-size frame with one inline VLAN tag, three
// when the ring is bound to EtherTypes (Config.Bind).
func (c Config) frameGeometry(g *Geometry, page int) error {
	need := rx2MacOff + g.MTU + ethHdrLen + vlanTagLen
	if len(c.Bind) > 0 {
		need += 2 * vlanTagLen
	}
	fs := 2048
	for fs < need {
		fs *= 2
	}
	bs := max(frameRingBlock, fs, page)
	n, err := setting(c.RxFrames, DefaultRxFrames, 0, 0, "RX frame count")
	if err != nil {
		return err
	}
	per := bs / fs
	blocks := max((n+per-1)/per, 2)
	g.RxBlockSize, g.RxBlockCount = bs, blocks
	g.RxFrameSize, g.RxFrames = fs, blocks*per
	return nil
}

// setting is the value of a Config field v: def when v is 0, v when it is
// at least min and at most max (0: no limit), an error naming what
// otherwise.
func setting[T int | time.Duration](v, def, min, max T, what string) (T, error) {
	switch {
	case v == 0:
		return def, nil
	case v < 0:
		return 0, fmt.Errorf("%w: negative %s %v", ErrConfig, what, v)
	case v < min:
		return 0, fmt.Errorf("%w: %s %v, need at least %v", ErrConfig, what, v, min)
	case max != 0 && v > max:
		return 0, fmt.Errorf("%w: %s %v above %v", ErrConfig, what, v, max)
	}
	return v, nil
}

// checkBind checks Config.Bind.
func (c Config) checkBind() error {
	if len(c.Bind) == 0 {
		return nil
	}
	if c.NoRX {
		return fmt.Errorf("%w: Bind without an RX ring", ErrConfig)
	}
	if len(c.Bind) > MaxBindings {
		return fmt.Errorf("%w: %d bindings, at most %d", ErrConfig, len(c.Bind), MaxBindings)
	}
	seen := map[uint16]bool{}
	for _, b := range c.Bind {
		switch {
		case b.EtherType == 0 || b.EtherType == unix.ETH_P_ALL:
			return fmt.Errorf("%w: binding to EtherType %#04x: name one EtherType", ErrConfig, b.EtherType)
		case seen[b.EtherType]:
			return fmt.Errorf("%w: EtherType %#04x bound twice", ErrConfig, b.EtherType)
		case b.Frames < 0:
			return fmt.Errorf("%w: EtherType %#04x: negative frame count %d", ErrConfig, b.EtherType, b.Frames)
		}
		seen[b.EtherType] = true
	}
	return nil
}
