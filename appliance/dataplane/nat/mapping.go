package nat

import (
	"math/bits"
	"sync"

	"e1kbox/appliance/dataplane/frame"
)

// mappings are the endpoint-independent NAT mappings (RFC 4787): a LAN
// endpoint (address, port or ICMP identifier) has one NAT port for every
// destination while any of its connections lives. Each mapping counts the
// connections using it and is released with the last one. One lock: the
// mappings change only when connections are created or deleted.
type mappings struct {
	mu    sync.Mutex
	class [3]*portMap // TCP, UDP, ICMP
	rnd   uint64
}

// portMap is one protocol's NAT port space.
type portMap struct {
	byNAT [65536]mapping // indexed by NAT port
	index []uint64       // (LAN address, port) → hash<<32 | NAT port + 1, linear probing
	seed  uint64
}

type mapping struct {
	ip   uint32
	port uint16
	refs uint32 // connections using it; 0 means free
}

func newMappings(maxConns int, seed uint64) *mappings {
	n := 1
	for n < 2*min(maxConns, 65536) {
		n *= 2
	}
	m := &mappings{rnd: seed | 1}
	for i := range m.class {
		m.class[i] = &portMap{index: make([]uint64, n), seed: seed + uint64(i)*0x9e3779b97f4a7c15}
	}
	return m
}

func classOf(proto uint8) int {
	switch proto {
	case frame.ProtoTCP:
		return 0
	case frame.ProtoUDP:
		return 1
	case frame.ProtoICMP:
		return 2
	}
	return -1
}

// hash is the 32-bit hash of a LAN endpoint: the index keeps it beside
// each NAT port, so that a probe compares it without reading byNAT (a
// cache miss per slot at 2^16 mappings) and a shift after a removal finds
// an entry's home from it.
func (p *portMap) hash(ip uint32, port uint16) uint64 {
	hi, lo := bits.Mul64(uint64(ip)<<16|uint64(port)^p.seed, 0xa0761d6478bd642f)
	return (hi ^ lo) >> 32
}

func (p *portMap) homeOf(v uint64) int { return int(v>>32) & (len(p.index) - 1) }

// lookup returns the index slot holding (ip, port), or the empty slot
// where it would go, and the slot's value for it (without the NAT port).
func (p *portMap) lookup(ip uint32, port uint16) (pos int, tag uint64, found bool) {
	tag = p.hash(ip, port) << 32
	mask := len(p.index) - 1
	for pos = p.homeOf(tag); ; pos = (pos + 1) & mask {
		v := p.index[pos]
		if v == 0 {
			return pos, tag, false
		}
		if v&^0xffffffff == tag {
			if m := &p.byNAT[uint32(v)-1]; m.ip == ip && m.port == port {
				return pos, tag, true
			}
		}
	}
}

func (p *portMap) unindex(pos int) {
	mask := len(p.index) - 1
	for {
		p.index[pos] = 0
		j := pos
		for {
			j = (j + 1) & mask
			v := p.index[j]
			if v == 0 {
				return
			}
			k := p.homeOf(v)
			if pos <= j && pos < k && k <= j || pos > j && (pos < k || k <= j) {
				continue
			}
			p.index[pos] = v
			pos = j
			break
		}
	}
}

// acquire returns the NAT port for the LAN endpoint (ip, port) of proto
// and takes a reference on it: the existing mapping, else port itself
// when free (never 0, never a forwarded port), else a free port of
// [s.portMin, s.portMax] from a random start.
func (m *mappings) acquire(proto uint8, ip uint32, port uint16, s *snapshot) (uint16, bool) {
	c := classOf(proto)
	if c < 0 {
		return 0, false
	}
	p := m.class[c]
	m.mu.Lock()
	defer m.mu.Unlock()
	pos, tag, found := p.lookup(ip, port)
	if found {
		nat := uint32(p.index[pos]) - 1
		p.byNAT[nat].refs++
		return uint16(nat), true
	}
	usable := func(n uint16) bool {
		if n == 0 || p.byNAT[n].refs != 0 {
			return false
		}
		if c < 2 {
			if _, _, fw := s.forward(proto, n); fw {
				return false
			}
		}
		return true
	}
	nat, ok := port, usable(port)
	if !ok {
		span := uint32(s.portMax-s.portMin) + 1
		m.rnd ^= m.rnd << 13
		m.rnd ^= m.rnd >> 7
		m.rnd ^= m.rnd << 17
		off := uint32(m.rnd % uint64(span))
		for i := uint32(0); i < span; i++ {
			n := s.portMin + uint16((off+i)%span)
			if usable(n) {
				nat, ok = n, true
				break
			}
		}
		if !ok {
			return 0, false
		}
	}
	p.byNAT[nat] = mapping{ip: ip, port: port, refs: 1}
	p.index[pos] = tag | uint64(nat) + 1
	return nat, true
}

// internal returns the LAN endpoint of proto's live mapping with NAT port
// nat (TCP and UDP): where a hairpinned packet to the WAN address and that
// port goes (RFC 4787 REQ-9, RFC 5382 REQ-8).
func (m *mappings) internal(proto uint8, nat uint16) (ip uint32, port uint16, ok bool) {
	c := classOf(proto)
	if c < 0 || c > 1 {
		return 0, 0, false
	}
	m.mu.Lock()
	mp := m.class[c].byNAT[nat]
	m.mu.Unlock()
	return mp.ip, mp.port, mp.refs != 0
}

// release drops a reference on the mapping of NAT port nat.
func (m *mappings) release(proto uint8, nat uint16) {
	c := classOf(proto)
	if c < 0 {
		return
	}
	p := m.class[c]
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := &p.byNAT[nat]
	if mp.refs == 0 {
		return
	}
	if mp.refs--; mp.refs == 0 {
		if pos, _, found := p.lookup(mp.ip, mp.port); found {
			p.unindex(pos)
		}
		*mp = mapping{}
	}
}

// releaseConn releases the mapping a deleted connection held: masqueraded
// and hairpin connections hold the NAT port of their reply key.
func (m *mappings) releaseConn(kind uint8, keys [2]key) {
	if kind == kindSNAT || kind == kindHairpin {
		m.release(keys[1].proto(), keys[1].dport())
	}
}

// active returns the number of live mappings of proto (for tests and stats).
func (m *mappings) active(proto uint8) int {
	c := classOf(proto)
	if c < 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, v := range m.class[c].index {
		if v != 0 {
			n++
		}
	}
	return n
}
