package pppoe

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"time"
)

// acDouble is a small access concentrator and PPP server for the tests:
// it answers discovery, negotiates LCP (MRU, magic, PAP or CHAP-MD5),
// authenticates, hands out an IPv4 address and DNS servers over IPCP and
// an interface identifier over IPv6CP, and answers echoes.
type acDouble struct {
	mac      [6]byte
	name     string
	services []string // offered Service-Names; nil offers ""
	cookie   []byte
	relay    []byte
	rfc4638  bool   // echo PPP-Max-Payload
	mruLimit uint16 // Nak a client MRU above this (0: 1492, or the PPP-Max-Payload)
	auth     uint16 // protoPAP, protoCHAP or 0
	user     string
	pass     string
	padsErr  uint16 // answer PADR with this error tag
	silent   bool   // answer nothing (a dead server)
	noPADO   bool
	addr     [4]byte // the client's
	peer     [4]byte
	dns1     [4]byte
	dns2     [4]byte
	ipv6     bool
	iid      [8]byte // ours
	clientID [8]byte // what we make the client use on a zero/colliding IID

	send func([]byte) // to the client

	// State.
	client     [6]byte
	session    uint16
	nextSess   uint16
	maxPayload uint16
	now        time.Time
	id         byte
	lcpAcked   bool // our LCP request acknowledged
	lcpAcking  bool // theirs acknowledged
	authed     bool
	chal       []byte
	chalID     byte
	ncpStarted bool
	reqResend  time.Time

	// Counters the tests read.
	padis, padrs, padts, echoes, authOKs, authFails int
	lastPADR                                        discovery
	lastPADRTags                                    []byte
	terms                                           int
}

func newAC(name string, mac byte) *acDouble {
	return &acDouble{
		mac: [6]byte{0x02, 0, 0, 0, 0xac, mac}, name: name, nextSess: 0x100 + uint16(mac),
		auth: protoPAP, user: "user", pass: "secret",
		addr: [4]byte{100, 64, 0, 7}, peer: [4]byte{100, 64, 0, 1},
		dns1: [4]byte{9, 9, 9, 9}, dns2: [4]byte{149, 112, 112, 112},
		iid: [8]byte{0x02, 0xac, 0, 0, 0, 0, 0, 1}, clientID: [8]byte{0x12, 0x34, 0, 0, 0, 0, 0, 0x99},
		cookie: []byte("cookie-" + name), relay: []byte{1, 2, 3},
	}
}

func (a *acDouble) wake() time.Time {
	if a.session != 0 && !a.lcpAcked {
		return a.reqResend
	}
	return time.Time{}
}

func (a *acDouble) tick(now time.Time) {
	a.now = now
	if a.session != 0 && !a.lcpAcked && !a.reqResend.IsZero() && !now.Before(a.reqResend) && !a.silent {
		a.sendLCPReq()
	}
}

func (a *acDouble) input(now time.Time, f []byte) {
	a.now = now
	if len(f) < ethHeaderLen || a.silent {
		return
	}
	dst := [6]byte(f[0:6])
	if dst != a.mac && dst != broadcast {
		return
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case EtherTypeDiscovery:
		a.discovery(f)
	case EtherTypeSession:
		id, proto, p, ok := ParseSessionHeader(f[ethHeaderLen:])
		if ok && id == a.session && id != 0 {
			a.ppp(proto, p)
		}
	}
}

func (a *acDouble) discovery(f []byte) {
	d, err := parseDiscovery(f)
	if err != nil {
		return
	}
	switch d.code {
	case codePADI:
		a.padis++
		if a.noPADO {
			return
		}
		b := newDiscovery(d.src, a.mac, codePADO, 0).tag(tagACName, []byte(a.name))
		svcs := a.services
		if svcs == nil {
			svcs = []string{""}
		}
		for _, s := range svcs {
			b.tag(tagServiceName, []byte(s))
		}
		b.tag(tagHostUniq, d.hostUniq).tag(tagACCookie, a.cookie).tag(tagRelaySessionID, a.relay)
		if a.rfc4638 && d.maxPayload > 0 {
			b.tag(tagPPPMaxPayload, binary.BigEndian.AppendUint16(nil, d.maxPayload))
		}
		a.send(b.frame())
	case codePADR:
		a.padrs++
		a.lastPADR = d
		a.lastPADRTags = append([]byte(nil), d.tags...)
		if !bytes.Equal(d.cookie, a.cookie) {
			return
		}
		if a.padsErr != 0 {
			a.send(newDiscovery(d.src, a.mac, codePADS, 0).tag(tagHostUniq, d.hostUniq).tag(a.padsErr, []byte("no such service")).frame())
			return
		}
		a.nextSess++
		a.session, a.client = a.nextSess, d.src
		a.lcpAcked, a.lcpAcking, a.authed, a.ncpStarted = false, false, false, false
		a.maxPayload = 0
		b := newDiscovery(d.src, a.mac, codePADS, a.session).tag(tagServiceName, d.serviceName).tag(tagHostUniq, d.hostUniq)
		if a.rfc4638 && d.maxPayload > 0 {
			a.maxPayload = d.maxPayload
			b.tag(tagPPPMaxPayload, binary.BigEndian.AppendUint16(nil, d.maxPayload))
		}
		a.send(b.frame())
		a.sendLCPReq()
	case codePADT:
		a.padts++
		if d.sessionID == a.session {
			a.session = 0
		}
	}
}

// padt ends the session from the AC's side.
func (a *acDouble) padt() {
	a.send(newDiscovery(a.client, a.mac, codePADT, a.session).tag(tagGenericErr, []byte("admin reset")).frame())
	a.session = 0
}

func (a *acDouble) sendPPP(proto uint16, code, id byte, data []byte) {
	p := []byte{code, id, 0, 0}
	p = append(p, data...)
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	a.send(sessionFrame(a.client, a.mac, a.session, proto, p))
}

func (a *acDouble) sendLCPReq() {
	a.id++
	opts := appendOption(nil, lcpOptMRU, binary.BigEndian.AppendUint16(nil, 1492))
	switch a.auth {
	case protoPAP:
		opts = appendOption(opts, lcpOptAuth, []byte{0xc0, 0x23})
	case protoCHAP:
		opts = appendOption(opts, lcpOptAuth, []byte{0xc2, 0x23, chapMD5})
	}
	opts = appendOption(opts, lcpOptMagic, []byte{0xa1, 0xb2, 0xc3, 0xd4})
	a.sendPPP(protoLCP, confReq, a.id, opts)
	a.reqResend = a.now.Add(3 * time.Second)
}

func (a *acDouble) ppp(proto uint16, p []byte) {
	code, id, data, ok := ctlPacket(p)
	if !ok {
		return
	}
	switch proto {
	case protoLCP:
		a.lcp(code, id, data)
	case protoPAP:
		if code != papAuthReq || len(data) < 1 {
			return
		}
		ul := int(data[0])
		if len(data) < 2+ul || int(data[1+ul]) != len(data)-2-ul {
			return
		}
		if string(data[1:1+ul]) == a.user && string(data[2+ul:]) == a.pass {
			a.authOKs++
			a.sendPPP(protoPAP, papAuthAck, id, []byte{0})
			a.authDone()
		} else {
			a.authFails++
			a.sendPPP(protoPAP, papAuthNak, id, append([]byte{9}, "bad login"...))
		}
	case protoCHAP:
		if code != chapResp || id != a.chalID || len(data) < 17 {
			return
		}
		h := md5.Sum(append(append([]byte{id}, a.pass...), a.chal...))
		if bytes.Equal(data[1:17], h[:]) && string(data[17:]) == a.user {
			a.authOKs++
			a.sendPPP(protoCHAP, chapSuccess, id, []byte("welcome"))
			a.authDone()
		} else {
			a.authFails++
			a.sendPPP(protoCHAP, chapFailure, id, []byte("bad login"))
		}
	case protoIPCP:
		a.ipcp(code, id, data)
	case protoIPv6CP:
		a.ipv6cp(code, id, data)
	}
}

func (a *acDouble) lcp(code, id byte, data []byte) {
	switch code {
	case confReq:
		var nak []byte
		limit := a.mruLimit
		if limit == 0 {
			limit = max(1492, a.maxPayload)
		}
		_ = walkOptions(data, func(typ byte, val []byte) error {
			if typ == lcpOptMRU && binary.BigEndian.Uint16(val) > limit {
				nak = appendOption(nak, typ, binary.BigEndian.AppendUint16(nil, limit))
			}
			return nil
		})
		if nak != nil {
			a.sendPPP(protoLCP, confNak, id, nak)
			return
		}
		a.sendPPP(protoLCP, confAck, id, data)
		a.lcpAcking = true
		a.lcpUp()
	case confAck:
		if id == a.id {
			a.lcpAcked = true
			a.lcpUp()
		}
	case echoReq:
		a.echoes++
		a.sendPPP(protoLCP, echoRep, id, append([]byte{0xa1, 0xb2, 0xc3, 0xd4}, data[4:]...))
	case termReq:
		a.terms++
		a.sendPPP(protoLCP, termAck, id, nil)
	}
}

func (a *acDouble) lcpUp() {
	if !a.lcpAcked || !a.lcpAcking {
		return
	}
	switch a.auth {
	case protoCHAP:
		a.challenge()
	case 0:
		a.authDone()
	}
}

// challenge sends a CHAP Challenge, at the start or during the session.
func (a *acDouble) challenge() {
	a.chalID++
	a.chal = bytes.Repeat([]byte{a.chalID}, 16)
	a.sendPPP(protoCHAP, chapChall, a.chalID, append(append([]byte{16}, a.chal...), "ac"...))
}

func (a *acDouble) authDone() {
	if a.ncpStarted {
		return
	}
	a.ncpStarted = true
	a.sendPPP(protoIPCP, confReq, 1, appendOption(nil, ipcpOptAddr, a.peer[:]))
	if a.ipv6 {
		a.sendPPP(protoIPv6CP, confReq, 1, appendOption(nil, ipv6cpOptIID, a.iid[:]))
	}
}

func (a *acDouble) ipcp(code, id byte, data []byte) {
	if code != confReq {
		return
	}
	var nak []byte
	_ = walkOptions(data, func(typ byte, val []byte) error {
		want := map[byte][4]byte{ipcpOptAddr: a.addr, ipcpOptDNS1: a.dns1, ipcpOptDNS2: a.dns2}[typ]
		if !bytes.Equal(val, want[:]) {
			nak = appendOption(nak, typ, want[:])
		}
		return nil
	})
	if nak != nil {
		a.sendPPP(protoIPCP, confNak, id, nak)
		return
	}
	a.sendPPP(protoIPCP, confAck, id, data)
}

func (a *acDouble) ipv6cp(code, id byte, data []byte) {
	if code == confNak { // keep ours: the client moves off a collision
		a.sendPPP(protoIPv6CP, confReq, id+1, appendOption(nil, ipv6cpOptIID, a.iid[:]))
	}
	if code != confReq {
		return
	}
	var nak []byte
	_ = walkOptions(data, func(typ byte, val []byte) error {
		if typ == ipv6cpOptIID && bytes.Equal(val, a.iid[:]) {
			nak = appendOption(nak, typ, a.clientID[:])
		}
		return nil
	})
	if nak != nil {
		a.sendPPP(protoIPv6CP, confNak, id, nak)
		return
	}
	a.sendPPP(protoIPv6CP, confAck, id, data)
}
