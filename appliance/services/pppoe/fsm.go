package pppoe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Control packet codes (RFC 1661 section 5).
const (
	confReq   = 1
	confAck   = 2
	confNak   = 3
	confRej   = 4
	termReq   = 5
	termAck   = 6
	codeRej   = 7
	protoRej  = 8
	echoReq   = 9
	echoRep   = 10
	discardRq = 11
)

// fsmState is a state of RFC 1661's option negotiation automaton
// (section 4.2).
type fsmState uint8

const (
	stInitial fsmState = iota
	stStarting
	stClosed
	stStopped
	stClosing
	stStopping
	stReqSent
	stAckRcvd
	stAckSent
	stOpened
)

var stateNames = [...]string{"Initial", "Starting", "Closed", "Stopped", "Closing", "Stopping", "Req-Sent", "Ack-Rcvd", "Ack-Sent", "Opened"}

func (s fsmState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// fsmLayer is what LCP, IPCP and IPv6CP add to the automaton: their
// options and the this-layer actions (RFC 1661 section 4.4).
type fsmLayer interface {
	// addOptions appends the options of our next Configure-Request.
	addOptions(b []byte) []byte
	// checkRequest judges the peer's Configure-Request options and returns
	// confAck, confNak or confRej with the reply's options appended to
	// out. With nakOK false (Max-Failure reached) it must not Nak.
	checkRequest(opts, out []byte, nakOK bool) (code byte, reply []byte)
	// gotAck takes the options the peer acknowledged (our request).
	gotAck(opts []byte)
	// gotNak and gotRej adjust our options after a Configure-Nak or
	// Configure-Reject of our request.
	gotNak(opts []byte)
	gotRej(opts []byte)
	up()       // tlu
	down()     // tld
	started()  // tls
	finished() // tlf
	// extra takes codes beyond Code-Reject (LCP's echo and friends); false
	// makes the automaton send a Code-Reject.
	extra(code, id byte, data []byte) bool
}

// fsmParams are the automaton's counters and timer (RFC 1661 section 4.6).
type fsmParams struct {
	restartTimer time.Duration // default 3 s
	maxTerminate int           // default 2
	maxConfigure int           // default 10
	maxFailure   int           // default 5
}

func defaultFSMParams() fsmParams {
	return fsmParams{restartTimer: 3 * time.Second, maxTerminate: 2, maxConfigure: 10, maxFailure: 5}
}

// fsm is RFC 1661's option negotiation automaton for one protocol. Its
// event methods take the current time, which runs the restart timer.
type fsm struct {
	proto  uint16
	layer  fsmLayer
	send   func(proto uint16, pkt []byte)
	params fsmParams

	state    fsmState
	nextID   byte
	reqID    byte   // identifier of our last Configure- or Terminate-Request
	lastReq  []byte // options of our last Configure-Request
	restart  int    // restart counter
	timer    time.Time
	failures int // Configure-Naks sent without an Ack between
	now      time.Time
}

func newFSM(proto uint16, layer fsmLayer, send func(uint16, []byte), p fsmParams) *fsm {
	return &fsm{proto: proto, layer: layer, send: send, params: p}
}

func (f *fsm) setState(s fsmState) {
	f.state = s
	if s < stClosing || s > stAckSent {
		f.timer = time.Time{}
	}
}

// deadline is when the restart timer fires, zero when it is stopped.
func (f *fsm) deadline() time.Time { return f.timer }

// Actions (RFC 1661 section 4.4).

func (f *fsm) irc(configure bool) {
	f.restart = f.params.maxTerminate
	if configure {
		f.restart = f.params.maxConfigure
		f.failures = 0
	}
}

func (f *fsm) zrc() {
	f.restart = 0
	f.timer = f.now.Add(f.params.restartTimer)
}

func (f *fsm) packet(code, id byte, data []byte) []byte {
	p := make([]byte, 4, 4+len(data))
	p[0], p[1] = code, id
	binary.BigEndian.PutUint16(p[2:], uint16(4+len(data)))
	return append(p, data...)
}

func (f *fsm) scr() {
	f.reqID = f.nextID
	f.nextID++
	f.lastReq = f.layer.addOptions(nil)
	f.send(f.proto, f.packet(confReq, f.reqID, f.lastReq))
	f.restart--
	f.timer = f.now.Add(f.params.restartTimer)
}

func (f *fsm) str() {
	f.reqID = f.nextID
	f.nextID++
	f.send(f.proto, f.packet(termReq, f.reqID, nil))
	f.restart--
	f.timer = f.now.Add(f.params.restartTimer)
}

func (f *fsm) sta(id byte) { f.send(f.proto, f.packet(termAck, id, nil)) }

// Events (RFC 1661 section 4.3).

// up is the lower layer coming up.
func (f *fsm) up(now time.Time) {
	f.now = now
	switch f.state {
	case stInitial:
		f.setState(stClosed)
	case stStarting:
		f.irc(true)
		f.scr()
		f.setState(stReqSent)
	}
}

// down is the lower layer going down.
func (f *fsm) down(now time.Time) {
	f.now = now
	switch f.state {
	case stClosed, stClosing:
		f.setState(stInitial)
	case stStopped:
		f.setState(stStarting)
		f.layer.started()
	case stStopping, stReqSent, stAckRcvd, stAckSent:
		f.setState(stStarting)
	case stOpened:
		f.setState(stStarting)
		f.layer.down()
	}
}

// open is the administrative Open.
func (f *fsm) open(now time.Time) {
	f.now = now
	switch f.state {
	case stInitial:
		f.setState(stStarting)
		f.layer.started()
	case stClosed:
		f.irc(true)
		f.scr()
		f.setState(stReqSent)
	case stClosing:
		f.setState(stStopping)
	}
}

// close is the administrative Close.
func (f *fsm) close(now time.Time) {
	f.now = now
	switch f.state {
	case stStarting:
		f.setState(stInitial)
		f.layer.finished()
	case stStopped:
		f.setState(stClosed)
	case stStopping:
		f.setState(stClosing)
	case stReqSent, stAckRcvd, stAckSent:
		f.irc(false)
		f.str()
		f.setState(stClosing)
	case stOpened:
		f.setState(stClosing) // before tld, so the layer sees it closing
		f.layer.down()
		f.irc(false)
		f.str()
	}
}

// tick fires the restart timer if it is due (TO+ or TO-).
func (f *fsm) tick(now time.Time) {
	if f.timer.IsZero() || now.Before(f.timer) {
		return
	}
	f.now = now
	f.timer = time.Time{}
	if f.restart > 0 {
		switch f.state {
		case stClosing, stStopping:
			f.str()
		case stReqSent, stAckRcvd:
			f.scr()
			f.setState(stReqSent)
		case stAckSent:
			f.scr()
		}
		return
	}
	switch f.state {
	case stClosing:
		f.setState(stClosed)
		f.layer.finished()
	case stStopping, stReqSent, stAckRcvd, stAckSent:
		f.setState(stStopped)
		f.layer.finished()
	}
}

// rxjBad is a catastrophic Code- or Protocol-Reject (RXJ-).
func (f *fsm) rxjBad(now time.Time) {
	f.now = now
	switch f.state {
	case stClosed, stClosing:
		f.setState(stClosed)
		f.layer.finished()
	case stStopped, stStopping, stReqSent, stAckRcvd, stAckSent:
		f.setState(stStopped)
		f.layer.finished()
	case stOpened:
		f.setState(stStopping)
		f.layer.down()
		f.irc(false)
		f.str()
	}
}

var errMalformed = errors.New("malformed control packet")

// input takes a received control packet of the protocol.
func (f *fsm) input(now time.Time, pkt []byte) error {
	f.now = now
	if len(pkt) < 4 {
		return errMalformed
	}
	code, id := pkt[0], pkt[1]
	n := int(binary.BigEndian.Uint16(pkt[2:]))
	if n < 4 || n > len(pkt) {
		return errMalformed
	}
	data := pkt[4:n]
	if f.state == stInitial || f.state == stStarting {
		return nil // the lower layer is not up: silently discard
	}
	switch code {
	case confReq:
		if err := walkOptions(data, func(byte, []byte) error { return nil }); err != nil {
			return err
		}
		f.rcr(id, data)
	case confAck:
		if id != f.reqID || !bytes.Equal(data, f.lastReq) {
			return nil
		}
		f.rca()
	case confNak, confRej:
		if id != f.reqID || walkOptions(data, func(byte, []byte) error { return nil }) != nil {
			return nil
		}
		f.rcn(code, data)
	case termReq:
		f.rtr(id)
	case termAck:
		f.rta()
	case codeRej:
		if len(data) > 0 && data[0] >= confReq && data[0] <= codeRej {
			f.rxjBad(now)
		}
	default:
		if !f.layer.extra(code, id, data) {
			f.send(f.proto, f.packet(codeRej, f.nextID, truncate(pkt[:n], 1400)))
			f.nextID++
		}
	}
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func (f *fsm) rcr(id byte, opts []byte) {
	switch f.state {
	case stClosed:
		f.sta(id)
		return
	case stClosing, stStopping:
		return
	case stStopped:
		f.irc(true)
		f.scr()
	case stOpened:
		f.setState(stReqSent)
		f.layer.down()
		f.scr()
	}
	code, reply := f.layer.checkRequest(opts, nil, f.failures < f.params.maxFailure)
	if code == confAck {
		f.failures = 0
		f.send(f.proto, f.packet(confAck, id, opts))
		switch f.state {
		case stAckRcvd:
			f.setState(stOpened)
			f.layer.up()
		default:
			f.setState(stAckSent)
		}
		return
	}
	if code == confNak {
		f.failures++
	}
	f.send(f.proto, f.packet(code, id, reply))
	if f.state != stAckRcvd {
		f.setState(stReqSent)
	}
}

func (f *fsm) rca() {
	f.layer.gotAck(f.lastReq)
	switch f.state {
	case stClosed, stStopped:
		f.sta(f.reqID)
	case stReqSent:
		f.irc(true)
		f.setState(stAckRcvd)
	case stAckRcvd:
		f.scr()
		f.setState(stReqSent)
	case stAckSent:
		f.irc(true)
		f.setState(stOpened)
		f.layer.up()
	case stOpened:
		f.setState(stReqSent)
		f.layer.down()
		f.scr()
	}
}

func (f *fsm) rcn(code byte, opts []byte) {
	switch f.state {
	case stClosed, stStopped:
		f.sta(f.reqID)
		return
	case stClosing, stStopping:
		return
	}
	if code == confNak {
		f.layer.gotNak(opts)
	} else {
		f.layer.gotRej(opts)
	}
	switch f.state {
	case stReqSent:
		f.irc(true)
		f.scr()
	case stAckRcvd:
		f.scr()
		f.setState(stReqSent)
	case stAckSent:
		f.irc(true)
		f.scr()
	case stOpened:
		f.setState(stReqSent)
		f.layer.down()
		f.scr()
	}
}

func (f *fsm) rtr(id byte) {
	switch f.state {
	case stReqSent, stAckRcvd, stAckSent:
		f.sta(id)
		f.setState(stReqSent)
	case stOpened:
		f.setState(stStopping)
		f.layer.down()
		f.zrc()
		f.sta(id)
	default:
		f.sta(id)
	}
}

func (f *fsm) rta() {
	switch f.state {
	case stClosing:
		f.setState(stClosed)
		f.layer.finished()
	case stStopping:
		f.setState(stStopped)
		f.layer.finished()
	case stAckRcvd:
		f.setState(stReqSent)
	case stOpened:
		f.setState(stReqSent)
		f.layer.down()
		f.scr()
	}
}

// walkOptions calls fn for each option of a Configure packet (RFC 1661
// section 6). An option shorter than its header or running past the data
// is an error; walkOptions never panics.
func walkOptions(b []byte, fn func(typ byte, val []byte) error) error {
	for len(b) > 0 {
		if len(b) < 2 {
			return errMalformed
		}
		l := int(b[1])
		if l < 2 || l > len(b) {
			return errMalformed
		}
		if err := fn(b[0], b[2:l]); err != nil {
			return err
		}
		b = b[l:]
	}
	return nil
}

// appendOption appends one option.
func appendOption(b []byte, typ byte, val []byte) []byte {
	return append(append(b, typ, byte(2+len(val))), val...)
}
