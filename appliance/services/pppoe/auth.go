package pppoe

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"time"
)

// PAP (RFC 1334 section 2.2) and CHAP (RFC 1994 section 4) codes.
const (
	papAuthReq  = 1
	papAuthAck  = 2
	papAuthNak  = 3
	chapChall   = 1
	chapResp    = 2
	chapSuccess = 3
	chapFailure = 4

	papRetry       = 3 * time.Second
	papMaxRequests = 10
	authTimeout    = 30 * time.Second
	maxMessage     = 128 // bytes of a peer's message kept in a reason
)

// authState is the authentication phase (RFC 1661 section 3.5): we are the
// authenticatee, with PAP or CHAP-MD5 as LCP negotiated.
type authState struct {
	proto    uint16
	done     bool
	papID    byte
	papSent  int
	papNext  time.Time // next PAP retransmission
	deadline time.Time // the phase fails if not done by then
}

// startAuth begins authenticating with the protocol LCP agreed.
func (e *engine) startAuth() {
	e.auth = authState{proto: e.lcpL.auth, deadline: e.now.Add(authTimeout)}
	if e.auth.proto == protoPAP {
		e.sendPAP()
	}
}

func (e *engine) sendPAP() {
	u, p := e.cfg.User, e.cfg.Password
	b := []byte{papAuthReq, e.auth.papID, 0, 0, byte(len(u))}
	b = append(b, u...)
	b = append(append(b, byte(len(p))), p...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	e.auth.papSent++
	e.auth.papNext = e.now.Add(papRetry)
	e.sendPPP(protoPAP, b)
}

// authTick retransmits PAP requests and fails a phase that took too long.
func (e *engine) authTick() {
	a := &e.auth
	if e.phase != PhaseAuth || a.done {
		return
	}
	if !e.now.Before(a.deadline) {
		e.authFailed("authentication timed out")
		return
	}
	if a.proto == protoPAP && !a.papNext.IsZero() && !e.now.Before(a.papNext) {
		if a.papSent >= papMaxRequests {
			e.authFailed("pap: no answer")
			return
		}
		e.sendPAP()
	}
}

func (e *engine) authWake() time.Time {
	if e.phase != PhaseAuth || e.auth.done {
		return time.Time{}
	}
	if e.auth.proto == protoPAP && e.auth.papNext.Before(e.auth.deadline) {
		return e.auth.papNext
	}
	return e.auth.deadline
}

// papInput takes a PAP packet from the authenticator.
func (e *engine) papInput(p []byte) {
	code, id, data, ok := ctlPacket(p)
	if !ok || e.auth.proto != protoPAP || e.auth.done || id != e.auth.papID {
		return
	}
	msg := ""
	if len(data) >= 1 && int(data[0]) <= len(data)-1 {
		msg = printable(data[1 : 1+int(data[0])])
	}
	switch code {
	case papAuthAck:
		e.authOK()
	case papAuthNak:
		e.authFailed("pap: authentication refused: " + msg)
	}
}

// chapInput takes a CHAP packet; a Challenge may come again while the
// session is up (RFC 1994 section 4.1), and a Failure then ends it.
func (e *engine) chapInput(p []byte) {
	code, id, data, ok := ctlPacket(p)
	if !ok || e.auth.proto != protoCHAP || !e.lcpOpened() {
		return
	}
	switch code {
	case chapChall:
		if len(data) < 1 || int(data[0]) == 0 || int(data[0]) > len(data)-1 {
			return
		}
		h := md5.New()
		h.Write([]byte{id})
		h.Write([]byte(e.cfg.Password))
		h.Write(data[1 : 1+int(data[0])])
		b := []byte{chapResp, id, 0, 0, md5.Size}
		b = h.Sum(b)
		b = append(b, e.cfg.User...)
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		e.sendPPP(protoCHAP, b)
	case chapSuccess:
		if !e.auth.done && e.phase == PhaseAuth {
			e.authOK()
		}
	case chapFailure:
		e.authFailed("chap: authentication refused: " + printable(data))
	}
}

// ctlPacket splits a PPP control packet (code, identifier, length) and cuts
// it to its length.
func ctlPacket(p []byte) (code, id byte, data []byte, ok bool) {
	if len(p) < 4 {
		return 0, 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(p[2:]))
	if n < 4 || n > len(p) {
		return 0, 0, nil, false
	}
	return p[0], p[1], p[4:n], true
}

func (e *engine) authOK() {
	e.auth.done = true
	e.log.Info("pppoe: authenticated", "proto", fmt.Sprintf("%#04x", e.auth.proto))
	e.startNetwork()
}

func (e *engine) authFailed(reason string) {
	e.auth.done = true
	e.drop(reason, true, true)
}

// printable keeps a peer's message short and printable for logs and the
// status.
func printable(b []byte) string {
	b = truncate(b, maxMessage)
	r := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '?'
		}
		r[i] = c
	}
	return string(r)
}
