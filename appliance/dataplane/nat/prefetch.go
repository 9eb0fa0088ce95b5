package nat

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
)

// Prefetch warms the caches for a frame the worker will Process a few
// frames later: pkt is the frame and inPort the port the engine will pass
// to Process with it. From a minimal parse of pkt it computes the
// connection key the lookup of an established packet will use and asks
// for the cache lines of that key's index slots; prefetchLag Prefetch
// calls later, when they have arrived, it reads them and asks for the
// cache lines of the entry they point to. The lookup then finds both in
// the cache instead of waiting for two dependent memory reads, and the
// fetches of several frames overlap. See the package documentation for
// how the engine calls it.
//
// It takes no lock, changes no shared state (no counters either), never
// fails and does not allocate. Frames the router would not look up (not
// unicast to the port's MAC, VLAN-tagged, not IPv4, later fragments, ICMP
// other than echo) and frames too short for their headers are ignored.
func (w *Worker) Prefetch(inPort int, pkt []byte) {
	s := w.r.cfg.Load()
	side, ok := s.sideOf(inPort)
	if !ok {
		return
	}
	var h uint64
	if k, ok := peekKey(pkt, side, &s.side[side].mac); ok {
		h = w.r.ct.hash(k)
	}
	w.pf.push(w.r.ct, h)
}

// prefetchLag is how many pushes after a key's slots the prefetcher asks
// for its entry: enough for the slots to arrive from memory while the
// worker processes other frames, fewer than the frames the engine
// prefetches ahead (prefetch distance in the package documentation).
const prefetchLag = 4

// prefetcher is a worker's two-stage prefetch pipeline: the hashes of the
// last prefetchLag keys whose slots were asked for.
type prefetcher struct {
	ring [prefetchLag]uint64 // 0: nothing to fetch
	n    uint32
}

// push starts the prefetch of the key with hash h (0 for a frame without
// one) and finishes the one started prefetchLag pushes ago: one call to
// prefetchPipe asks for the cache lines of h's stripe and probe slots and
// of the entry the old key's slots point to (entry 0 when there is no old
// key: a harmless fetch instead of a branch).
func (p *prefetcher) push(t *table, h uint64) {
	i := p.n % prefetchLag
	p.n++
	old := p.ring[i]
	p.ring[i] = h
	var e uint64
	if old != 0 {
		e = t.entryFor(old)
	}
	s := h & t.smask
	prefetchPipe(&t.stripes[s], &t.slots[int(s)*t.per+homeOf(h>>32, t.per)], &t.entries[e])
}

// peekKey returns the connection key the lookup of pkt, arriving on side
// at a port with MAC mac, would use (flowKey of its parse). ok is false
// when the frame gets no such lookup or is too short for its headers.
func peekKey(pkt []byte, side Side, mac *[6]byte) (k key, ok bool) {
	const eth = frame.EthernetHeaderLen
	if len(pkt) < eth+frame.IPv4HeaderLen || [6]byte(pkt[0:6]) != *mac ||
		binary.BigEndian.Uint16(pkt[12:]) != frame.EtherTypeIPv4 {
		return key{}, false
	}
	ip := pkt[eth:]
	hlen, tlen := int(ip[0]&0xf)*4, int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || hlen < frame.IPv4HeaderLen || tlen < hlen || tlen > len(ip) ||
		binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
		return key{}, false
	}
	src, dst, proto := binary.BigEndian.Uint32(ip[12:]), binary.BigEndian.Uint32(ip[16:]), ip[9]
	l4 := ip[hlen:tlen]
	var sport, dport uint16
	switch proto {
	case frame.ProtoTCP, frame.ProtoUDP:
		if proto == frame.ProtoTCP && len(l4) < frame.TCPHeaderLen || len(l4) < frame.UDPHeaderLen {
			return key{}, false
		}
		sport, dport = binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
	case frame.ProtoICMP:
		if len(l4) < frame.ICMPHeaderLen {
			return key{}, false
		}
		switch id := binary.BigEndian.Uint16(l4[4:]); l4[0] {
		case frame.ICMPEchoRequest:
			sport = id
		case frame.ICMPEchoReply:
			dport = id
		default:
			return key{}, false
		}
	}
	return mkKey(src, dst, sport, dport, proto, side), true
}

// Connections is the number of live connections (one atomic load): the
// engine prefetches only when the table is too big for the caches.
func (w *Worker) Connections() int { return int(w.r.ct.count.Load()) }

// prefetchKeys asks for the stripes and home slots of the keys with
// hashes h: an insert or removal then finds both keys' slots with their
// cache misses overlapped, instead of one after the other (at 2^18
// connections each is a miss: BenchmarkNewConnsFullTable).
func (t *table) prefetchKeys(h [2]uint64) {
	for _, h := range h {
		s := h & t.smask
		prefetchKey(&t.stripes[s], &t.slots[int(s)*t.per+homeOf(h>>32, t.per)])
	}
}
