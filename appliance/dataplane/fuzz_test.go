package dataplane

import (
	"bytes"
	"testing"

	"e1kbox/appliance/dataplane/frame"
)

// FuzzForward feeds arbitrary frames through the per-frame path of a
// three-port bridge with rules: it must never panic, every frame must be
// counted as received, and every copy it forwards must be the frame itself
// (with a stripped tag written back).
func FuzzForward(f *testing.F) {
	f.Add(arpFrame(bcast, macA), false, uint16(0))
	f.Add(tcpFrame(f, macB, macA, 1000, 23, frame.TCPSyn), false, uint16(0))
	f.Add(tcpFrame(f, macB, macA, 1000, 23, frame.TCPSyn), true, uint16(10))
	f.Add(udpFrame(f, macB, macA, 9, 100), false, uint16(0))
	f.Add(eth(macB, macA, frame.EtherTypeVLAN, []byte{0, 5, 0x08, 0x06}), false, uint16(0))
	f.Add([]byte{1, 2, 3}, false, uint16(0))
	b := newTestBridge(f, 3, true, "tcp dport 23 reject\nudp dport 9 reject\nchain input\nether type arp drop", false, nil)
	f.Fuzz(func(t *testing.T, data []byte, stripped bool, tci uint16) {
		w := b.fwds[1]
		rx := w.c.rxPackets
		out := b.rx(1, data, stripped, frame.VLANTag{TPID: frame.EtherTypeVLAN, TCI: tci})
		if w.c.rxPackets != rx+1 {
			t.Fatalf("frame not counted")
		}
		want := data
		if stripped && len(data) >= 12 {
			want = append(append(append([]byte(nil), data[:12]...), 0x81, 0, byte(tci>>8), byte(tci)), data[12:]...)
		}
		for id, o := range out {
			if o == nil {
				continue
			}
			if id == 1 { // a reject answer: it must be a valid frame
				var af frame.Frame
				if err := frame.Parse(o, &af); err != nil {
					t.Fatalf("reject answer does not parse: %v\n% x", err, o)
				}
				if err := frame.VerifyChecksums(o, &af); err != nil {
					t.Fatalf("reject answer checksums: %v", err)
				}
				continue
			}
			if !bytes.Equal(o, want) {
				t.Fatalf("port %d got % x\nwant % x", id, o, want)
			}
		}
	})
}
