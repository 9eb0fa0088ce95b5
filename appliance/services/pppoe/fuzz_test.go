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
	f.Add(uint8(7), false, sessionFrame([6]byte(clientMAC), ac, 0, protoLCP, []byte{codeRej, 1, 0, 8, confReq, 1, 0, 4})[ethHeaderLen:])
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
		if len(payload) >= 4 && at&0x80 == 0 {
			binary.BigEndian.PutUint16(frame[ethHeaderLen+2:], a.session) // aim at our session
		}
		s.inject(frame)
		s.runFor(5*time.Minute, func() bool { return s.phase() == PhaseUp })
		if s.phase() != PhaseUp {
			t.Fatalf("not up 5 minutes after %x: phase %v, reason %q", frame, s.phase(), s.e.st.LastDownReason)
		}
	})
}

// stubLayer is an fsmLayer that accepts every option: FuzzFSMInput tests
// the automaton's own parsing.
type stubLayer struct{}

func (stubLayer) addOptions(b []byte) []byte                        { return b }
func (stubLayer) checkRequest(_, out []byte, _ bool) (byte, []byte) { return confAck, out }
func (stubLayer) gotAck([]byte)                                     {}
func (stubLayer) gotNak([]byte)                                     {}
func (stubLayer) gotRej([]byte)                                     {}
func (stubLayer) up()                                               {}
func (stubLayer) down()                                             {}
func (stubLayer) started()                                          {}
func (stubLayer) finished()                                         {}
func (stubLayer) extra(byte, byte, []byte) bool                     { return false }

// checkCtl fails unless pkt is a well-formed control packet whose
// options (for the configure codes of an automaton's packet) walk.
func checkCtl(t *testing.T, what string, pkt []byte, options bool) {
	t.Helper()
	code, _, data, ok := ctlPacket(pkt)
	if !ok || int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) {
		t.Fatalf("%s: malformed control packet %x", what, pkt)
	}
	if options && code >= confReq && code <= confRej && walkOptions(data, func(byte, []byte) error { return nil }) != nil {
		t.Fatalf("%s: malformed options in %x", what, pkt)
	}
}

// FuzzFSMInput: in every state the automaton takes any control packet
// without panicking, refuses exactly the malformed ones (a bad length,
// or a Configure-Request whose options do not walk), stays in a known
// state, and what it sends is well-formed and bounded.
func FuzzFSMInput(f *testing.F) {
	f.Add(uint8(stOpened), []byte{confReq, 1, 0, 8, 1, 4, 5, 212})
	f.Add(uint8(stReqSent), []byte{confAck, 0, 0, 4})
	f.Add(uint8(stAckSent), []byte{confNak, 0, 0, 7, 1, 3, 5})
	f.Add(uint8(stOpened), []byte{termReq, 3, 0, 4})
	f.Add(uint8(stOpened), []byte{99, 3, 0, 6, 1, 2})
	f.Add(uint8(stClosing), []byte{codeRej, 3, 0, 5, confReq})
	f.Add(uint8(stOpened), []byte{confReq, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, state uint8, pkt []byte) {
		var sent [][]byte
		fm := newFSM(protoLCP, stubLayer{}, func(_ uint16, p []byte) { sent = append(sent, p) }, defaultFSMParams())
		fm.state = fsmState(state % uint8(len(stateNames)))
		now := time.Unix(1e9, 0)
		err := fm.input(now, pkt)
		malformed := len(pkt) < 4 || binary.BigEndian.Uint16(pkt[2:]) < 4 || int(binary.BigEndian.Uint16(pkt[2:])) > len(pkt)
		if malformed != (err != nil) && !(err != nil && pkt[0] == confReq) {
			t.Fatalf("state %v, packet %x: error %v, malformed %v", fsmState(state%uint8(len(stateNames))), pkt, err, malformed)
		}
		if int(fm.state) >= len(stateNames) {
			t.Fatalf("state %d after %x", fm.state, pkt)
		}
		for _, p := range sent {
			if len(p) > 1500 {
				t.Fatalf("sent %d bytes in answer to %d", len(p), len(pkt))
			}
			checkCtl(t, "sent", p, true)
		}
	})
}

// FuzzAuthInput: PAP and CHAP packets, in the authentication phase and
// with the session up, never panic, and the answers (a CHAP response)
// are well-formed session frames (or the PADT of a failure).
func FuzzAuthInput(f *testing.F) {
	f.Add(false, false, []byte{papAuthAck, 1, 0, 5, 0})
	f.Add(false, false, []byte{papAuthNak, 1, 0, 9, 4, 'n', 'o', 'p', 'e'})
	f.Add(true, false, []byte{chapChall, 7, 0, 10, 4, 1, 2, 3, 4, 'x'})
	f.Add(true, true, []byte{chapChall, 8, 0, 6, 200, 1})
	f.Add(true, true, []byte{chapFailure, 8, 0, 7, 'b', 'y', 'e'})
	f.Fuzz(func(t *testing.T, chap, up bool, p []byte) {
		var sent [][]byte
		e := newEngine(testConfigOK(t), func(b []byte) { sent = append(sent, b) })
		e.now = time.Unix(1e9, 0)
		e.ac = acOffer{mac: [6]byte{2, 0, 0, 0, 0xac, 1}, name: "isp"}
		e.startSession(0x42, 0)
		e.lcpL.auth = protoPAP
		if chap {
			e.lcpL.auth = protoCHAP
		}
		e.lcp.state = stOpened
		e.lcpUp()
		if up {
			e.authOK()
		}
		sent = nil
		if chap {
			e.chapInput(p)
		} else {
			e.papInput(p)
		}
		if code, _, data, ok := ctlPacket(p); ok && len(data) > len(p)-4 {
			t.Fatalf("ctlPacket: code %d with %d bytes of data from a %d-byte packet", code, len(data), len(p))
		}
		for _, fr := range sent {
			if binary.BigEndian.Uint16(fr[12:]) == EtherTypeDiscovery { // the PADT of a failure
				if d, err := parseDiscovery(fr); err != nil || d.code != codePADT || d.sessionID != 0x42 {
					t.Fatalf("sent %x: %v, want a PADT of session 0x42", fr, err)
				}
				continue
			}
			id, proto, pkt, ok := ParseSessionHeader(fr[ethHeaderLen:])
			if !ok || id != 0x42 {
				t.Fatalf("sent %x: not a frame of session 0x42", fr)
			}
			if proto == protoCHAP || proto == protoPAP {
				checkCtl(t, "auth answer", pkt, false)
			}
		}
	})
}
