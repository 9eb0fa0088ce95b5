package frame

import (
	"encoding/binary"
	"errors"
	"io"
)

// ErrNotTagged is returned when a VLAN tag is to be removed from an untagged frame.
var ErrNotTagged = errors.New("frame: no VLAN tag")

// InsertVLAN copies the frame src into dst with tag inserted as the outermost
// VLAN tag, right after the MAC addresses, and returns the length written
// (len(src)+4). A TPID of 0 means 802.1Q. dst may share its start with src
// (dst = src[:cap(src)]) to insert in place. It fails with ErrTruncated when
// src is shorter than an Ethernet header and io.ErrShortBuffer when dst is too
// small.
func InsertVLAN(dst, src []byte, tag VLANTag) (int, error) {
	if len(src) < EthernetHeaderLen {
		return 0, ErrTruncated
	}
	n := len(src) + VLANTagLen
	if len(dst) < n {
		return 0, io.ErrShortBuffer
	}
	if tag.TPID == 0 {
		tag.TPID = EtherTypeVLAN
	}
	// Move the tail first so that an in-place insert does not overwrite it.
	copy(dst[12+VLANTagLen:n], src[12:])
	copy(dst[:12], src[:12])
	binary.BigEndian.PutUint16(dst[12:], tag.TPID)
	binary.BigEndian.PutUint16(dst[14:], tag.TCI)
	return n, nil
}

// RemoveVLAN copies the frame src into dst without its outermost VLAN tag and
// returns the length written (len(src)-4) and the tag. dst may share its
// start with src to remove in place. It fails with ErrNotTagged, ErrTruncated
// or io.ErrShortBuffer.
func RemoveVLAN(dst, src []byte) (int, VLANTag, error) {
	tag, err := outerTag(src)
	if err != nil {
		return 0, VLANTag{}, err
	}
	n := len(src) - VLANTagLen
	if len(dst) < n {
		return 0, VLANTag{}, io.ErrShortBuffer
	}
	copy(dst[:12], src[:12])
	copy(dst[12:n], src[12+VLANTagLen:])
	return n, tag, nil
}

// StripVLAN removes the outermost VLAN tag of b in place by moving the MAC
// addresses 4 bytes forward, and returns the untagged frame (b[4:]) and the
// tag. It fails with ErrNotTagged or ErrTruncated.
func StripVLAN(b []byte) ([]byte, VLANTag, error) {
	tag, err := outerTag(b)
	if err != nil {
		return nil, VLANTag{}, err
	}
	copy(b[VLANTagLen:VLANTagLen+12], b[:12])
	return b[VLANTagLen:], tag, nil
}

// outerTag returns the outermost VLAN tag of the frame b.
func outerTag(b []byte) (VLANTag, error) {
	if len(b) < EthernetHeaderLen {
		return VLANTag{}, ErrTruncated
	}
	tpid := binary.BigEndian.Uint16(b[12:])
	if tpid != EtherTypeVLAN && tpid != EtherTypeQinQ {
		return VLANTag{}, ErrNotTagged
	}
	if len(b) < EthernetHeaderLen+VLANTagLen {
		return VLANTag{}, ErrTruncated
	}
	return VLANTag{TPID: tpid, TCI: binary.BigEndian.Uint16(b[14:])}, nil
}
