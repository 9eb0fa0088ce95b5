package pppoe

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func opts(o ...[]byte) []byte {
	var b []byte
	for _, x := range o {
		b = append(b, x...)
	}
	return b
}

func opt(typ byte, val ...byte) []byte { return appendOption(nil, typ, val) }

// TestLCPRequest: how the client answers the peer's LCP options.
func TestLCPRequest(t *testing.T) {
	const ours = 0x11223344
	tests := []struct {
		name      string
		noUser    bool
		req       []byte
		nakOK     bool
		wantCode  byte
		wantReply []byte
	}{
		{name: "mru, pap, magic", req: opts(opt(1, 5, 212), opt(3, 0xc0, 0x23), opt(5, 1, 2, 3, 4)), wantCode: confAck},
		{name: "chap md5", req: opt(3, 0xc2, 0x23, 5), wantCode: confAck},
		{name: "ms-chap naks toward chap-md5", req: opt(3, 0xc2, 0x23, 0x81), nakOK: true, wantCode: confNak, wantReply: opt(3, 0xc2, 0x23, 5)},
		{name: "eap naks", req: opt(3, 0xc2, 0x27), nakOK: true, wantCode: confNak, wantReply: opt(3, 0xc2, 0x23, 5)},
		{name: "auth without credentials is refused", noUser: true, req: opt(3, 0xc0, 0x23), wantCode: confRej, wantReply: opt(3, 0xc0, 0x23)},
		{name: "unknown options rejected", req: opts(opt(1, 5, 212), opt(2, 0, 0, 0, 0), opt(7), opt(8)), wantCode: confRej, wantReply: opts(opt(2, 0, 0, 0, 0), opt(7), opt(8))},
		{name: "malformed mru rejected", req: opt(1, 5), wantCode: confRej, wantReply: opt(1, 5)},
		{name: "tiny mru naked", req: opt(1, 0, 20), nakOK: true, wantCode: confNak, wantReply: opt(1, 0, 128)},
		{name: "past max-failure a nak becomes a reject", req: opt(1, 0, 20), wantCode: confRej, wantReply: opt(1, 0, 128)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfigOK(t)
			if tt.noUser {
				cfg.User = ""
			}
			e := newEngine(cfg, func([]byte) {})
			l := &lcpLayer{e: e, maxMRU: 1492, wantMRU: 1492, sendMRU: true, sendMag: true, magic: ours}
			code, reply := l.checkRequest(tt.req, nil, tt.nakOK)
			if code != tt.wantCode || !cmp.Equal(reply, tt.wantReply) {
				t.Errorf("code %d reply %x, want %d %x", code, reply, tt.wantCode, tt.wantReply)
			}
		})
	}
}

// TestLCPMagicLoop: a request carrying our own magic number is Nak'ed
// with another and we pick a new one; repeated, the link counts as
// looped back.
func TestLCPMagicLoop(t *testing.T) {
	e := newEngine(testConfigOK(t), func([]byte) {})
	l := &lcpLayer{e: e, maxMRU: 1492, wantMRU: 1492, sendMag: true, magic: 0x11223344}
	code, reply := l.checkRequest(opt(5, 0x11, 0x22, 0x33, 0x44), nil, true)
	if code != confNak || len(reply) != 6 || binary.BigEndian.Uint32(reply[2:]) == 0x11223344 {
		t.Errorf("code %d reply %x: want a Nak with another magic", code, reply)
	}
	if l.magic == 0x11223344 || l.loops != 1 {
		t.Errorf("our magic %#x, loops %d: want a new magic and one loop", l.magic, l.loops)
	}
}

// TestLCPNakAndReject: how the client adjusts its request.
func TestLCPNakAndReject(t *testing.T) {
	e := newEngine(testConfigOK(t), func([]byte) {})
	l := &lcpLayer{e: e, maxMRU: 1500, wantMRU: 1500, sendMRU: true, sendMag: true, magic: 1}
	l.gotNak(opts(opt(1, 5, 212), opt(5, 0, 0, 0, 1)))
	if l.wantMRU != 1492 || l.magic == 1 {
		t.Errorf("after Nak: MRU %d magic %#x", l.wantMRU, l.magic)
	}
	l.gotNak(opt(1, 0x10, 0)) // above what we can receive: ignored
	if l.wantMRU != 1492 {
		t.Errorf("Nak to 4096 moved the MRU to %d", l.wantMRU)
	}
	l.gotRej(opts(opt(1, 5, 212), opt(5, 0, 0, 0, 1)))
	if got := l.addOptions(nil); len(got) != 0 {
		t.Errorf("after Reject the request still has %x", got)
	}
}

// TestIPCPOptions: the peer's Naks give us the address and the DNS
// servers; a Reject of the DNS options stops asking for them.
func TestIPCPOptions(t *testing.T) {
	e := newEngine(testConfigOK(t), func([]byte) {})
	l := newIPCP(e)
	if got, want := l.addOptions(nil), opts(opt(3, 0, 0, 0, 0), opt(129, 0, 0, 0, 0), opt(131, 0, 0, 0, 0)); !cmp.Equal(got, want) {
		t.Errorf("first request %x, want %x", got, want)
	}
	l.gotNak(opts(opt(3, 10, 0, 0, 2), opt(129, 1, 1, 1, 1)))
	l.gotRej(opt(131, 0, 0, 0, 0))
	if got, want := l.addOptions(nil), opts(opt(3, 10, 0, 0, 2), opt(129, 1, 1, 1, 1)); !cmp.Equal(got, want) {
		t.Errorf("request after Nak/Reject %x, want %x", got, want)
	}
	for _, tt := range []struct {
		req       []byte
		wantCode  byte
		wantReply []byte
	}{
		{opt(3, 10, 0, 0, 1), confAck, nil},
		{opt(3, 0, 0, 0, 0), confRej, opt(3, 0, 0, 0, 0)},
		{opts(opt(3, 10, 0, 0, 1), opt(2, 0, 0x2d, 15, 1)), confRej, opt(2, 0, 0x2d, 15, 1)},
	} {
		code, reply := l.checkRequest(tt.req, nil, true)
		if code != tt.wantCode || !cmp.Equal(reply, tt.wantReply) {
			t.Errorf("request %x: code %d reply %x, want %d %x", tt.req, code, reply, tt.wantCode, tt.wantReply)
		}
	}
}

// TestProtocolReject: unknown protocols, and IPv6CP when IPv6 is off, get
// an LCP Protocol-Reject; the data protocols do not.
func TestProtocolReject(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	s.up()
	var rejected []uint16
	n := len(s.sent)
	for _, proto := range []uint16{0x80fd, protoIPv6CP, ProtoIPv4, ProtoIPv6, 0x4021} {
		ac.sendPPP(proto, confReq, 1, nil)
	}
	s.runFor(time.Second, nil)
	for _, f := range s.sent[n:] {
		if _, proto, p, ok := ParseSessionHeader(f[ethHeaderLen:]); ok && proto == protoLCP && p[0] == protoRej {
			rejected = append(rejected, binary.BigEndian.Uint16(p[4:]))
		}
	}
	if diff := cmp.Diff([]uint16{0x80fd, protoIPv6CP, 0x4021}, rejected); diff != "" {
		t.Errorf("protocol-rejected (-want +got):\n%s", diff)
	}
	if s.phase() != PhaseUp {
		t.Errorf("phase %v", s.phase())
	}
}

// TestPeerRejectsIPv6CP: a Protocol-Reject of IPv6CP leaves the session up
// on IPv4.
func TestPeerRejectsIPv6CP(t *testing.T) {
	ac := newAC("isp", 1)
	cfg := testConfig()
	cfg.IPv6 = true
	s := newSim(t, cfg, ac)
	s.up()
	ac.sendPPP(protoLCP, protoRej, 9, []byte{0x80, 0x57, confReq, 1, 0, 4})
	s.runFor(time.Minute, nil)
	st := s.e.status()
	if st.Phase != PhaseUp || !st.LocalIPv4.IsValid() || s.e.ipv6cp.state != stStopped {
		t.Errorf("phase %v, IPv4 %v, IPv6CP %v: want up on IPv4 with IPv6CP stopped", st.Phase, st.LocalIPv4, s.e.ipv6cp.state)
	}
}

// TestEchoAnswered: the peer's Echo-Request gets a reply with our magic
// number and its data.
func TestEchoAnswered(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	s.up()
	n := len(s.sent)
	ac.sendPPP(protoLCP, echoReq, 42, []byte{0xa1, 0xb2, 0xc3, 0xd4, 'h', 'i'})
	s.runFor(10*time.Millisecond, nil)
	var got []byte
	for _, f := range s.sent[n:] {
		if _, proto, p, ok := ParseSessionHeader(f[ethHeaderLen:]); ok && proto == protoLCP && p[0] == echoRep {
			got = p
		}
	}
	want := binary.BigEndian.AppendUint32([]byte{echoRep, 42, 0, 10}, s.e.lcpL.magic)
	want = append(want, 'h', 'i')
	if !cmp.Equal(got, want) {
		t.Errorf("echo reply %x, want %x", got, want)
	}
}
