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
func nextState(old uint32, dir int, f *frame.Frame, sec uint32) (next uint32, valid, reopen bool) {
	next = old
	if dir == 1 && old&flagReplied == 0 {
		next |= flagReplied | (sec&0xffff)<<replyShift
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
		// Another protocol is assured once it is a stream: traffic at
		// least streamAfter seconds after the first reply (Linux's UDP
		// rule).
		if next&(flagReplied|flagAssured) == flagReplied && (sec-next>>replyShift)&0xffff >= streamAfter {
			next |= flagAssured
		}
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
			next |= flagAssured
		case st == stLastAck:
			ns = stTimeWait
		}
	}
	return next&^stateMask | ns, true, false
}

// streamAfter is how long after the first reply a packet makes a UDP (or
// other non-TCP) connection a stream, and so assured.
const streamAfter = 2

// timeout returns the timeout (seconds) of a connection of proto in state.
func (s *snapshot) timeout(proto uint8, state uint32) uint32 {
	t := &s.timeouts
	var v int
	switch proto {
	case frame.ProtoTCP:
		return s.tcpTimeouts[state&stateMask]
	case frame.ProtoUDP:
		// A single exchange (DNS) keeps the short timeout, as in Linux;
		// a stream the long one.
		v = t.UDPUnreplied
		if state&flagAssured != 0 {
			v = t.UDPAssured
		}
	case frame.ProtoICMP:
		v = t.ICMP
	default:
		v = t.Generic
	}
	return uint32(v)
}

// byState are t's TCP timeouts by connection state (entry.state &
// stateMask): TCPClose's for stClose and the values no TCP entry has.
func (t *Timeouts) byState() (a [stateMask + 1]uint32) {
	for i := range a {
		a[i] = uint32(t.TCPClose)
	}
	a[stSynSent], a[stSynRecv], a[stEstablished] = uint32(t.TCPSynSent), uint32(t.TCPSynRecv), uint32(t.TCPEstablished)
	a[stFinWait], a[stCloseWait], a[stLastAck] = uint32(t.TCPFinWait), uint32(t.TCPCloseWait), uint32(t.TCPLastAck)
	a[stTimeWait] = uint32(t.TCPTimeWait)
	return a
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

// What a RST is to a tracked connection (RFC 5961 §3, as Linux conntrack
// judges it).
const (
	rstExact    = iota // at the receiver's RCV.NXT: it ends the connection
	rstInWindow        // inside the receiver's window but not exact: forwarded (the receiver answers with a challenge ACK), the connection kept
	rstInvalid         // outside the window: spoofed or stale, dropped
)

// rstVerdict judges the RST f from direction dir of e, in state st (the
// state word, window scales included).
func (e *entry) rstVerdict(st uint32, dir int, f *frame.Frame) int {
	r := 1 - dir // the receiver
	want := e.ack[r].Load()
	if st&stateMask == stSynSent {
		// Nothing came back yet: a RST from the responder must
		// acknowledge the SYN (RFC 793 §3.4).
		if dir == 1 && f.TCP.Flags&frame.TCPAck != 0 && f.TCP.Ack == e.ack[1].Load() {
			return rstExact
		}
		return rstInvalid
	}
	if want == 0 {
		return rstExact // the receiver's sequence space is not known yet
	}
	switch d := f.TCP.Seq - want; {
	case d == 0:
		return rstExact
	case int32(d) > 0 && d < e.window(st, r):
		return rstInWindow
	}
	return rstInvalid
}

// window returns direction d's last advertised window in bytes.
func (e *entry) window(st uint32, d int) uint32 {
	return e.wins.Load() >> (16 * d) & 0xffff << winScale(st, d)
}

// winScale returns direction d's window scale shift: 0 unless both SYNs
// asked for scaling.
func winScale(st uint32, d int) uint32 {
	s0, s1 := st>>scaleShift&noScale, st>>(scaleShift+4)&noScale
	if s0 == noScale || s1 == noScale {
		return 0
	}
	return min(st>>(scaleShift+4*uint32(d))&noScale, 14)
}

// AckAdvance is the floor of how far one acknowledgment may move past
// the highest one tracked (see ackAhead).
const AckAdvance = 1 << 16

// ackAhead reports whether ack is a later acknowledgment than a that its
// sender could have sent: the other side cannot have sent more than the
// sender's window past a, so an ack further ahead (a damaged or forged
// segment; a random 32-bit value is "later" half the time) is not taken.
// Taking it would make every later legitimate ack look old and the
// receiver's RST out of window; and the highest-ack rule is not
// transitive over such values, so the outcome would depend on which path
// (the rings or the fast path, which tracks by the same rule) saw which
// frame. win is the sender's window in bytes (twice it is allowed, and
// at least AckAdvance, for a window that shrank or is not known yet).
func ackAhead(ack, a, win uint32) bool {
	d := ack - a
	return int32(d) > 0 && d <= max(2*win, AckAdvance)
}

// tcpTrack records what TCP packet f of direction dir tells of its
// sender: the highest acknowledgment (ackAhead) and its window. The
// caller holds the stripe lock of dir; st is the state word.
func (e *entry) tcpTrack(st uint32, dir int, f *frame.Frame) {
	t := &f.TCP
	if t.Flags&frame.TCPAck == 0 {
		return
	}
	if a := e.ack[dir].Load(); a == 0 || ackAhead(t.Ack, a, e.window(st, dir)) {
		e.ack[dir].Store(t.Ack)
	}
	shift := 16 * uint32(dir)
	for {
		old := e.wins.Load()
		next := old&^(0xffff<<shift) | uint32(t.Window)<<shift
		if old == next || e.wins.CompareAndSwap(old, next) {
			return
		}
	}
}

// synScale returns the state bits of the window scale option of a SYN
// from direction dir (RFC 7323 §2.2), noScale when it has none.
func synScale(b []byte, f *frame.Frame, dir int) uint32 {
	s := uint32(noScale)
	opts := b[f.L4Off+frame.TCPHeaderLen : f.PayloadOff]
	for i := 0; i < len(opts); {
		kind := opts[i]
		if kind == 0 {
			break
		}
		if kind == 1 {
			i++
			continue
		}
		if i+1 >= len(opts) {
			break
		}
		l := int(opts[i+1])
		if l < 2 || i+l > len(opts) {
			break
		}
		if kind == 3 && l == 3 {
			s = uint32(min(opts[i+2], 14))
			break
		}
		i += l
	}
	return s << (scaleShift + 4*uint32(dir))
}
