package pppoe

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzParseDiscovery: the discovery tag parser never panics, and what it
// accepts lies within the frame.
func FuzzParseDiscovery(f *testing.F) {
	hu := []byte("host-uniq")
	f.Add(newDiscovery([6]byte(clientMAC), [6]byte{2, 0, 0, 0, 0, 1}, codePADO, 0).
		tag(tagACName, []byte("isp")).tag(tagServiceName, nil).tag(tagHostUniq, hu).tag(tagACCookie, []byte("c")).frame())
	f.Add(newDiscovery([6]byte(clientMAC), [6]byte{2, 0, 0, 0, 0, 1}, codePADS, 0x1234).
		tag(tagHostUniq, hu).tag(tagPPPMaxPayload, []byte{5, 220}).tag(tagGenericErr, []byte("x")).frame())
	f.Add(newDiscovery(broadcast, [6]byte{2, 0, 0, 0, 0, 1}, codePADT, 7).tag(tagEndOfList, nil).frame())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0x63, 0x11, 0x07, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		d, err := parseDiscovery(frame)
		if err != nil {
			return
		}
		for _, b := range [][]byte{d.acName, d.serviceName, d.hostUniq, d.cookie, d.relay, d.errMsg, d.tags} {
			if len(b) > len(frame) {
				t.Fatalf("a tag of %d bytes from a %d-byte frame", len(b), len(frame))
			}
		}
		hasService(d.tags, "internet")
	})
}

// FuzzSessionHeader: ParseSessionHeader never panics, and a header it
// accepts survives PutSessionHeader.
func FuzzSessionHeader(f *testing.F) {
	f.Add(sessionFrame([6]byte{}, [6]byte{}, 1, ProtoIPv4, []byte{0x45, 0, 0, 20})[ethHeaderLen:])
	f.Add([]byte{0x11, 0, 0, 1, 0, 1, 0, 0x21})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, proto, p, ok := ParseSessionHeader(b)
		if !ok {
			return
		}
		h := make([]byte, SessionHeaderLen)
		PutSessionHeader(h, id, proto, len(p))
		if !bytes.Equal(h, b[:SessionHeaderLen]) {
			t.Fatalf("header %x rebuilt as %x", b[:SessionHeaderLen], h)
		}
	})
}

// FuzzOptions: the LCP, IPCP and IPv6CP option handlers never panic on a
// peer's options, and their replies are well-formed option lists.
func FuzzOptions(f *testing.F) {
	f.Add(appendOption(appendOption(nil, lcpOptMRU, []byte{5, 212}), lcpOptMagic, []byte{1, 2, 3, 4}))
	f.Add(appendOption(nil, lcpOptAuth, []byte{0xc2, 0x23, 0x80}))
	f.Add(appendOption(appendOption(nil, ipcpOptAddr, []byte{10, 0, 0, 1}), ipcpOptDNS1, []byte{0, 0, 0, 0}))
	f.Add(appendOption(nil, ipv6cpOptIID, make([]byte, 8)))
	f.Add([]byte{1, 0, 3})
	f.Fuzz(func(t *testing.T, opts []byte) {
		e := newEngine(testConfigOK(t), func([]byte) {})
		layers := []fsmLayer{
			&lcpLayer{e: e, maxMRU: 1492, wantMRU: 1492, sendMRU: true, sendMag: true, magic: 0x01020304},
			newIPCP(e),
			&ipv6cpLayer{e: e, local: [8]byte{1}, sendIID: true},
		}
		for _, l := range layers {
			for _, nakOK := range []bool{true, false} {
				code, reply := l.checkRequest(opts, nil, nakOK)
				if walkOptions(reply, func(byte, []byte) error { return nil }) != nil {
					t.Fatalf("%T: malformed reply %x to %x", l, reply, opts)
				}
				if code == confNak && !nakOK || code == confAck && len(reply) > 0 {
					t.Fatalf("%T: code %d with reply %x (nakOK %v)", l, code, reply, nakOK)
				}
			}
			l.gotNak(opts)
			l.gotRej(opts)
			l.addOptions(nil)
		}
	})
}

func testConfigOK(t testing.TB) Config {
	cfg, err := testConfig().withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// FuzzInput: whatever arrives on the WAN, in any phase, the client does not
// panic, and afterwards it still reaches (or keeps) a session.
func FuzzInput(f *testing.F) {
	ac := [6]byte{0x02, 0, 0, 0, 0xac, 1}
	f.Add(uint8(0), true, newDiscovery([6]byte(clientMAC), ac, codePADT, 0x102).frame()[ethHeaderLen:])
	f.Add(uint8(1), false, sessionFrame([6]byte(clientMAC), ac, 0x102, protoLCP, []byte{echoReq, 1, 0, 8, 0, 0, 0, 0})[ethHeaderLen:])
	f.Add(uint8(2), false, sessionFrame([6]byte(clientMAC), ac, 0x102, protoLCP, []byte{confReq, 9, 0, 10, 1, 4, 5, 212, 3, 2})[ethHeaderLen:])
	f.Add(uint8(3), false, sessionFrame([6]byte(clientMAC), ac, 0x102, protoIPCP, []byte{confNak, 1, 0, 10, 3, 6, 1, 2, 3, 4})[ethHeaderLen:])
	f.Add(uint8(4), false, sessionFrame([6]byte(clientMAC), ac, 0x102, protoCHAP, []byte{chapChall, 1, 0, 6, 1, 9})[ethHeaderLen:])
	f.Add(uint8(5), false, sessionFrame([6]byte(clientMAC), ac, 0x102, 0x1234, []byte{1})[ethHeaderLen:])
	f.Add(uint8(6), true, newDiscovery([6]byte(clientMAC), ac, codePADO, 0).tag(tagACName, nil).frame()[ethHeaderLen:])
	f.Fuzz(func(t *testing.T, at uint8, discovery bool, payload []byte) {
		a := newAC("isp", 1)
		a.auth = []uint16{protoPAP, protoCHAP}[at%2]
		cfg := testConfig()
		cfg.IPv6 = at%3 == 0
		s := newSim(t, cfg, a)
		// Inject after a number of delivery rounds: discovery, LCP, auth,
		// network or up.
		for range int(at % 16) {
			s.runFor(time.Millisecond, nil)
		}
		et := uint16(EtherTypeSession)
		if discovery {
			et = EtherTypeDiscovery
		}
		frame := make([]byte, ethHeaderLen, ethHeaderLen+len(payload))
		putEth(frame, [6]byte(clientMAC), a.mac, et)
		frame = append(frame, payload...)
		if len(payload) >= 4 && !discovery && binary.BigEndian.Uint16(payload[2:]) == 0 {
			binary.BigEndian.PutUint16(frame[ethHeaderLen+2:], a.session) // aim at our session
		}
		s.inject(frame)
		s.runFor(5*time.Minute, func() bool { return s.phase() == PhaseUp })
		if s.phase() != PhaseUp {
			t.Fatalf("not up 5 minutes after %x: phase %v, reason %q", frame, s.phase(), s.e.st.LastDownReason)
		}
	})
}
