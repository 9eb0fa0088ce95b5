// Package capture records a port's frames into pcapng files: a kernel (BPF) filter, an AF_PACKET socket of its own and bounds on count, size and time.
package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// pcapng block types and options (draft-ietf-opsawg-pcapng).
const (
	blockSHB  = 0x0A0D0D0A
	blockIDB  = 0x00000001
	blockEPB  = 0x00000006
	byteMagic = 0x1A2B3C4D

	optEnd       = 0
	optShbApp    = 4
	optIfName    = 2
	optIfTsresol = 9

	// LinkEthernet is LINKTYPE_ETHERNET.
	LinkEthernet = 1
)

// Writer writes a pcapng file with one section and one interface.
type Writer struct {
	w       io.Writer
	snaplen int
	written int64
	buf     []byte
}

// NewWriter writes the section header and the interface description
// (Ethernet, nanosecond timestamps) and returns the writer.
func NewWriter(w io.Writer, ifName string, snaplen int, app string) (*Writer, error) {
	pw := &Writer{w: w, snaplen: snaplen}
	var shb []byte
	shb = binary.LittleEndian.AppendUint32(shb, byteMagic)
	shb = binary.LittleEndian.AppendUint16(shb, 1) // major
	shb = binary.LittleEndian.AppendUint16(shb, 0) // minor
	shb = binary.LittleEndian.AppendUint64(shb, ^uint64(0))
	shb = appendOption(shb, optShbApp, []byte(app))
	shb = appendOption(shb, optEnd, nil)
	if err := pw.block(blockSHB, shb); err != nil {
		return nil, err
	}
	var idb []byte
	idb = binary.LittleEndian.AppendUint16(idb, LinkEthernet)
	idb = binary.LittleEndian.AppendUint16(idb, 0)
	idb = binary.LittleEndian.AppendUint32(idb, uint32(snaplen))
	idb = appendOption(idb, optIfName, []byte(ifName))
	idb = appendOption(idb, optIfTsresol, []byte{9}) // 10^-9 s
	idb = appendOption(idb, optEnd, nil)
	if err := pw.block(blockIDB, idb); err != nil {
		return nil, err
	}
	return pw, nil
}

func pad4(n int) int { return (4 - n%4) % 4 }

func appendOption(b []byte, code uint16, v []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, pad4(len(v)))...)
}

// block writes one block: type, total length, body, total length.
func (pw *Writer) block(typ uint32, body []byte) error {
	total := 12 + len(body)
	b := pw.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(total))
	b = append(b, body...)
	b = binary.LittleEndian.AppendUint32(b, uint32(total))
	pw.buf = b
	n, err := pw.w.Write(b)
	pw.written += int64(n)
	if err != nil {
		return fmt.Errorf("pcapng: %w", err)
	}
	return nil
}

// Written is the number of bytes written so far.
func (pw *Writer) Written() int64 { return pw.written }

// PacketSize is what WritePacket adds to the file for a frame of n bytes.
func (pw *Writer) PacketSize(n int) int64 {
	n = min(n, pw.snaplen)
	return int64(32 + n + pad4(n))
}

// WritePacket writes one frame (cut to the snap length) received at t;
// orig is its length on the wire.
func (pw *Writer) WritePacket(t time.Time, frame []byte, orig int) error {
	data := frame[:min(len(frame), pw.snaplen)]
	ts := uint64(t.UnixNano())
	body := make([]byte, 0, 20+len(data)+3)
	body = binary.LittleEndian.AppendUint32(body, 0) // interface 0
	body = binary.LittleEndian.AppendUint32(body, uint32(ts>>32))
	body = binary.LittleEndian.AppendUint32(body, uint32(ts))
	body = binary.LittleEndian.AppendUint32(body, uint32(len(data)))
	body = binary.LittleEndian.AppendUint32(body, uint32(orig))
	body = append(body, data...)
	body = append(body, make([]byte, pad4(len(data)))...)
	return pw.block(blockEPB, body)
}

// Packet is a frame read back from a pcapng file.
type Packet struct {
	Time time.Time
	Data []byte
	Orig int
}

// File is what Read found in a pcapng file.
type File struct {
	LinkType  uint16
	Snaplen   uint32
	Interface string
	Packets   []Packet
}

// ErrFormat is returned (wrapped) for a file that is not well-formed pcapng.
var ErrFormat = errors.New("pcapng: malformed")

// Read parses a little-endian pcapng file of one section with one
// interface with nanosecond (or the default microsecond) timestamps, as
// Writer writes them; unknown blocks are skipped.
func Read(b []byte) (*File, error) {
	f := &File{}
	tsres := uint64(1e6)
	seenSHB, seenIDB := false, false
	for len(b) > 0 {
		if len(b) < 12 {
			return nil, fmt.Errorf("%w: %d bytes left, less than a block", ErrFormat, len(b))
		}
		typ := binary.LittleEndian.Uint32(b)
		total := int(binary.LittleEndian.Uint32(b[4:]))
		if total < 12 || total%4 != 0 || total > len(b) {
			return nil, fmt.Errorf("%w: block length %d (%d bytes left)", ErrFormat, total, len(b))
		}
		if binary.LittleEndian.Uint32(b[total-4:]) != uint32(total) {
			return nil, fmt.Errorf("%w: block lengths differ", ErrFormat)
		}
		body := b[8 : total-4]
		b = b[total:]
		switch {
		case typ == blockSHB:
			if len(body) < 16 || binary.LittleEndian.Uint32(body) != byteMagic {
				return nil, fmt.Errorf("%w: section header", ErrFormat)
			}
			seenSHB = true
		case !seenSHB:
			return nil, fmt.Errorf("%w: no section header first", ErrFormat)
		case typ == blockIDB:
			if len(body) < 8 || seenIDB {
				return nil, fmt.Errorf("%w: interface description", ErrFormat)
			}
			seenIDB = true
			f.LinkType = binary.LittleEndian.Uint16(body)
			f.Snaplen = binary.LittleEndian.Uint32(body[4:])
			opts, err := options(body[8:])
			if err != nil {
				return nil, err
			}
			f.Interface = string(opts[optIfName])
			if r, ok := opts[optIfTsresol]; ok && len(r) == 1 && r[0]&0x80 == 0 && r[0] <= 9 {
				tsres = 1
				for range r[0] {
					tsres *= 10
				}
			}
		case typ == blockEPB:
			p, err := readPacket(body, tsres, seenIDB)
			if err != nil {
				return nil, err
			}
			f.Packets = append(f.Packets, p)
		}
	}
	if !seenSHB {
		return nil, fmt.Errorf("%w: empty", ErrFormat)
	}
	return f, nil
}

func readPacket(body []byte, tsres uint64, haveIDB bool) (Packet, error) {
	if len(body) < 20 || !haveIDB || binary.LittleEndian.Uint32(body) != 0 {
		return Packet{}, fmt.Errorf("%w: enhanced packet block", ErrFormat)
	}
	ts := uint64(binary.LittleEndian.Uint32(body[4:]))<<32 | uint64(binary.LittleEndian.Uint32(body[8:]))
	capLen := int(binary.LittleEndian.Uint32(body[12:]))
	orig := int(binary.LittleEndian.Uint32(body[16:]))
	if capLen < 0 || capLen > len(body)-20 || orig < capLen {
		return Packet{}, fmt.Errorf("%w: captured length %d", ErrFormat, capLen)
	}
	sec, frac := ts/tsres, ts%tsres
	t := time.Unix(int64(sec), int64(frac*(1e9/tsres)))
	return Packet{Time: t, Data: append([]byte(nil), body[20:20+capLen]...), Orig: orig}, nil
}

func options(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for len(b) >= 4 {
		code := binary.LittleEndian.Uint16(b)
		n := int(binary.LittleEndian.Uint16(b[2:]))
		if code == optEnd {
			return out, nil
		}
		if 4+n+pad4(n) > len(b) {
			return nil, fmt.Errorf("%w: option %d of %d bytes", ErrFormat, code, n)
		}
		out[code] = b[4 : 4+n]
		b = b[4+n+pad4(n):]
	}
	return out, nil
}
