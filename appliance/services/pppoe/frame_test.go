package pppoe

import (
	"bytes"
	"testing"
)

func TestSessionHeader(t *testing.T) {
	payload := []byte{0x45, 0, 0, 20, 1, 2, 3, 4}
	b := make([]byte, SessionHeaderLen+len(payload)+6) // Ethernet padding after
	PutSessionHeader(b, 0x1234, ProtoIPv4, len(payload))
	copy(b[SessionHeaderLen:], payload)
	want := []byte{0x11, 0x00, 0x12, 0x34, 0x00, 0x0a, 0x00, 0x21}
	if !bytes.Equal(b[:SessionHeaderLen], want) {
		t.Errorf("header %x, want %x", b[:SessionHeaderLen], want)
	}
	id, proto, p, ok := ParseSessionHeader(b)
	if !ok || id != 0x1234 || proto != ProtoIPv4 || !bytes.Equal(p, payload) {
		t.Errorf("parsed id %#x proto %#x payload %x ok %v", id, proto, p, ok)
	}
	bad := map[string][]byte{
		"short":          b[:7],
		"discovery code": append([]byte{0x11, codePADT}, b[2:]...),
		"version 2":      append([]byte{0x21}, b[1:]...),
		"length past":    append(append([]byte{}, b[:4]...), 0x01, 0x00, 0, 0x21),
		"length 1":       {0x11, 0, 0, 1, 0, 1, 0, 0x21},
	}
	for name, f := range bad {
		if _, _, _, ok := ParseSessionHeader(f); ok {
			t.Errorf("%s: accepted %x", name, f)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		PutSessionHeader(b, 1, ProtoIPv6, len(payload))
		ParseSessionHeader(b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per header, want 0", allocs)
	}
}

func TestParseDiscoveryRefuses(t *testing.T) {
	ok := newDiscovery([6]byte(clientMAC), [6]byte{2, 0, 0, 0, 0, 1}, codePADO, 0).tag(tagACName, []byte("isp"))
	many := newDiscovery([6]byte(clientMAC), [6]byte{2, 0, 0, 0, 0, 1}, codePADO, 0)
	for range maxDiscoveryTags + 1 {
		many.tag(tagVendorSpecific, nil)
	}
	f := ok.frame()
	tests := map[string][]byte{
		"short":             f[:ethHeaderLen+5],
		"length past frame": append(append([]byte{}, f[:ethHeaderLen+4]...), 0xff, 0xff),
		"too many tags":     many.frame(),
		"bad max payload":   newDiscovery([6]byte(clientMAC), [6]byte{2}, codePADS, 1).tag(tagPPPMaxPayload, []byte{1}).frame(),
	}
	// The frame one byte short of its last tag, the PPPoE length still
	// claiming it.
	tests["tag past the end"] = f[:len(f)-1]
	for name, frame := range tests {
		if _, err := parseDiscovery(frame); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	d, err := parseDiscovery(f)
	if err != nil || string(d.acName) != "isp" || d.code != codePADO {
		t.Errorf("good PADO: %+v, %v", d, err)
	}
}
