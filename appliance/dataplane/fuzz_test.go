package dataplane

import (
	"bytes"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// FuzzForward feeds arbitrary frames through the per-frame path of a
// three-port bridge with rules: it must never panic, every frame must be
// counted as received, and every copy it forwards must be the frame itself
// (with a stripped tag written back).
func FuzzForward(f *testing.F) {
	f.Add(arpFrame(bcast, macA), false, uint16(0))
	f.Add(tcpFrame(macB, macA, 1000, 23, frame.TCPSyn), false, uint16(0))
	f.Add(tcpFrame(macB, macA, 1000, 23, frame.TCPSyn), true, uint16(10))
	f.Add(udpFrame(macB, macA, 9, 100), false, uint16(0))
	f.Add(frametest.Frame(macB, macA, frame.EtherTypeVLAN, []byte{0, 5, 0x08, 0x06}), false, uint16(0))
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

// FuzzNATPath feeds arbitrary frames into the NAT router's ports (a LAN
// port, the WAN port and the host port): it must never panic, and
// whatever leaves must be a frame the parser accepts with the router's
// MAC as source or, when bridged, the frame itself.
func FuzzNATPath(f *testing.F) {
	f.Add(uint8(idLAN1), frametest.ARPFrame(bcast, macA, 1, macA, hAIP, [6]byte{}, lanIP))
	f.Add(uint8(idLAN1), tcp4(rLAN, macA, hAIP, remIP, 1000, 80, frame.TCPSyn, 0))
	f.Add(uint8(idWAN), tcp4(rWAN, macGW, remIP, wanIP, 80, 1000, frame.TCPSyn|frame.TCPAck, 0))
	f.Add(uint8(idWAN), udp4(rWAN, macGW, remIP, wanIP, 53, 1000, 20))
	f.Add(uint8(idHost), icmpEcho(rLAN, macTap, tapIP, lanIP, 64))
	f.Add(uint8(idLAN2), icmpEcho(rLAN, macB, hBIP, remIP, 1))
	tr := newTestRouter(f, 64, "")
	tr.resolve(f)
	f.Fuzz(func(t *testing.T, port uint8, data []byte) {
		in := uint16(port%4) + 1
		out := tr.rx(in, bytes.Clone(data))
		for id := 1; id < len(out); id++ {
			for _, b := range out[id] {
				var fr frame.Frame
				if err := frame.Parse(b, &fr); err != nil {
					t.Fatalf("port %d sent a frame that does not parse: %v", id, err)
				}
				if fr.Src != rLAN && fr.Src != rWAN && !bytes.Equal(b, data) {
					t.Fatalf("port %d sent a frame neither from the router nor bridged", id)
				}
			}
		}
	})
}

// FuzzConnFilter: any filter text is accepted or refused with an error,
// never a panic; an accepted protocol name or number round-trips.
func FuzzConnFilter(f *testing.F) {
	for _, s := range [][3]string{{"tcp", "masquerade", "established"}, {"17", "", "unreplied"}, {"x", "snat", "open"}, {"", "", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, proto, kind, state string) {
		cf := ConnFilter{Proto: proto, Kind: kind, State: state}
		nf, err := cf.natFilter()
		if err != nil {
			return
		}
		if proto != "" && nf.Proto == 0 {
			t.Fatalf("proto %q accepted as 0", proto)
		}
		if state != "" && (!nf.HasState || nf.State.String() != state) {
			t.Fatalf("state %q became %v", state, nf.State)
		}
		if kind != "" && nf.Kind.String() != kind {
			t.Fatalf("kind %q became %v", kind, nf.Kind)
		}
	})
}
