package afpacket

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

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
