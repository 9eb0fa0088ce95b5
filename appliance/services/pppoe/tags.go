package pppoe

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Discovery tags (RFC 2516 appendix A, RFC 4638 section 4).
const (
	tagEndOfList       = 0x0000
	tagServiceName     = 0x0101
	tagACName          = 0x0102
	tagHostUniq        = 0x0103
	tagACCookie        = 0x0104
	tagVendorSpecific  = 0x0105
	tagRelaySessionID  = 0x0110
	tagPPPMaxPayload   = 0x0120
	tagServiceNameErr  = 0x0201
	tagACSystemErr     = 0x0202
	tagGenericErr      = 0x0203
	maxDiscoveryTags   = 64 // more is garbage: a 1500-byte payload holds 375 empty tags
	maxDiscoveryLength = 1500 - pppoeHdrLen
)

// discovery is a parsed discovery packet (RFC 2516 section 5). Its byte
// slices point into the parsed frame: copy what is kept.
type discovery struct {
	code      byte
	sessionID uint16
	src       [6]byte

	hasServiceName bool
	serviceName    []byte
	hasACName      bool
	acName         []byte
	hostUniq       []byte
	hasHostUniq    bool
	cookie         []byte
	hasCookie      bool
	relay          []byte
	hasRelay       bool
	maxPayload     uint16 // 0: no PPP-Max-Payload tag

	errTag uint16 // the first error tag, 0 for none
	errMsg []byte
	tags   []byte // the whole tag list
}

var errShort = errors.New("short packet")

// parseDiscovery parses an Ethernet frame carrying a PPPoE discovery packet.
// It never panics and allocates nothing.
func parseDiscovery(frame []byte) (discovery, error) {
	var d discovery
	if len(frame) < ethHeaderLen+pppoeHdrLen {
		return d, errShort
	}
	if binary.BigEndian.Uint16(frame[12:]) != EtherTypeDiscovery {
		return d, errors.New("not a discovery frame")
	}
	copy(d.src[:], frame[6:12])
	p := frame[ethHeaderLen:]
	if p[0] != verType {
		return d, fmt.Errorf("version/type %#x", p[0])
	}
	d.code = p[1]
	d.sessionID = binary.BigEndian.Uint16(p[2:])
	n := int(binary.BigEndian.Uint16(p[4:]))
	if n > len(p)-pppoeHdrLen || n > maxDiscoveryLength {
		return d, fmt.Errorf("length %d beyond the frame", n)
	}
	d.tags = p[pppoeHdrLen : pppoeHdrLen+n]
	err := walkTags(d.tags, func(typ uint16, val []byte) error {
		switch typ {
		case tagServiceName:
			if !d.hasServiceName {
				d.hasServiceName, d.serviceName = true, val
			}
		case tagACName:
			if !d.hasACName {
				d.hasACName, d.acName = true, val
			}
		case tagHostUniq:
			if !d.hasHostUniq {
				d.hasHostUniq, d.hostUniq = true, val
			}
		case tagACCookie:
			if !d.hasCookie {
				d.hasCookie, d.cookie = true, val
			}
		case tagRelaySessionID:
			if !d.hasRelay {
				d.hasRelay, d.relay = true, val
			}
		case tagPPPMaxPayload:
			if len(val) != 2 {
				return fmt.Errorf("PPP-Max-Payload of %d bytes", len(val))
			}
			d.maxPayload = binary.BigEndian.Uint16(val)
		case tagServiceNameErr, tagACSystemErr, tagGenericErr:
			if d.errTag == 0 {
				d.errTag, d.errMsg = typ, val
			}
		}
		return nil
	})
	return d, err
}

// walkTags calls fn for each TLV of a discovery payload, stopping at
// End-Of-List. More than maxDiscoveryTags tags or a tag running past the
// payload is an error.
func walkTags(b []byte, fn func(typ uint16, val []byte) error) error {
	for i := 0; len(b) > 0; i++ {
		if i == maxDiscoveryTags {
			return errors.New("too many tags")
		}
		if len(b) < 4 {
			return errors.New("truncated tag header")
		}
		typ := binary.BigEndian.Uint16(b)
		l := int(binary.BigEndian.Uint16(b[2:]))
		if l > len(b)-4 {
			return fmt.Errorf("tag %#04x of %d bytes past the payload", typ, l)
		}
		if typ == tagEndOfList {
			return nil
		}
		if err := fn(typ, b[4:4+l]); err != nil {
			return err
		}
		b = b[4+l:]
	}
	return nil
}

// errTagName names a discovery error tag.
func errTagName(t uint16) string {
	switch t {
	case tagServiceNameErr:
		return "Service-Name-Error"
	case tagACSystemErr:
		return "AC-System-Error"
	case tagGenericErr:
		return "Generic-Error"
	}
	return fmt.Sprintf("tag %#04x", t)
}

// discoveryBuilder appends tags to a discovery frame.
type discoveryBuilder struct{ b []byte }

func newDiscovery(dst, src [6]byte, code byte, sessionID uint16) *discoveryBuilder {
	b := make([]byte, ethHeaderLen+pppoeHdrLen, 128)
	putEth(b, dst, src, EtherTypeDiscovery)
	b[ethHeaderLen] = verType
	b[ethHeaderLen+1] = code
	binary.BigEndian.PutUint16(b[ethHeaderLen+2:], sessionID)
	return &discoveryBuilder{b: b}
}

func (d *discoveryBuilder) tag(typ uint16, val []byte) *discoveryBuilder {
	d.b = binary.BigEndian.AppendUint16(d.b, typ)
	d.b = binary.BigEndian.AppendUint16(d.b, uint16(len(val)))
	d.b = append(d.b, val...)
	return d
}

func (d *discoveryBuilder) frame() []byte {
	binary.BigEndian.PutUint16(d.b[ethHeaderLen+4:], uint16(len(d.b)-ethHeaderLen-pppoeHdrLen))
	return d.b
}
