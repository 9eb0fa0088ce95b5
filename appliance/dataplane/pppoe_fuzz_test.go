package dataplane

import (
	"bytes"
	"encoding/binary"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/services/pppoe"
)

// FuzzParsePPPoESession: the WAN's PPPoE session header parser never
// reads past the packet, and a header it accepts is rebuilt the same by
// putPPPoESession.
func FuzzParsePPPoESession(f *testing.F) {
	f.Add([]byte{0x11, 0, 0x12, 0x34, 0, 22, 0, 0x21, 0x45})
	f.Add([]byte{0x11, 0, 0, 1, 0xff, 0xff, 0xc0, 0x21})
	f.Add([]byte{0x11, 0, 0, 1, 0, 1, 0, 0x21})
	f.Fuzz(func(t *testing.T, b []byte) {
		sid, proto, n, ok := parsePPPoESession(b)
		if !ok {
			return
		}
		if n < 0 || pppoeHeaderLen+n > len(b) {
			t.Fatalf("%d bytes of payload in a %d-byte packet", n, len(b))
		}
		h := make([]byte, pppoeHeaderLen)
		putPPPoESession(h, sid, proto, n)
		if !bytes.Equal(h, b[:pppoeHeaderLen]) {
			t.Fatalf("header %x rebuilt as %x", b[:pppoeHeaderLen], h)
		}
	})
}

// FuzzPPPoEWAN feeds arbitrary frames into a PPPoE WAN (session
// testSID with macAC, untagged or on VLAN 7): no panic; what the router
// sends to the LAN parses and comes from it, what goes back out of the
// WAN is a session frame of the session to the AC, and what it queues
// for the client is a PPPoE frame no longer than what came in.
func FuzzPPPoEWAN(f *testing.F) {
	syn := tcp4(rWAN, macGW, remIP, wanIP, 80, 1000, frame.TCPSyn|frame.TCPAck, 0)
	f.Add(false, sessionFrame(rWAN, macAC, testSID, pppoe.ProtoIPv4, syn))
	f.Add(false, sessionFrame(rWAN, macAC, testSID, 0xc021, append(make([]byte, 14), 9, 1, 0, 8, 0, 0, 0, 0)))
	f.Add(true, sessionFrame(rWAN, macAC, testSID+1, pppoe.ProtoIPv4, syn))
	f.Add(false, append(append(append([]byte(nil), rWAN[:]...), macAC[:]...), 0x88, 0x63, 0x11, 0xa7, 0x12, 0x34, 0, 0))
	f.Add(false, syn)
	tr := newTestRouter(f, 64, "")
	tr.resolve(f)
	f.Fuzz(func(t *testing.T, vlan bool, data []byte) {
		v := WANVLAN{}
		if vlan {
			v = WANVLAN{ID: 7, ControlPCP: 6}
		}
		q := tr.setPPPoE(PPPoESession{ID: testSID, ACMAC: macAC}, v)
		out := tr.rx(idWAN, bytes.Clone(data))
		for id := 1; id < len(out); id++ {
			for _, b := range out[id] {
				if id == idWAN {
					if vlan && len(b) >= 18 && binary.BigEndian.Uint16(b[12:]) == frame.EtherTypeVLAN {
						b = append(append([]byte(nil), b[:12]...), b[16:]...)
					}
					if len(b) < 22 || [6]byte(b[0:6]) != macAC || binary.BigEndian.Uint16(b[12:]) != EtherTypePPPoESession ||
						binary.BigEndian.Uint16(b[16:]) != testSID {
						t.Fatalf("the WAN sent %x: not a frame of the session to the AC", b)
					}
					continue
				}
				var fr frame.Frame
				if err := frame.Parse(b, &fr); err != nil {
					t.Fatalf("port %d sent a frame that does not parse: %v", id, err)
				}
				if fr.Src != rLAN {
					t.Fatalf("port %d sent a frame from %x, not the router", id, fr.Src)
				}
			}
		}
		for _, b := range queued(q) {
			if len(b) > len(data) || len(b) < frame.EthernetHeaderLen {
				t.Fatalf("queued %d bytes for the client from a %d-byte frame", len(b), len(data))
			}
			if et := binary.BigEndian.Uint16(b[12:]); et != EtherTypePPPoEDiscovery && et != EtherTypePPPoESession {
				t.Fatalf("queued a frame of EtherType %#04x for the client", et)
			}
		}
	})
}
