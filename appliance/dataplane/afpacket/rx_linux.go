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

// rxRing is the user-space side of a TPACKET_V3 RX ring.
type rxRing struct {
	mem       []byte // the RX part of the mapping
	blockSize int
	blocks    int
	idx       int // next block to hand to the user
	held      bool
	cur       Block
}

func (r *rxRing) blockOff() int { return r.idx * r.blockSize }

// ready reports whether the next block has been retired to user space.
func (r *rxRing) ready() bool {
	return loadStatus(r.mem, r.blockOff()+offBlockStatus)&unix.TP_STATUS_USER != 0
}

// open makes the ready block the current one.
func (r *rxRing) open() *Block {
	off := r.blockOff()
	r.cur.parseBlock(r.mem[off : off+r.blockSize : off+r.blockSize])
	r.held = true
	return &r.cur
}

// release hands the current block back to the kernel and returns the
// number of truncated frames seen in it and whether it was malformed.
func (r *rxRing) release() (truncated int, corrupt bool) {
	truncated, corrupt = r.cur.truncated, r.cur.corrupt
	r.cur = Block{}
	storeStatus(r.mem, r.blockOff()+offBlockStatus, unix.TP_STATUS_KERNEL)
	r.idx++
	if r.idx == r.blocks {
		r.idx = 0
	}
	r.held = false
	return truncated, corrupt
}
