package pppoe

import "encoding/binary"

// EtherTypes of PPPoE (RFC 2516 section 4).
const (
	EtherTypeDiscovery = 0x8863
	EtherTypeSession   = 0x8864
)

// SessionHeaderLen is the PPPoE header (6 bytes) and the PPP protocol field
// (2 bytes) in front of every session payload.
const SessionHeaderLen = 8

// PPP protocol numbers.
const (
	ProtoIPv4   = 0x0021
	ProtoIPv6   = 0x0057
	protoIPCP   = 0x8021
	protoIPv6CP = 0x8057
	protoLCP    = 0xc021
	protoPAP    = 0xc023
	protoCHAP   = 0xc223
)

// PPPoE codes (RFC 2516 section 5).
const (
	codeSession = 0x00
	codePADO    = 0x07
	codePADI    = 0x09
	codePADR    = 0x19
	codePADS    = 0x65
	codePADT    = 0xa7
)

const (
	ethHeaderLen = 14
	pppoeHdrLen  = 6
	verType      = 0x11 // version 1, type 1
	// maxFrame bounds what Input keeps of a frame: an untagged Ethernet
	// frame with RFC 4638's larger payloads fits.
	maxFrame = 2048
)

var broadcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// PutSessionHeader writes the PPPoE session header and the PPP protocol into
// b[:SessionHeaderLen] for payloadLen bytes of PPP payload after them
// (RFC 2516 section 6). It allocates nothing; b must be at least
// SessionHeaderLen long.
func PutSessionHeader(b []byte, sessionID, proto uint16, payloadLen int) {
	_ = b[SessionHeaderLen-1]
	b[0] = verType
	b[1] = codeSession
	binary.BigEndian.PutUint16(b[2:], sessionID)
	binary.BigEndian.PutUint16(b[4:], uint16(payloadLen+2))
	binary.BigEndian.PutUint16(b[6:], proto)
}

// ParseSessionHeader reads a PPPoE session packet (the bytes after the
// Ethernet header): its session ID, PPP protocol and PPP payload, cut to
// the PPPoE length (Ethernet padding dropped). ok is false for anything but
// a well-formed session packet. It allocates nothing.
func ParseSessionHeader(b []byte) (sessionID, proto uint16, payload []byte, ok bool) {
	if len(b) < SessionHeaderLen || b[0] != verType || b[1] != codeSession {
		return 0, 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if n < 2 || pppoeHdrLen+n > len(b) {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[6:]), b[SessionHeaderLen : pppoeHdrLen+n], true
}

// putEth writes an Ethernet header into b[:14].
func putEth(b []byte, dst, src [6]byte, etherType uint16) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], etherType)
}

// sessionFrame builds an Ethernet frame carrying a PPP packet of proto in
// the session.
func sessionFrame(dst, src [6]byte, sessionID, proto uint16, payload []byte) []byte {
	f := make([]byte, ethHeaderLen+SessionHeaderLen+len(payload))
	putEth(f, dst, src, EtherTypeSession)
	PutSessionHeader(f[ethHeaderLen:], sessionID, proto, len(payload))
	copy(f[ethHeaderLen+SessionHeaderLen:], payload)
	return f
}
