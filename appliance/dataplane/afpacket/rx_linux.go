package afpacket

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// Offsets inside struct tpacket_block_desc (the V1 block header follows the
// 8-byte version/offset_to_priv prefix).
const (
	offBlockStatus = 8
	offNumPkts     = 12
	offFirstPkt    = 16
	offBlockLen    = 20
	offBlockSeq    = 24
)

// Offsets inside struct tpacket3_hdr.
const (
	offNextOffset = 0
	offSec        = 4
	offNsec       = 8
	offSnaplen    = 12
	offLen        = 16
	offStatus     = 20
	offMac        = 24
	offVlanTCI    = 32
	offVlanTPID   = 36
	offPktType    = tpHdrLen + 10 // sockaddr_ll.sll_pkttype
)

var ne = binary.NativeEndian

// Packet describes one received frame. Data points into the ring and is
// valid only until the block is released.
type Packet struct {
	// Data is the frame from the destination MAC on, without FCS. A VLAN tag
	// the kernel or NIC stripped is not in Data; see HasVLAN.
	Data []byte
	// Len is the frame's original length; it exceeds len(Data) only if the
	// frame was truncated because it did not fit a block.
	Len int
	// Status is the raw tp_status (TP_STATUS_VLAN_VALID, _CSUM_VALID, ...).
	Status uint32
	// HasVLAN reports that the frame carried a VLAN tag that was stripped;
	// VLANTPID and VLANTCI describe it. Re-insert it with AppendTagged when
	// forwarding.
	HasVLAN bool
	// VLANTPID is the stripped tag's TPID (0x8100 or 0x88a8).
	VLANTPID uint16
	// VLANTCI is the stripped tag's TCI (PCP, DEI, VID).
	VLANTCI uint16
	// Type is the sll_pkttype: unix.PACKET_HOST, _BROADCAST, _MULTICAST,
	// _OTHERHOST or _OUTGOING.
	Type uint8
	// Sec and Nsec are the kernel's receive timestamp.
	Sec, Nsec uint32
}

// Time returns the receive timestamp.
func (p *Packet) Time() time.Time { return time.Unix(int64(p.Sec), int64(p.Nsec)) }

// Truncated reports whether the ring holds only part of the frame.
func (p *Packet) Truncated() bool { return p.Len > len(p.Data) }

// Block is one retired RX block: a batch of frames. Iterate it with Next; it
// stays valid until ReleaseBlock or the next NextBlock call.
type Block struct {
	buf       []byte
	off       int // offset of the next frame header
	left      int // frames not yet returned
	count     int
	seq       uint64
	truncated int
	corrupt   bool
	// frameSize is set for a batch of TPACKET_V2 frames: buf is the whole
	// ring and the frames follow each other from off, wrapping around.
	frameSize int
}

// parseBlock prepares b to walk the block in buf. It trusts nothing but
// the length of buf: offsets and counts are checked as frames are visited.
func (b *Block) parseBlock(buf []byte) {
	*b = Block{buf: buf}
	if len(buf) < blockHdrLen {
		b.corrupt = true
		return
	}
	b.count = int(ne.Uint32(buf[offNumPkts:]))
	b.left = b.count
	b.off = int(ne.Uint32(buf[offFirstPkt:]))
	b.seq = ne.Uint64(buf[offBlockSeq:])
}

// Len is the number of frames the kernel put in the block.
func (b *Block) Len() int { return b.count }

// Seq is the kernel's block sequence number; consecutive blocks differ by 1.
func (b *Block) Seq() uint64 { return b.seq }

// Next fills p with the next frame of the block and reports whether there
// was one. It does not allocate.
func (b *Block) Next(p *Packet) bool {
	if b.left <= 0 {
		return false
	}
	if b.frameSize > 0 {
		return b.nextFrame(p)
	}
	off := b.off
	if off < blockHdrLen || off > len(b.buf)-tpHdrLen-unix.SizeofSockaddrLinklayer || off%4 != 0 {
		b.fail()
		return false
	}
	h := b.buf[off:]
	snap := int(ne.Uint32(h[offSnaplen:]))
	mac := int(ne.Uint16(h[offMac:]))
	if mac < tpHdrLen || snap > len(h)-mac {
		b.fail()
		return false
	}
	status := ne.Uint32(h[offStatus:])
	// Field by field: assigning a whole Packet literal through p is several
	// times slower (the compiler builds a temporary and copies it).
	p.Data = h[mac : mac+snap : mac+snap]
	p.Len = int(ne.Uint32(h[offLen:]))
	p.Status = status
	p.Type = h[offPktType]
	p.Sec = ne.Uint32(h[offSec:])
	p.Nsec = ne.Uint32(h[offNsec:])
	p.HasVLAN, p.VLANTPID, p.VLANTCI = false, 0, 0
	if status&unix.TP_STATUS_VLAN_VALID != 0 {
		p.HasVLAN = true
		p.VLANTCI = uint16(ne.Uint32(h[offVlanTCI:]))
		p.VLANTPID = 0x8100
		if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			p.VLANTPID = ne.Uint16(h[offVlanTPID:])
		}
	}
	if p.Len > snap {
		b.truncated++
	}
	b.left--
	next := int(ne.Uint32(h[offNextOffset:]))
	if b.left > 0 && next <= 0 {
		b.fail()
		return true
	}
	b.off = off + next
	return true
}

// fail stops the iteration of a block whose layout does not add up.
func (b *Block) fail() {
	b.corrupt = true
	b.left = 0
}

// rxRing is the user-space side of a TPACKET_V3 RX ring, or of a
// TPACKET_V2 ring of frames (frames > 0).
type rxRing struct {
	mem       []byte // the RX part of the mapping
	blockSize int
	blocks    int
	idx       int // next block (V2: frame) to hand to the user
	held      bool
	cur       Block
	frameSize int // V2
	frames    int // V2
	batch     int // V2: frames in the current batch
}

func (r *rxRing) blockOff() int { return r.idx * r.blockSize }

// ready reports whether the next block has been retired (V2: the next
// frame written) to user space.
func (r *rxRing) ready() bool {
	if r.frames > 0 {
		return loadStatus(r.mem, r.idx*r.frameSize+off2Status)&unix.TP_STATUS_USER != 0
	}
	return loadStatus(r.mem, r.blockOff()+offBlockStatus)&unix.TP_STATUS_USER != 0
}

// maxBatch bounds a V2 batch: the frames handed back at once.
const maxBatch = 256

// open makes the ready block (V2: the ready frames at the head) the
// current one.
func (r *rxRing) open() *Block {
	r.held = true
	if r.frames > 0 {
		n := 1
		for n < maxBatch && n < r.frames {
			i := r.idx + n
			if i >= r.frames {
				i -= r.frames
			}
			if loadStatus(r.mem, i*r.frameSize+off2Status)&unix.TP_STATUS_USER == 0 {
				break
			}
			n++
		}
		r.batch = n
		r.cur = Block{buf: r.mem, off: r.idx * r.frameSize, left: n, count: n, frameSize: r.frameSize}
		return &r.cur
	}
	off := r.blockOff()
	r.cur.parseBlock(r.mem[off : off+r.blockSize : off+r.blockSize])
	return &r.cur
}

// release hands the current block (V2: batch) back to the kernel and
// returns the number of truncated frames seen in it and whether it was
// malformed.
func (r *rxRing) release() (truncated int, corrupt bool) {
	truncated, corrupt = r.cur.truncated, r.cur.corrupt
	r.cur = Block{}
	r.held = false
	if r.frames > 0 {
		for range r.batch {
			storeStatus(r.mem, r.idx*r.frameSize+off2Status, unix.TP_STATUS_KERNEL)
			if r.idx++; r.idx == r.frames {
				r.idx = 0
			}
		}
		r.batch = 0
		return truncated, corrupt
	}
	storeStatus(r.mem, r.blockOff()+offBlockStatus, unix.TP_STATUS_KERNEL)
	r.idx++
	if r.idx == r.blocks {
		r.idx = 0
	}
	return truncated, corrupt
}

// Offsets inside struct tpacket2_hdr.
const (
	off2Status   = 0
	off2Len      = 4
	off2Snaplen  = 8
	off2Mac      = 12
	off2Sec      = 16
	off2Nsec     = 20
	off2VlanTCI  = 24
	off2VlanTPID = 26
	off2PktType  = tp2HdrLen + 10 // sockaddr_ll.sll_pkttype
)

// nextFrame is Next for a batch of TPACKET_V2 frames.
func (b *Block) nextFrame(p *Packet) bool {
	fs := b.frameSize
	h := b.buf[b.off : b.off+fs : b.off+fs]
	snap := int(ne.Uint32(h[off2Snaplen:]))
	mac := int(ne.Uint16(h[off2Mac:]))
	if mac < tp2HdrLen || snap > fs-mac {
		b.fail()
		return false
	}
	status := ne.Uint32(h[off2Status:])
	p.Data = h[mac : mac+snap : mac+snap]
	p.Len = int(ne.Uint32(h[off2Len:]))
	p.Status = status
	p.Type = h[off2PktType]
	p.Sec = ne.Uint32(h[off2Sec:])
	p.Nsec = ne.Uint32(h[off2Nsec:])
	p.HasVLAN, p.VLANTPID, p.VLANTCI = false, 0, 0
	if status&unix.TP_STATUS_VLAN_VALID != 0 {
		p.HasVLAN = true
		p.VLANTCI = ne.Uint16(h[off2VlanTCI:])
		p.VLANTPID = 0x8100
		if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			p.VLANTPID = ne.Uint16(h[off2VlanTPID:])
		}
	}
	if p.Len > snap {
		b.truncated++
	}
	b.left--
	if b.off += fs; b.off == len(b.buf) {
		b.off = 0
	}
	return true
}
