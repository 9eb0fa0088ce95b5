package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
)

// nextState returns a connection's state after packet f in direction dir
// (0 original, 1 reply). valid is false for packets that do not belong:
// TCP flag combinations no stack sends, echo requests in the reply
// direction and replies in the original one. reopen reports a SYN from
// the originator of a closed TCP connection: the caller deletes the old
// entry and starts a new connection.
//
// TCP follows Linux conntrack without window tracking: SYN → SYN_SENT,
// SYN/ACK back → SYN_RECV, ACK → ESTABLISHED; a FIN moves to FIN_WAIT
// (from the originator) or CLOSE_WAIT (from the responder), the FIN of the
// other side to LAST_ACK, the final ACK to TIME_WAIT; RST closes.
func nextState(old uint32, dir int, f *frame.Frame) (next uint32, valid, reopen bool) {
	next = old
	if dir == 1 {
		next |= flagReplied
	}
	switch f.Proto {
	case frame.ProtoICMP:
		want := uint8(frame.ICMPEchoRequest)
		if dir == 1 {
			want = frame.ICMPEchoReply
		}
		return next, f.ICMP.Type == want, false
	case frame.ProtoTCP:
	default:
		return next, true, false
	}
	t := &f.TCP
	if !t.ValidFlags() {
		return old, false, false
	}
	st := old & stateMask
	flags := t.Flags
	ns := st
	switch {
	case flags&frame.TCPRst != 0:
		ns = stClose
	case flags&(frame.TCPSyn|frame.TCPAck) == frame.TCPSyn:
		if dir == 0 && (st == stTimeWait || st == stClose) {
			return old, true, true
		}
		if dir == 1 && st == stSynSent {
			ns = stSynRecv // simultaneous open
		}
	case flags&frame.TCPSyn != 0: // SYN/ACK
		if dir == 1 && (st == stSynSent || st == stSynRecv) {
			ns = stSynRecv
		}
	case flags&frame.TCPFin != 0:
		switch {
		case st == stSynRecv || st == stEstablished:
			ns = stFinWait
			if dir == 1 {
				ns = stCloseWait
			}
		case st == stFinWait && dir == 1, st == stCloseWait && dir == 0:
			ns = stLastAck
		}
	case flags&frame.TCPAck != 0:
		switch {
		case st == stSynRecv && dir == 0:
			ns = stEstablished
		case st == stLastAck:
			ns = stTimeWait
		}
	}
	return next&^stateMask | ns, true, false
}

// timeout returns the timeout (seconds) of a connection of proto in state.
func (s *snapshot) timeout(proto uint8, state uint32) uint32 {
	t := &s.timeouts
	var v int
	switch proto {
	case frame.ProtoTCP:
		switch state & stateMask {
		case stSynSent:
			v = t.TCPSynSent
		case stSynRecv:
			v = t.TCPSynRecv
		case stEstablished:
			v = t.TCPEstablished
		case stFinWait:
			v = t.TCPFinWait
		case stCloseWait:
			v = t.TCPCloseWait
		case stLastAck:
			v = t.TCPLastAck
		case stTimeWait:
			v = t.TCPTimeWait
		default:
			v = t.TCPClose
		}
	case frame.ProtoUDP:
		v = t.UDPUnreplied
		if state&flagReplied != 0 {
			v = t.UDPAssured
		}
	case frame.ProtoICMP:
		v = t.ICMP
	default:
		v = t.Generic
	}
	return uint32(v)
}

// clampMSS lowers the MSS option of the TCP SYN f to mss, fixing the TCP
// checksum incrementally. It reports whether it changed the option.
func clampMSS(b []byte, f *frame.Frame, mss uint16) bool {
	start := f.L4Off + frame.TCPHeaderLen
	opts := b[start:f.PayloadOff]
	for i := 0; i < len(opts); {
		kind := opts[i]
		if kind == 0 {
			return false
		}
		if kind == 1 {
			i++
			continue
		}
		if i+1 >= len(opts) {
			return false
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			return false
		}
		if kind == 2 && l == 4 {
			if binary.BigEndian.Uint16(opts[i+2:]) <= mss {
				return false
			}
			// The value may sit at an odd offset of the header: update
			// the aligned words around it.
			off := start + i + 2
			lo := off - (off-f.L4Off)&1
			hi := min(lo+4, f.PayloadOff)
			var before [4]byte
			n := copy(before[:], b[lo:hi])
			binary.BigEndian.PutUint16(b[off:], mss)
			c := frame.UpdateBytes(binary.BigEndian.Uint16(b[f.L4Off+16:]), before[:n], b[lo:hi])
			binary.BigEndian.PutUint16(b[f.L4Off+16:], c)
			f.TCP.Checksum = c
			return true
		}
		i += l
	}
	return false
}
