package afpacket

import (
	"sync"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame/frametest"
)

// TestFanoutHash: two sockets in one hash fanout group together receive all
// frames of many flows, each flow on exactly one socket, and both get some.
func TestFanoutHash(t *testing.T) {
	v := newVeth(t, 1500)
	fo := Fanout{ID: 0x4a11, Mode: FanoutHash, Defrag: true}
	s1 := v.open(t, vethB, Config{Fanout: &fo})
	s2 := v.open(t, vethB, Config{})
	if err := s2.SetFanout(fo); err != nil {
		t.Fatalf("SetFanout: %v", err)
	}
	peer := v.plain(t, vethA)
	const flows, perFlow = 32, 20
	for i := range flows * perFlow {
		peer.send(t, udpFrame(uint16(i%flows), uint32(i)))
	}
	type result struct {
		seqs  map[uint32]bool
		flows map[uint16]bool
	}
	collect := func(s *Socket) result {
		r := result{seqs: map[uint32]bool{}, flows: map[uint16]bool{}}
		deadline := time.Now().Add(300 * time.Millisecond)
		var p Packet
		for time.Now().Before(deadline) {
			b, err := s.NextBlock(20 * time.Millisecond)
			if err != nil {
				t.Errorf("NextBlock: %v", err)
				return r
			}
			if b == nil {
				continue
			}
			for b.Next(&p) {
				if flow, seq, ok := parseUDPFrame(p.Data); ok {
					r.seqs[seq] = true
					r.flows[flow] = true
				}
			}
			s.ReleaseBlock()
		}
		return r
	}
	var r1, r2 result
	var wg sync.WaitGroup
	wg.Go(func() { r1 = collect(s1) })
	wg.Go(func() { r2 = collect(s2) })
	wg.Wait()
	if len(r1.seqs)+len(r2.seqs) != flows*perFlow {
		t.Errorf("sockets received %d + %d frames, want %d in total", len(r1.seqs), len(r2.seqs), flows*perFlow)
	}
	for seq := range r1.seqs {
		if r2.seqs[seq] {
			t.Errorf("frame %d delivered to both sockets", seq)
		}
	}
	for f := range r1.flows {
		if r2.flows[f] {
			t.Errorf("flow %d split over both sockets", f)
		}
	}
	if len(r1.flows) == 0 || len(r2.flows) == 0 {
		t.Errorf("flows per socket %d and %d: hash fanout did not spread %d flows", len(r1.flows), len(r2.flows), flows)
	}
}

// udpFrame is an IPv4/UDP frame of flow f (source port 10000+f), seq in the
// payload. The UDP checksum is left zero (none): nothing on the path
// verifies it.
func udpFrame(f uint16, seq uint32) []byte {
	payload := []byte{'f', 'o', byte(f >> 8), byte(f), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
	ip := frametest.IPv4{Src: [4]byte{198, 18, 0, 1}, Dst: [4]byte{198, 18, 0, 2}}
	return frametest.Frame([6]byte(macB), [6]byte(macA), frametest.EtherTypeIPv4, ip.UDPPacketNoChecksum(10000+f, 9, payload))
}

func parseUDPFrame(b []byte) (flow uint16, seq uint32, ok bool) {
	if len(b) < 50 || b[12] != 0x08 || b[13] != 0 || b[14+9] != 17 || b[42] != 'f' || b[43] != 'o' {
		return 0, 0, false
	}
	return uint16(b[44])<<8 | uint16(b[45]), uint32(b[46])<<24 | uint32(b[47])<<16 | uint32(b[48])<<8 | uint32(b[49]), true
}
