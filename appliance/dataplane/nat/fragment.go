package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
)

// maxFragments bounds the fragments of one packet: a 9000-byte packet
// into the smallest MTU (576) makes 17.
const maxFragments = 32

// ipFlagDF and ipFlagMF are the IPv4 flags in the flags/offset word.
const (
	ipFlagDF = 0x4000
	ipFlagMF = 0x2000
)

// needsFragments reports whether the IPv4 packet in the untagged frame b
// is larger than mtu (it is then without DF: newChecks answered DF ones).
func needsFragments(b []byte, mtu int) bool {
	return len(b) >= frame.EthernetHeaderLen+20 &&
		int(binary.BigEndian.Uint16(b[frame.EthernetHeaderLen+2:])) > mtu
}

// fragment splits the IPv4 packet of the untagged frame b (Ethernet
// addresses and the translation done, L4 checksum right for the whole
// datagram) into fragments of at most mtu bytes (RFC 791 §3.2,
// RFC 1812 §4.2.2.7): the first keeps all options, later ones only those
// with the copied flag; offsets continue the packet's own (a fragment is
// split into fragments of the same datagram), MF is set on all but the
// last unless the packet had it. The fragments after the first are put
// into the outbox for port; the first is written over b, which fragment
// returns shortened. It returns the reason to drop the packet instead when
// the outbox cannot take the fragments (room for extra besides them) or
// the header is inconsistent.
func (w *Worker) fragment(port int, b []byte, mtu, extra int) ([]byte, Reason) {
	const eth = frame.EthernetHeaderLen
	ihl := int(b[eth]&0xf) * 4
	total := int(binary.BigEndian.Uint16(b[eth+2:]))
	if ihl < 20 || total < ihl || eth+total > len(b) {
		return nil, ReasonMalformed
	}
	fo := binary.BigEndian.Uint16(b[eth+6:])
	off0, mf := int(fo&0x1fff)*8, fo&ipFlagMF != 0
	hdr := b[eth : eth+ihl]
	var later [60]byte
	lihl := copiedOptions(later[:], hdr)
	data := b[eth+ihl : eth+total]
	first := (mtu - ihl) &^ 7
	step := (mtu - lihl) &^ 7
	if first < 8 || step < 8 {
		return nil, ReasonTooBig
	}
	n := 1 + (len(data)-first+step-1)/step
	if n > maxFragments || len(w.out)+n-1+extra > cap(w.out) || len(w.freeBuf) < n-1 {
		return nil, ReasonQueueFull
	}
	for at := first; at < len(data); at += step {
		end := min(at+step, len(data))
		bi, _ := w.allocBuf()
		o := w.bufs[bi]
		copy(o[:eth], b[:eth])
		copy(o[eth:], later[:lihl])
		k := eth + lihl + copy(o[eth+lihl:], data[at:end])
		fragHeader(o[eth:eth+lihl], lihl, k-eth, off0+at, end < len(data) || mf)
		w.push(port, bi, k)
		w.c.fragmentsOut.Add(1)
	}
	fragHeader(hdr, ihl, ihl+first, off0, true)
	w.c.fragmentsOut.Add(1)
	return b[:eth+ihl+first], ReasonNone
}

// fragHeader sets a fragment's header fields: IHL (from hlen), total
// length, offset (bytes), MF, and the checksum.
func fragHeader(h []byte, hlen, total, off int, mf bool) {
	h[0] = 0x40 | byte(hlen/4)
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	fo := binary.BigEndian.Uint16(h[6:])&ipFlagDF | uint16(off/8)
	if mf {
		fo |= ipFlagMF
	}
	binary.BigEndian.PutUint16(h[6:], fo)
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], frame.IPv4HeaderChecksum(h))
}

// copiedOptions writes to dst the 20-byte base of header h followed by its
// options that have the copied flag (RFC 791: security, source routes),
// padded to 4 bytes, and returns the length.
func copiedOptions(dst []byte, h []byte) int {
	n := copy(dst, h[:20])
	for i := 20; i < len(h); {
		t := h[i]
		if t == 0 { // end of options
			break
		}
		if t == 1 { // no-op
			i++
			continue
		}
		if i+1 >= len(h) || h[i+1] < 2 || i+int(h[i+1]) > len(h) {
			break
		}
		l := int(h[i+1])
		if t&0x80 != 0 {
			n += copy(dst[n:], h[i:i+l])
		}
		i += l
	}
	for n%4 != 0 {
		dst[n] = 0
		n++
	}
	return n
}
