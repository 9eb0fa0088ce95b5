package pppoe

import (
	"bytes"
	"net/netip"
)

// IPCP options (RFC 1332 section 3, RFC 1877 section 1) and IPv6CP's
// (RFC 5072 section 4).
const (
	ipcpOptAddr  = 3
	ipcpOptDNS1  = 129
	ipcpOptDNS2  = 131
	ipv6cpOptIID = 1
)

// ipcpLayer negotiates our IPv4 address and the DNS servers: it asks
// 0.0.0.0 for each and takes the peer's Configure-Nak values.
type ipcpLayer struct {
	e                          *engine
	local, dns1, dns2, peer    [4]byte
	sendAddr, askDNS1, askDNS2 bool
}

func newIPCP(e *engine) *ipcpLayer {
	return &ipcpLayer{e: e, sendAddr: true, askDNS1: true, askDNS2: true}
}

func (l *ipcpLayer) addOptions(b []byte) []byte {
	if l.sendAddr {
		b = appendOption(b, ipcpOptAddr, l.local[:])
	}
	if l.askDNS1 {
		b = appendOption(b, ipcpOptDNS1, l.dns1[:])
	}
	if l.askDNS2 {
		b = appendOption(b, ipcpOptDNS2, l.dns2[:])
	}
	return b
}

func (l *ipcpLayer) checkRequest(opts, out []byte, _ bool) (byte, []byte) {
	var rej []byte
	var peer [4]byte
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		// The peer's own address is all we take; we assign nothing, so a
		// 0.0.0.0 request (asking us for one) is refused too.
		if typ == ipcpOptAddr && len(val) == 4 && !bytes.Equal(val, make([]byte, 4)) {
			copy(peer[:], val)
			return nil
		}
		rej = appendOption(rej, typ, val)
		return nil
	})
	if len(rej) > 0 {
		return confRej, append(out, rej...)
	}
	l.peer = peer
	return confAck, out
}

func (l *ipcpLayer) gotAck([]byte) {}

func (l *ipcpLayer) gotNak(opts []byte) {
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		if len(val) != 4 {
			return nil
		}
		switch typ {
		case ipcpOptAddr:
			copy(l.local[:], val)
			l.sendAddr = true
		case ipcpOptDNS1:
			copy(l.dns1[:], val)
		case ipcpOptDNS2:
			copy(l.dns2[:], val)
		}
		return nil
	})
}

func (l *ipcpLayer) gotRej(opts []byte) {
	_ = walkOptions(opts, func(typ byte, _ []byte) error {
		switch typ {
		case ipcpOptAddr:
			l.sendAddr = false
		case ipcpOptDNS1:
			l.askDNS1 = false
		case ipcpOptDNS2:
			l.askDNS2 = false
		}
		return nil
	})
}

func (l *ipcpLayer) up() {
	s := &l.e.st
	s.LocalIPv4, s.PeerIPv4 = netip.AddrFrom4(l.local), netip.AddrFrom4(l.peer)
	s.DNS1, s.DNS2 = addr4(l.dns1, l.askDNS1), addr4(l.dns2, l.askDNS2)
	l.e.ncpChanged()
}

func addr4(a [4]byte, asked bool) netip.Addr {
	if !asked || a == [4]byte{} {
		return netip.Addr{}
	}
	return netip.AddrFrom4(a)
}

func (l *ipcpLayer) down() {
	s := &l.e.st
	s.LocalIPv4, s.PeerIPv4, s.DNS1, s.DNS2 = netip.Addr{}, netip.Addr{}, netip.Addr{}, netip.Addr{}
	l.e.ncpChanged()
}

func (l *ipcpLayer) started()                      {}
func (l *ipcpLayer) finished()                     { l.e.ncpFinished() }
func (l *ipcpLayer) extra(byte, byte, []byte) bool { return false }

// ipv6cpLayer negotiates the interface identifiers of the link-local
// addresses (RFC 5072 section 4.1).
type ipv6cpLayer struct {
	e           *engine
	local, peer [8]byte
	sendIID     bool
}

func (l *ipv6cpLayer) addOptions(b []byte) []byte {
	if l.sendIID {
		b = appendOption(b, ipv6cpOptIID, l.local[:])
	}
	return b
}

func (l *ipv6cpLayer) checkRequest(opts, out []byte, nakOK bool) (byte, []byte) {
	var rej, nak []byte
	var peer [8]byte
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		if typ != ipv6cpOptIID || len(val) != 8 {
			rej = appendOption(rej, typ, val)
			return nil
		}
		copy(peer[:], val)
		if peer == [8]byte{} || peer == l.local {
			// Zero or a collision with ours: suggest another (section 4.1).
			nak = appendOption(nak, typ, l.e.randomIID(l.local))
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
	l.peer = peer
	return confAck, out
}

func (l *ipv6cpLayer) gotAck([]byte) {}

func (l *ipv6cpLayer) gotNak(opts []byte) {
	_ = walkOptions(opts, func(typ byte, val []byte) error {
		if typ == ipv6cpOptIID && len(val) == 8 {
			var v [8]byte
			copy(v[:], val)
			if v == [8]byte{} || v == l.peer {
				copy(l.local[:], l.e.randomIID(l.peer))
			} else {
				l.local = v
			}
		}
		return nil
	})
}

func (l *ipv6cpLayer) gotRej(opts []byte) {
	_ = walkOptions(opts, func(typ byte, _ []byte) error {
		if typ == ipv6cpOptIID {
			l.sendIID = false
		}
		return nil
	})
}

func (l *ipv6cpLayer) up() {
	s := &l.e.st
	s.LocalIfaceID, s.PeerIfaceID = l.local, l.peer
	s.LocalLinkLocal, s.PeerLinkLocal = linkLocal(l.local), linkLocal(l.peer)
	l.e.ncpChanged()
}

func (l *ipv6cpLayer) down() {
	s := &l.e.st
	s.LocalIfaceID, s.PeerIfaceID = [8]byte{}, [8]byte{}
	s.LocalLinkLocal, s.PeerLinkLocal = netip.Addr{}, netip.Addr{}
	l.e.ncpChanged()
}

func (l *ipv6cpLayer) started()                      {}
func (l *ipv6cpLayer) finished()                     { l.e.ncpFinished() }
func (l *ipv6cpLayer) extra(byte, byte, []byte) bool { return false }

// linkLocal is fe80::/64 with the interface identifier.
func linkLocal(iid [8]byte) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	copy(a[8:], iid[:])
	return netip.AddrFrom16(a)
}

// eui64 is the modified EUI-64 interface identifier of a MAC address
// (RFC 4291 appendix A).
func eui64(mac [6]byte) [8]byte {
	return [8]byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
}
