package pppoe

import (
	"encoding/binary"
	"time"
)

// LCP configuration options (RFC 1661 section 6).
const (
	lcpOptMRU   = 1
	lcpOptAuth  = 3
	lcpOptMagic = 5
	chapMD5     = 5 // CHAP algorithm MD5 (RFC 1994 section 3)
	minMRU      = 128
	maxLoops    = 5 // Configure-Requests with our own magic number before the link counts as looped back
)

// lcpLayer is LCP's part of the automaton: MRU, Magic-Number and the
// peer's Authentication-Protocol (RFC 1661 section 6, RFC 1994 section 3),
// plus echo keepalives and Protocol-Reject (section 5.7, 5.8).
type lcpLayer struct {
	e *engine

	maxMRU  uint16 // the most we can receive: 1492, or more with RFC 4638
	wantMRU uint16
	sendMRU bool
	magic   uint32
	sendMag bool

	// Committed when we Ack the peer's request.
	peerMRU   uint16
	peerMagic uint32
	auth      uint16 // protocol the peer wants us to authenticate with, 0 for none
	authNaks  int
	loops     int
	ackedMRU  uint16 // our MRU as the peer acknowledged it

	echoID      byte
	echoSent    time.Time
	echoPending bool
	echoFails   int
	nextEcho    time.Time
}

func (l *lcpLayer) addOptions(b []byte) []byte {
	if l.sendMRU {
		b = appendOption(b, lcpOptMRU, binary.BigEndian.AppendUint16(nil, l.wantMRU))
	}
	if l.sendMag {
		b = appendOption(b, lcpOptMagic, binary.BigEndian.AppendUint32(nil, l.magic))
	}
	return b
}

func (l *lcpLayer) checkRequest(opts, out []byte, nakOK bool) (byte, []byte) {
	var rej, nak []byte
	mru, magic, auth := uint16(1500), uint32(0), uint16(0)
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		switch {
		case typ == lcpOptMRU && len(val) == 2:
			mru = binary.BigEndian.Uint16(val)
			if mru < minMRU {
				nak = appendOption(nak, typ, binary.BigEndian.AppendUint16(nil, minMRU))
			}
		case typ == lcpOptMagic && len(val) == 4:
			magic = binary.BigEndian.Uint32(val)
			if magic == 0 || (l.sendMag && magic == l.magic) {
				if magic != 0 {
					l.loops++
					l.magic = l.e.random32() // RFC 1661 section 6.4: both sides pick anew
				}
				nak = appendOption(nak, typ, binary.BigEndian.AppendUint32(nil, l.e.random32()))
			}
		case typ == lcpOptAuth && len(val) >= 2:
			auth = binary.BigEndian.Uint16(val)
			switch {
			case !l.e.cfg.hasCredentials():
				rej = appendOption(rej, typ, val)
			case auth == protoPAP && len(val) == 2:
			case auth == protoCHAP && len(val) == 3 && val[2] == chapMD5:
			default:
				// Steer the peer to CHAP-MD5, then to PAP (RFC 1661 section 6.2).
				l.authNaks++
				if l.authNaks%2 == 1 {
					nak = appendOption(nak, typ, []byte{0xc2, 0x23, chapMD5})
				} else {
					nak = appendOption(nak, typ, []byte{0xc0, 0x23})
				}
			}
		default:
			rej = appendOption(rej, typ, val)
		}
		return nil
	})
	switch {
	case len(rej) > 0:
		return confRej, append(out, rej...)
	case len(nak) > 0 && !nakOK:
		return confRej, append(out, nak...)
	case len(nak) > 0:
		return confNak, append(out, nak...)
	}
	l.peerMRU, l.peerMagic, l.auth = mru, magic, auth
	return confAck, out
}

func (l *lcpLayer) gotAck(opts []byte) {
	l.ackedMRU = 1500
	if l.sendMRU {
		l.ackedMRU = l.wantMRU
	}
}

func (l *lcpLayer) gotNak(opts []byte) {
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		switch {
		case typ == lcpOptMRU && len(val) == 2:
			if v := binary.BigEndian.Uint16(val); v >= minMRU && v <= l.maxMRU {
				l.wantMRU = v
			}
			l.sendMRU = true
		case typ == lcpOptMagic && len(val) == 4:
			l.magic = l.e.random32()
			l.sendMag = true
		}
		return nil
	})
}

func (l *lcpLayer) gotRej(opts []byte) {
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		switch typ {
		case lcpOptMRU:
			l.sendMRU = false
		case lcpOptMagic:
			l.sendMag = false
		}
		return nil
	})
}

func (l *lcpLayer) up()       { l.e.lcpUp() }
func (l *lcpLayer) down()     { l.e.lcpDown() }
func (l *lcpLayer) started()  {}
func (l *lcpLayer) finished() { l.e.lcpFinished() }

func (l *lcpLayer) extra(code, id byte, data []byte) bool {
	e := l.e
	opened := e.lcp.state == stOpened
	switch code {
	case protoRej:
		if opened && len(data) >= 2 {
			e.protocolRejected(binary.BigEndian.Uint16(data))
		}
	case echoReq:
		if opened && len(data) >= 4 {
			reply := binary.BigEndian.AppendUint32(nil, l.ourMagic())
			reply = append(reply, truncate(data[4:], 1400)...)
			e.sendPPP(protoLCP, e.lcp.packet(echoRep, id, reply))
		}
	case echoRep:
		if opened && l.echoPending && id == l.echoID && len(data) >= 4 {
			if l.sendMag && binary.BigEndian.Uint32(data) == l.magic {
				e.looped() // our own echo request came back
				return true
			}
			l.echoPending, l.echoFails = false, 0
			e.st.EchoRTT = e.now.Sub(l.echoSent)
		}
	case discardRq:
	default:
		return false
	}
	return true
}

func (l *lcpLayer) ourMagic() uint32 {
	if l.sendMag {
		return l.magic
	}
	return 0
}

// echoTick sends the keepalive Echo-Request when it is due and counts the
// unanswered ones; it reports false when the link is dead.
func (l *lcpLayer) echoTick(now time.Time) bool {
	if l.nextEcho.IsZero() || now.Before(l.nextEcho) {
		return true
	}
	if l.echoPending {
		l.echoFails++
		if l.echoFails >= l.e.cfg.EchoFailures {
			return false
		}
	}
	l.echoID++
	l.echoPending, l.echoSent = true, now
	l.nextEcho = now.Add(l.e.cfg.EchoInterval)
	l.e.sendPPP(protoLCP, l.e.lcp.packet(echoReq, l.echoID, binary.BigEndian.AppendUint32(nil, l.ourMagic())))
	return true
}
