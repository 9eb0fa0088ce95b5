package pppoeac

import (
	"encoding/binary"
	"sync"
	"time"
)

// EtherTypes, codes, tags and PPP protocols it speaks.
const (
	etherDiscovery = 0x8863
	etherSession   = 0x8864

	codePADI = 0x09
	codePADO = 0x07
	codePADR = 0x19
	codePADS = 0x65
	codePADT = 0xa7

	tagServiceName = 0x0101
	tagACName      = 0x0102
	tagHostUniq    = 0x0103

	protoLCP  = 0xc021
	protoPAP  = 0xc023
	protoIPCP = 0x8021

	confReq    = 1
	confAck    = 2
	confNak    = 3
	termReq    = 5
	termAck    = 6
	protoRej   = 8
	echoReq    = 9
	echoRep    = 10
	papAuthReq = 1
	papAuthAck = 2

	lcpOptMRU   = 1
	lcpOptAuth  = 3
	lcpOptMagic = 5
	ipcpOptAddr = 3
	ipcpOptDNS1 = 129
	ipcpOptDNS2 = 131
)

// Config is the AC's session.
type Config struct {
	MAC     [6]byte // the AC's
	Name    string  // AC-Name
	Session uint16  // the session ID it hands out, 1..0xfffe
	// Addr is the client's IPv4 address, Peer the AC's, DNS the servers
	// IPCP names.
	Addr, Peer, DNS [4]byte
}

// AC answers a client's discovery and PPP control frames (Input) with
// frames it hands to send. Its methods are safe for concurrent use.
type AC struct {
	cfg  Config
	send func([]byte)

	mu       sync.Mutex
	client   [6]byte
	up       bool // a session (PADS sent)
	id       byte
	reqAt    time.Time // when our last LCP request went out
	lcpAcked bool      // our LCP request acknowledged
	ipcpUp   bool
	echoes   int
}

// New returns an AC that sends its frames with send.
func New(cfg Config, send func([]byte)) *AC { return &AC{cfg: cfg, send: send} }

// Echoes is how many LCP echo requests it answered.
func (a *AC) Echoes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.echoes
}

// Input takes a frame from the client's side.
func (a *AC) Input(f []byte) {
	if len(f) < 20 || f[14] != 0x11 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	dst := [6]byte(f[0:6])
	if dst != a.cfg.MAC && dst != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		return
	}
	n := int(binary.BigEndian.Uint16(f[18:]))
	if 20+n > len(f) {
		return
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherDiscovery:
		a.discovery([6]byte(f[6:12]), f[15], binary.BigEndian.Uint16(f[16:]), f[20:20+n])
	case etherSession:
		if a.up && binary.BigEndian.Uint16(f[16:]) == a.cfg.Session && n >= 2 {
			a.ppp(binary.BigEndian.Uint16(f[20:]), f[22:20+n])
		}
	}
}

// resend is how long an LCP request waits for its Ack before it is sent
// again: a request that overtook the client's Ack of the one before would
// renegotiate an open link (RFC 1661), taking the session down.
const resend = 3 * time.Second

// Tick resends our LCP request when it is unanswered.
func (a *AC) Tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.up && !a.lcpAcked && time.Since(a.reqAt) >= resend {
		a.lcpReq()
	}
}

func (a *AC) discovery(src [6]byte, code byte, sid uint16, tags []byte) {
	var svc, uniq []byte
	for len(tags) >= 4 {
		t, l := binary.BigEndian.Uint16(tags), int(binary.BigEndian.Uint16(tags[2:]))
		if 4+l > len(tags) {
			return
		}
		switch t {
		case tagServiceName:
			svc = tags[4 : 4+l]
		case tagHostUniq:
			uniq = tags[4 : 4+l]
		}
		tags = tags[4+l:]
	}
	reply := func(code byte, sid uint16, tags ...tag) {
		b := append(src[:], a.cfg.MAC[:]...)
		b = binary.BigEndian.AppendUint16(b, etherDiscovery)
		b = append(b, 0x11, code)
		b = binary.BigEndian.AppendUint16(b, sid)
		at := len(b)
		b = append(b, 0, 0)
		for _, t := range tags {
			if t.v == nil && t.t == tagHostUniq {
				continue
			}
			b = binary.BigEndian.AppendUint16(b, t.t)
			b = binary.BigEndian.AppendUint16(b, uint16(len(t.v)))
			b = append(b, t.v...)
		}
		binary.BigEndian.PutUint16(b[at:], uint16(len(b)-at-2))
		a.send(b)
	}
	switch code {
	case codePADI:
		reply(codePADO, 0, tag{tagACName, []byte(a.cfg.Name)}, tag{tagServiceName, svc}, tag{tagHostUniq, uniq})
	case codePADR:
		a.client, a.up, a.lcpAcked, a.ipcpUp = src, true, false, false
		reply(codePADS, a.cfg.Session, tag{tagServiceName, svc}, tag{tagHostUniq, uniq})
		a.lcpReq()
	case codePADT:
		if sid == a.cfg.Session {
			a.up = false
		}
	}
}

type tag struct {
	t uint16
	v []byte
}

// sendPPP sends a control packet of proto in the session.
func (a *AC) sendPPP(proto uint16, code, id byte, data []byte) {
	b := append(a.client[:], a.cfg.MAC[:]...)
	b = binary.BigEndian.AppendUint16(b, etherSession)
	b = append(b, 0x11, 0)
	b = binary.BigEndian.AppendUint16(b, a.cfg.Session)
	b = binary.BigEndian.AppendUint16(b, uint16(2+4+len(data)))
	b = binary.BigEndian.AppendUint16(b, proto)
	b = append(b, code, id)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(data)))
	a.send(append(b, data...))
}

func (a *AC) lcpReq() {
	a.id++
	opts := []byte{lcpOptMRU, 4, 0x05, 0xd4, lcpOptAuth, 4, 0xc0, 0x23, lcpOptMagic, 6, 0xac, 0x0c, 0xac, 0x0c}
	a.sendPPP(protoLCP, confReq, a.id, opts)
	a.reqAt = time.Now()
}

func (a *AC) ppp(proto uint16, p []byte) {
	if len(p) < 4 {
		return
	}
	code, id, n := p[0], p[1], int(binary.BigEndian.Uint16(p[2:]))
	if n < 4 || n > len(p) {
		return
	}
	data := p[4:n]
	switch proto {
	case protoLCP:
		switch code {
		case confReq:
			a.sendPPP(protoLCP, confAck, id, data)
		case confAck:
			if id == a.id {
				a.lcpAcked = true
			}
		case echoReq:
			if len(data) >= 4 {
				a.echoes++
				a.sendPPP(protoLCP, echoRep, id, append([]byte{0xac, 0x0c, 0xac, 0x0c}, data[4:]...))
			}
		case termReq:
			a.sendPPP(protoLCP, termAck, id, nil)
			a.up = false
		}
	case protoPAP:
		if code == papAuthReq {
			a.sendPPP(protoPAP, papAuthAck, id, []byte{0})
			a.sendPPP(protoIPCP, confReq, 1, []byte{ipcpOptAddr, 6, a.cfg.Peer[0], a.cfg.Peer[1], a.cfg.Peer[2], a.cfg.Peer[3]})
		}
	case protoIPCP:
		if code == confReq {
			a.ipcp(id, data)
		}
	default: // IPv6CP and the rest: rejected
		a.sendPPP(protoLCP, protoRej, a.id+100, append(binary.BigEndian.AppendUint16(nil, proto), p[:n]...))
	}
}

// ipcp answers the client's IPCP request: a Nak with the address and
// DNS servers it must take, an Ack once it asks for them.
func (a *AC) ipcp(id byte, data []byte) {
	var nak []byte
	for d := data; len(d) >= 2 && int(d[1]) >= 2 && int(d[1]) <= len(d); d = d[d[1]:] {
		want, ok := map[byte][4]byte{ipcpOptAddr: a.cfg.Addr, ipcpOptDNS1: a.cfg.DNS, ipcpOptDNS2: a.cfg.DNS}[d[0]]
		if ok && d[1] == 6 && [4]byte(d[2:6]) != want {
			nak = append(nak, d[0], 6, want[0], want[1], want[2], want[3])
		}
	}
	if nak != nil {
		a.sendPPP(protoIPCP, confNak, id, nak)
		return
	}
	a.sendPPP(protoIPCP, confAck, id, data)
	a.ipcpUp = true
}
