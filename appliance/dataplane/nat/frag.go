package nat

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// fragEntry follows the fragments of one datagram after its first
// fragment (the one with the transport header) was translated: later
// fragments, matched by (source, destination, protocol, IP ID, side),
// get the same addresses. It records which 8-byte units arrived to drop
// overlapping fragments.
type fragEntry struct {
	src, dst       uint32
	id             uint16
	proto          uint8
	side, out      Side
	used           bool
	nr             uint8
	newSrc, newDst uint32
	deadline       int64
	total          uint16 // units up to the end of the last fragment, 0 until seen
	covered        uint16
	ranges         [8][2]uint16 // [start, end) in 8-byte units
}

func fragUnits(f *frame.Frame) (start, end uint16) {
	start = f.IPv4.FragOff
	n := f.L3End - f.L3Off - int(f.IPv4.IHL)*4
	return start, start + uint16((n+7)/8)
}

// fragFind returns the live entry of f's datagram.
func (w *Worker) fragFind(now int64, f *frame.Frame, side Side) *fragEntry {
	src, dst := be32(f.IPv4.Src), be32(f.IPv4.Dst)
	for i := range w.frags {
		e := &w.frags[i]
		if e.used && e.id == f.IPv4.ID && e.src == src && e.dst == dst && e.proto == f.Proto && e.side == side {
			if now >= e.deadline {
				e.used = false
				return nil
			}
			return e
		}
	}
	return nil
}

// fragAdd records the first fragment f, about to be translated to tr and
// sent on side out. A full table replaces its oldest entry.
func (w *Worker) fragAdd(now int64, s *snapshot, f *frame.Frame, tr xlate, out Side) {
	e := w.fragFind(now, f, w.fwdIn)
	if e == nil {
		e = &w.frags[0]
		for i := range w.frags {
			c := &w.frags[i]
			if !c.used || now >= c.deadline {
				e = c
				break
			}
			if c.deadline < e.deadline {
				e = c
			}
		}
	}
	start, end := fragUnits(f)
	*e = fragEntry{
		src: be32(f.IPv4.Src), dst: be32(f.IPv4.Dst), id: f.IPv4.ID, proto: f.Proto, side: w.fwdIn, out: out,
		used: true, newSrc: tr.src, newDst: tr.dst, deadline: now + s.fragTTL, nr: 1,
	}
	e.ranges[0] = [2]uint16{start, end}
	e.covered = end - start
}

// add records units [start, end); false when they overlap what arrived
// or the entry cannot record more ranges.
func (e *fragEntry) add(start, end uint16, last bool) bool {
	for i := 0; i < int(e.nr); i++ {
		r := &e.ranges[i]
		if start < r[1] && r[0] < end {
			return false
		}
	}
	merged := false
	for i := 0; i < int(e.nr); i++ {
		r := &e.ranges[i]
		if r[1] == start {
			r[1] = end
			merged = true
			break
		}
		if r[0] == end {
			r[0] = start
			merged = true
			break
		}
	}
	if !merged {
		if int(e.nr) == len(e.ranges) {
			return false
		}
		e.ranges[e.nr] = [2]uint16{start, end}
		e.nr++
	}
	e.covered += end - start
	if last {
		e.total = end
	}
	if e.total != 0 && e.covered == e.total {
		e.used = false // complete
	}
	return true
}

// laterFragment forwards a non-first fragment like its first fragment.
func (w *Worker) laterFragment(now int64, s *snapshot, side Side, inPort int, pkt []byte, f *frame.Frame, dst uint32) Result {
	e := w.fragFind(now, f, side)
	if e == nil {
		if side == LAN && (dst == s.side[LAN].addr || s.boxAddr(dst)) {
			return w.toBox(now, s, side, inPort, pkt, f, dst)
		}
		if dst == s.side[side].addr || dst == s.side[WAN].addr {
			return Result{Action: routing.ToHost, Port: inPort, Frame: pkt}
		}
		return drop(ReasonFragment)
	}
	if f.IPv4.TTL <= 1 {
		return drop(ReasonTTL)
	}
	start, end := fragUnits(f)
	if !e.add(start, end, !f.IPv4.MF) {
		e.used = false
		return drop(ReasonFragment)
	}
	w.c.fragments.Add(1)
	return w.emit(now, s, e.out, pkt, f, xlate{src: e.newSrc, dst: e.newDst}, false)
}
