package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// PPPoE discovery (RFC 2516) codes and tags; RFC 4638's PPP-Max-Payload.
const (
	codePADI = 0x09
	codePADO = 0x07
	codePADR = 0x19
	codePADS = 0x65
	codePADT = 0xa7

	tagEndOfList       = 0x0000
	tagServiceName     = 0x0101
	tagACName          = 0x0102
	tagHostUniq        = 0x0103
	tagACCookie        = 0x0104
	tagRelaySessionID  = 0x0110
	tagPPPMaxPayload   = 0x0120
	tagServiceNameErr  = 0x0201
	tagGenericError    = 0x0203
	etherTypeDiscovery = 0x8863
	headerLen          = 6  // ver/type, code, session, length
	ethHeaderLen       = 14 // dst, src, EtherType
)

// tag is one TLV of a discovery packet.
type tag struct {
	Type  uint16
	Value []byte
}

// packet is a PPPoE discovery packet without its Ethernet header.
type packet struct {
	Code    uint8
	Session uint16
	Tags    []tag
}

var errShort = errors.New("short packet")

// parsePacket parses a discovery packet (the Ethernet payload); tags
// after End-Of-List are ignored, Value slices alias b.
func parsePacket(b []byte) (packet, error) {
	if len(b) < headerLen {
		return packet{}, errShort
	}
	if b[0] != 0x11 {
		return packet{}, fmt.Errorf("version/type %#x, want 0x11", b[0])
	}
	p := packet{Code: b[1], Session: binary.BigEndian.Uint16(b[2:])}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if headerLen+n > len(b) {
		return packet{}, fmt.Errorf("length %d beyond the frame's %d bytes: %w", n, len(b)-headerLen, errShort)
	}
	t := b[headerLen : headerLen+n]
	for len(t) > 0 {
		if len(t) < 4 {
			return packet{}, fmt.Errorf("truncated tag header: %w", errShort)
		}
		typ, l := binary.BigEndian.Uint16(t), int(binary.BigEndian.Uint16(t[2:]))
		if 4+l > len(t) {
			return packet{}, fmt.Errorf("tag %#04x of %d bytes beyond the payload: %w", typ, l, errShort)
		}
		if typ == tagEndOfList {
			break
		}
		p.Tags = append(p.Tags, tag{Type: typ, Value: t[4 : 4+l]})
		t = t[4+l:]
	}
	return p, nil
}

// find returns the first tag of type typ.
func (p *packet) find(typ uint16) (tag, bool) {
	for _, t := range p.Tags {
		if t.Type == typ {
			return t, true
		}
	}
	return tag{}, false
}

// marshal appends the packet to b (the Ethernet header already there).
func (p *packet) marshal(b []byte) []byte {
	n := 0
	for _, t := range p.Tags {
		n += 4 + len(t.Value)
	}
	b = append(b, 0x11, p.Code)
	b = binary.BigEndian.AppendUint16(b, p.Session)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for _, t := range p.Tags {
		b = binary.BigEndian.AppendUint16(b, t.Type)
		b = binary.BigEndian.AppendUint16(b, uint16(len(t.Value)))
		b = append(b, t.Value...)
	}
	return b
}

// frame is p in an Ethernet frame from src to dst.
func frame(dst, src [6]byte, p *packet) []byte {
	b := make([]byte, 0, ethHeaderLen+headerLen+64)
	b = append(append(b, dst[:]...), src[:]...)
	b = binary.BigEndian.AppendUint16(b, etherTypeDiscovery)
	return p.marshal(b)
}

// offer is what the access concentrator offers.
type offer struct {
	ACName  string
	Service string // the only Service-Name offered; "" = any the client asks for
	// MaxPayload is the largest PPP payload the AC allows: above 1492 it
	// supports RFC 4638 and echoes a client's PPP-Max-Payload (capped
	// to it); at 1492 or below it ignores the tag.
	MaxPayload int
}

// reply builds the PADO (for a PADI) or PADS (for a PADR, with session
// sid) answering req: the AC-Name (PADO), the Service-Name, Host-Uniq and
// Relay-Session-Id echoed, PPP-Max-Payload per o.MaxPayload. ok is false
// when the request asks for a service not offered: a PADI is then not
// answered, a PADR gets a PADS with session 0 and a Service-Name-Error.
func (o *offer) reply(req *packet, sid uint16) (resp packet, ok bool) {
	resp.Code = codePADO
	if req.Code == codePADR {
		resp.Code, resp.Session = codePADS, sid
	}
	svc, _ := req.find(tagServiceName)
	ok = o.Service == "" || len(svc.Value) == 0 || string(svc.Value) == o.Service
	if !ok {
		resp.Session = 0
		resp.Tags = append(resp.Tags, tag{Type: tagServiceNameErr, Value: svc.Value})
	} else {
		name := svc.Value
		if o.Service != "" {
			name = []byte(o.Service)
		}
		if resp.Code == codePADO {
			resp.Tags = append(resp.Tags, tag{Type: tagACName, Value: []byte(o.ACName)})
		}
		resp.Tags = append(resp.Tags, tag{Type: tagServiceName, Value: name})
	}
	for _, typ := range []uint16{tagHostUniq, tagRelaySessionID} {
		if t, found := req.find(typ); found {
			resp.Tags = append(resp.Tags, t)
		}
	}
	if t, found := req.find(tagPPPMaxPayload); found && ok && o.MaxPayload > 1492 && len(t.Value) == 2 {
		v := min(int(binary.BigEndian.Uint16(t.Value)), o.MaxPayload)
		resp.Tags = append(resp.Tags, tag{Type: tagPPPMaxPayload, Value: binary.BigEndian.AppendUint16(nil, uint16(v))})
	}
	return resp, ok
}
