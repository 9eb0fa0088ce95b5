package afpacket

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// synth is a frame for buildBlock.
type synth struct {
	data    []byte
	origLen int // 0: len(data)
	status  uint32
	tci     uint16
	tpid    uint16
	pkttype uint8
	sec     uint32
	nsec    uint32
}

// buildBlock lays frames out in a V3 RX block the way the kernel does:
// block header, then per frame a tpacket3_hdr, a sockaddr_ll at +48 and the
// frame at +82, each frame aligned to 16 bytes.
func buildBlock(size int, frames []synth) []byte {
	b := make([]byte, size)
	ne.PutUint32(b[offBlockStatus:], unix.TP_STATUS_USER)
	ne.PutUint32(b[offNumPkts:], uint32(len(frames)))
	ne.PutUint32(b[offFirstPkt:], blockHdrLen)
	ne.PutUint64(b[offBlockSeq:], 42)
	off := blockHdrLen
	for _, f := range frames {
		h := b[off:]
		total := alignUp(rxMacOff+len(f.data), tpAlign)
		orig := f.origLen
		if orig == 0 {
			orig = len(f.data)
		}
		ne.PutUint32(h[offNextOffset:], uint32(total))
		ne.PutUint32(h[offSec:], f.sec)
		ne.PutUint32(h[offNsec:], f.nsec)
		ne.PutUint32(h[offSnaplen:], uint32(len(f.data)))
		ne.PutUint32(h[offLen:], uint32(orig))
		ne.PutUint32(h[offStatus:], unix.TP_STATUS_USER|f.status)
		ne.PutUint16(h[offMac:], rxMacOff)
		ne.PutUint16(h[offMac+2:], rxMacOff+ethHdrLen)
		ne.PutUint32(h[offVlanTCI:], uint32(f.tci))
		ne.PutUint16(h[offVlanTPID:], f.tpid)
		h[offPktType] = f.pkttype
		copy(h[rxMacOff:], f.data)
		off += total
	}
	ne.PutUint32(b[offBlockLen:], uint32(off))
	return b
}

func readBlock(buf []byte) (ps []Packet, b *Block) {
	b = new(Block)
	b.parseBlock(buf)
	var p Packet
	for b.Next(&p) {
		ps = append(ps, p)
	}
	return ps, b
}

func TestBlockNext(t *testing.T) {
	f1 := testFrame(macB, macA, 1, 1, 60)
	f2 := testFrame(macB, macA, 1, 2, 1514)
	f3 := testFrame(macB, macA, 1, 3, 99)
	tests := []struct {
		name          string
		frames        []synth
		mangle        func(b []byte)
		want          []Packet
		wantTruncated int
		wantCorrupt   bool
	}{
		{
			name:   "plain frames",
			frames: []synth{{data: f1, pkttype: unix.PACKET_HOST, sec: 10, nsec: 20}, {data: f2, pkttype: unix.PACKET_OTHERHOST}, {data: f3, pkttype: unix.PACKET_BROADCAST}},
			want: []Packet{
				{Data: f1, Len: 60, Status: unix.TP_STATUS_USER, Type: unix.PACKET_HOST, Sec: 10, Nsec: 20},
				{Data: f2, Len: 1514, Status: unix.TP_STATUS_USER, Type: unix.PACKET_OTHERHOST},
				{Data: f3, Len: 99, Status: unix.TP_STATUS_USER, Type: unix.PACKET_BROADCAST},
			},
		},
		{
			name: "vlan tags",
			frames: []synth{
				{data: f1, status: unix.TP_STATUS_VLAN_VALID | unix.TP_STATUS_VLAN_TPID_VALID, tci: 0x2064, tpid: 0x88a8},
				{data: f3, status: unix.TP_STATUS_VLAN_VALID, tci: 5},
			},
			want: []Packet{
				{Data: f1, Len: 60, Status: unix.TP_STATUS_USER | unix.TP_STATUS_VLAN_VALID | unix.TP_STATUS_VLAN_TPID_VALID, HasVLAN: true, VLANTPID: 0x88a8, VLANTCI: 0x2064},
				{Data: f3, Len: 99, Status: unix.TP_STATUS_USER | unix.TP_STATUS_VLAN_VALID, HasVLAN: true, VLANTPID: 0x8100, VLANTCI: 5},
			},
		},
		{
			name:          "truncated frame",
			frames:        []synth{{data: f1[:40], origLen: 9000}},
			want:          []Packet{{Data: f1[:40], Len: 9000, Status: unix.TP_STATUS_USER}},
			wantTruncated: 1,
		},
		{
			name:   "empty block",
			frames: nil,
		},
		{
			name:        "zero next offset mid-block stops",
			frames:      []synth{{data: f1}, {data: f3}},
			mangle:      func(b []byte) { ne.PutUint32(b[blockHdrLen+offNextOffset:], 0) },
			want:        []Packet{{Data: f1, Len: 60, Status: unix.TP_STATUS_USER}},
			wantCorrupt: true,
		},
		{
			name:        "snaplen beyond block",
			frames:      []synth{{data: f1}},
			mangle:      func(b []byte) { ne.PutUint32(b[blockHdrLen+offSnaplen:], 1<<20) },
			wantCorrupt: true,
		},
		{
			name:        "mac offset inside header",
			frames:      []synth{{data: f1}},
			mangle:      func(b []byte) { ne.PutUint16(b[blockHdrLen+offMac:], 8) },
			wantCorrupt: true,
		},
		{
			name:        "first frame offset beyond block",
			frames:      []synth{{data: f1}},
			mangle:      func(b []byte) { ne.PutUint32(b[offFirstPkt:], 8192) },
			wantCorrupt: true,
		},
		{
			name:        "packet count larger than content",
			frames:      []synth{{data: f1}},
			mangle:      func(b []byte) { ne.PutUint32(b[offNumPkts:], 1000) },
			want:        []Packet{{Data: f1, Len: 60, Status: unix.TP_STATUS_USER}},
			wantCorrupt: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := buildBlock(4096, tt.frames)
			if tt.mangle != nil {
				tt.mangle(buf)
			}
			got, b := readBlock(buf)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("packets (-want +got):\n%s", diff)
			}
			if b.truncated != tt.wantTruncated || b.corrupt != tt.wantCorrupt {
				t.Errorf("truncated %d corrupt %v, want %d %v", b.truncated, b.corrupt, tt.wantTruncated, tt.wantCorrupt)
			}
			if tt.mangle == nil && (b.Len() != len(tt.frames) || b.Seq() != 42) {
				t.Errorf("Len %d Seq %d, want %d 42", b.Len(), b.Seq(), len(tt.frames))
			}
		})
	}
}

// FuzzBlockNext feeds arbitrary block contents to the parser: it must not
// panic, must stay inside the block and must not return more frames than
// the header announces.
func FuzzBlockNext(f *testing.F) {
	f.Add(buildBlock(4096, []synth{{data: testFrame(macB, macA, 1, 1, 60)}, {data: testFrame(macB, macA, 1, 2, 1514)}}))
	f.Add(buildBlock(4096, []synth{{data: testFrame(macB, macA, 1, 1, 60), status: unix.TP_STATUS_VLAN_VALID, tci: 3}}))
	f.Add(buildBlock(256, nil))
	f.Add([]byte{})
	f.Add(make([]byte, blockHdrLen))
	f.Fuzz(func(t *testing.T, buf []byte) {
		b := new(Block)
		b.parseBlock(buf)
		var p Packet
		n := 0
		for b.Next(&p) {
			n++
			if n > b.Len() {
				t.Fatalf("returned %d frames, header says %d", n, b.Len())
			}
			if len(p.Data) > len(buf) || cap(p.Data) != len(p.Data) {
				t.Fatalf("frame of %d bytes (cap %d) from a %d-byte block", len(p.Data), cap(p.Data), len(buf))
			}
		}
	})
}

func BenchmarkBlockNext(b *testing.B) {
	frames := make([]synth, 0, 150)
	for i := range 150 {
		frames = append(frames, synth{data: testFrame(macB, macA, 1, uint32(i), 64)})
	}
	blk := buildBlock(64<<10, frames)
	var blkIt Block
	var p Packet
	b.ResetTimer()
	for i := 0; i < b.N; i += len(frames) {
		blkIt.parseBlock(blk)
		for blkIt.Next(&p) {
		}
	}
}

// buildFrames lays frames out in a TPACKET_V2 ring of frameSize-byte
// frames the way the kernel does: per frame a tpacket2_hdr, a sockaddr_ll
// at +32 and the frame at rx2MacOff. It returns the ring and a Block over
// all its frames.
func buildFrames(frameSize int, frames []synth) ([]byte, Block) {
	b := make([]byte, frameSize*len(frames))
	for i, f := range frames {
		h := b[i*frameSize:]
		orig := f.origLen
		if orig == 0 {
			orig = len(f.data)
		}
		ne.PutUint32(h[off2Status:], unix.TP_STATUS_USER|f.status)
		ne.PutUint32(h[off2Len:], uint32(orig))
		ne.PutUint32(h[off2Snaplen:], uint32(len(f.data)))
		ne.PutUint16(h[off2Mac:], rx2MacOff)
		ne.PutUint16(h[off2Mac+2:], rx2MacOff+ethHdrLen)
		ne.PutUint32(h[off2Sec:], f.sec)
		ne.PutUint32(h[off2Nsec:], f.nsec)
		ne.PutUint16(h[off2VlanTCI:], f.tci)
		ne.PutUint16(h[off2VlanTPID:], f.tpid)
		h[off2PktType] = f.pkttype
		copy(h[rx2MacOff:], f.data)
	}
	return b, Block{buf: b, left: len(frames), count: len(frames), frameSize: frameSize}
}

// TestFramesNext: a batch of TPACKET_V2 frames reads as the same frames in
// a TPACKET_V3 block do, tags, timestamps and truncation included.
func TestFramesNext(t *testing.T) {
	frames := []synth{
		{data: testFrame(macB, macA, 1, 1, 60), pkttype: unix.PACKET_HOST, sec: 7, nsec: 9},
		{data: testFrame(macB, macA, 1, 2, 1514), status: unix.TP_STATUS_VLAN_VALID, tci: 0x2005},
		{data: testFrame(macB, macA, 1, 3, 99), status: unix.TP_STATUS_VLAN_VALID | unix.TP_STATUS_VLAN_TPID_VALID,
			tci: 12, tpid: 0x88a8, pkttype: unix.PACKET_BROADCAST},
		{data: testFrame(macB, macA, 1, 4, 200), origLen: 3000},
	}
	want, wantBlk := readBlock(buildBlock(64<<10, frames))
	_, blk := buildFrames(2048, frames)
	var got []Packet
	var p Packet
	for blk.Next(&p) {
		got = append(got, p)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("V2 frames (-V3 block +V2 frames):\n%s", diff)
	}
	if blk.truncated != wantBlk.truncated || blk.corrupt {
		t.Errorf("V2 frames: %d truncated, corrupt %v; want %d, false", blk.truncated, blk.corrupt, wantBlk.truncated)
	}
}

func BenchmarkFramesNext(b *testing.B) {
	frames := make([]synth, 0, 150)
	for i := range 150 {
		frames = append(frames, synth{data: testFrame(macB, macA, 1, uint32(i), 64)})
	}
	_, all := buildFrames(2048, frames)
	var blk Block
	var p Packet
	b.ResetTimer()
	for i := 0; i < b.N; i += len(frames) {
		blk = all
		for blk.Next(&p) {
		}
	}
}
