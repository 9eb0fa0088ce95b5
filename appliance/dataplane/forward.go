package dataplane

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/rules"
)

// fwd is one worker's forwarding state: everything the per-frame path
// touches, owned by the worker's goroutine alone.
type fwd struct {
	in    *portInfo
	ports []*portInfo // by id; [0] nil
	tx    []txPort    // by out port id; tx[in.id] answers rejects on the ingress port
	fdb   *bridge.FDB
	rw    *rules.Worker
	cur   *atomic.Pointer[settings]

	// per batch
	set       *settings
	up        []bool // by id
	now, mono int64  // wall clock (rules counters) and engine clock (FDB), ns
	dirty     uint64 // ports with frames queued since the last flush

	// per frame
	f        frame.Frame
	key      rules.Key
	rejected bool
	vid      uint16 // the frame's VLAN: its outer tag's, or the aware ingress port's classification
	tagged   bool   // it carries an outer 802.1Q tag (in data or stripped)

	// NAT mode; nw is nil in bridge mode.
	nw     *nat.Worker
	wanID  uint16  // the WAN port (0 in bridge mode: no port has id 0)
	natLAN int     // the router's LAN side as the nat package names it
	lanMAC [6]byte // the router's LAN MAC
	hostID uint16  // the host port, the box's own stack (0: none)

	// loop protection (loop.go)
	loop      *loopGuard
	prober    bool   // this worker sends its port's probes
	probeGen  uint64 // the generation of the last probe sent
	blocked   uint64 // ports blocked by a loop this batch, by id
	inBlocked bool   // the ingress port is

	fp *offload.Worker // nil without the fast path (fastpath_linux.go)
	// marked: the port's rings are bound after tcx, where the kernel
	// drop's demote marks the frames of other EtherTypes and the tagged
	// ones (ingressdrop.Unmark).
	marked bool
	// ppp is the PPPoE client's control frame queue (a WAN port's
	// worker in NAT mode; wanlink_pppoe.go).
	ppp *pppoeQueue

	c counters
}

func newFwd(in *portInfo, ports []*portInfo, tx []txPort, fdb *bridge.FDB, rw *rules.Worker, cur *atomic.Pointer[settings]) *fwd {
	w := &fwd{in: in, ports: ports, tx: tx, fdb: fdb, rw: rw, cur: cur, up: make([]bool, len(ports))}
	w.c.init(len(ports))
	return w
}

// begin starts a batch: it loads the configuration snapshot and the link
// states once for all frames of the batch.
func (w *fwd) begin(now, mono int64) {
	w.set = w.cur.Load()
	w.now, w.mono = now, mono
	w.blocked = 0
	for id, p := range w.ports {
		if p == nil {
			continue
		}
		w.up[id] = p.up.Load()
		if p.loop.blocked() {
			w.up[id] = false
			w.blocked |= 1 << id
		}
	}
	w.inBlocked = w.blocked&(1<<w.in.id) != 0
	w.c.batches++
}

// fits applies the kernel's length rule for a frame on the wire (wire
// bytes, any VLAN tag included) on a port with MTU mtu: MTU+14, or MTU+18
// when the outer tag is 802.1Q.
func fits(mtu, wire int, outerTPID uint16) bool {
	limit := mtu + frame.EthernetHeaderLen
	if outerTPID == frame.EtherTypeVLAN {
		limit += frame.VLANTagLen
	}
	return wire <= limit
}

func (w *fwd) drop(r Drop) { w.c.drops[r]++ }

// handle forwards one received frame. data is the frame from the
// destination MAC on; origLen its length before any truncation; a tag the
// kernel stripped is in tag when stripped. It does not allocate.
func (w *fwd) handle(data []byte, origLen int, stripped bool, tag frame.VLANTag) {
	// Only a marked frame has the marker's first byte there (an IPv4,
	// IPv6 or ARP frame has 0x08 or 0x86): the others skip the call.
	if w.marked && !stripped && len(data) > 12 && data[12] == ingressdrop.MarkerTPID>>8 {
		data, origLen, stripped, tag = unmark(data, origLen)
	}
	wire, outer, ok := w.receive(data, origLen, stripped, &tag)
	if !ok {
		return
	}
	f := &w.f
	if f.EtherType == frame.EtherTypeLoopback {
		if p, ok := frame.ParseLoopProbe(data, f); ok && w.loop != nil && p.Nonce == w.loop.nonce {
			w.probeIn(p.Port)
			w.drop(DropLoop)
			return
		}
	}
	if w.inBlocked {
		w.drop(DropLoop)
		return
	}
	if w.vid, ok = w.ingressVLAN(); !ok {
		w.drop(DropVLAN)
		return
	}
	in := w.in.id
	if in == w.wanID {
		if data, ok = w.wanIn(data, stripped); ok {
			w.natFrame(data, false) // nothing is bridged to or from the WAN
		}
		return
	}
	if !w.set.ports[in].noLearn && w.fdb.Learn(&f.Src, w.vid, in, w.mono) == bridge.Moved {
		w.in.loop.moves.Add(1)
		w.fpMoved(&f.Src, w.vid)
	}
	group := bridge.IsGroup(&f.Dst)
	if w.nw != nil && !group && f.Dst == w.lanMAC {
		w.natFrame(data, false)
		return
	}
	w.fillKey()
	if w.set.ports[in].vlan != nil {
		w.key.VLAN = w.vid
	}
	w.rejected = false
	if !group {
		out, ok := w.fdb.Lookup(&f.Dst, w.vid, w.mono)
		switch {
		case !ok:
			// unknown unicast: flood
		case out == in:
			w.drop(DropLocal)
			return
		case int(out) >= len(w.ports) || out == w.wanID:
			w.drop(DropPortDown)
			return
		default:
			w.forward(out, data, stripped, tag, wire, outer, false)
			return
		}
	}
	w.c.flooded++
	for id := 1; id < len(w.ports); id++ {
		if id == int(in) || w.set.ports[id].noFlood || uint16(id) == w.wanID {
			continue
		}
		w.forward(uint16(id), data, stripped, tag, wire, outer, true)
	}
	if w.nw != nil && group && f.EtherType == frame.EtherTypeARP {
		// ARP requests for the router's LAN address, gratuitous ARP: the
		// router sees a copy of the segment's broadcast ARP.
		w.natFrame(data, true)
	}
}

// unmark gives a frame from a ring behind the kernel drop's demote the
// form a packet tap would have seen: without the demote's marker and,
// where the kernel had taken the frame's outer VLAN tag off before tcx
// (every tag the demote finds in the frame), that tag stripped.
func unmark(data []byte, origLen int) ([]byte, int, bool, frame.VLANTag) {
	data, ok := ingressdrop.Unmark(data)
	if !ok {
		return data, origLen, false, frame.VLANTag{}
	}
	origLen -= ingressdrop.MarkerLen
	if d, tag, err := frame.StripVLAN(data); err == nil {
		return d, origLen - frame.VLANTagLen, true, tag
	}
	return data, origLen, false, frame.VLANTag{}
}

// receive counts a received frame, checks its length against the ingress
// MTU and parses it into w.f; it drops (and counts) frames that are
// truncated, too long, malformed, from a group or zero source, or for an
// 802.1D link-local address. It returns the frame's length on the wire
// (a stripped tag included) and its outer EtherType, and fills in a
// stripped tag's default TPID.
func (w *fwd) receive(data []byte, origLen int, stripped bool, tag *frame.VLANTag) (wire int, outer uint16, ok bool) {
	wire = len(data)
	if stripped {
		wire += frame.VLANTagLen
		if tag.TPID == 0 {
			tag.TPID = frame.EtherTypeVLAN
		}
		outer = tag.TPID
	} else if len(data) >= frame.EthernetHeaderLen {
		outer = binary.BigEndian.Uint16(data[12:])
	}
	w.c.rxPackets++
	w.c.rxBytes += uint64(wire)
	if origLen > len(data) {
		w.drop(Drop(frame.ReasonTruncated))
		return 0, 0, false
	}
	if !fits(w.in.mtu, wire, outer) {
		w.drop(DropOversize)
		return 0, 0, false
	}
	f := &w.f
	var err error
	if stripped {
		err = frame.ParseWithTag(data, *tag, f)
	} else {
		err = frame.Parse(data, f)
	}
	switch {
	case err != nil:
		w.drop(Drop(frame.ReasonOf(err)))
	case bridge.IsGroup(&f.Src) || bridge.IsZero(&f.Src):
		w.drop(DropBadSource)
	case f.Dst[0] == 0x01 && f.Dst[1] == 0x80 && f.Dst[2] == 0xc2 && f.Dst[3] == 0 && f.Dst[4] == 0 && f.Dst[5]&0xf0 == 0:
		w.drop(DropLinkLocal)
	default:
		return wire, outer, true
	}
	return 0, 0, false
}

// ingressVLAN classifies the parsed frame into a VLAN: its outer tag's
// VLAN id, or on a VLAN-aware ingress port the tag's VLAN if the port
// carries it and the native VLAN for untagged or priority-tagged frames.
// It sets w.tagged; false means the port does not carry the frame.
func (w *fwd) ingressVLAN() (uint16, bool) {
	f := &w.f
	var vid uint16
	if f.NTags > 0 {
		vid = f.Tags[0].VID()
	}
	w.tagged = f.NTags > 0 && f.Tags[0].TPID == frame.EtherTypeVLAN
	v := w.set.ports[w.in.id].vlan
	if v == nil {
		return vid, true
	}
	return v.ingress(f.NTags > 0, w.tagged, vid)
}

// forward sends one copy of the frame to port out after the rules had
// their say. Copies of a flood to ports whose link is down are skipped
// without counting a drop.
func (w *fwd) forward(out uint16, data []byte, stripped bool, tag frame.VLANTag, wire int, outer uint16, flood bool) {
	op := w.ports[out]
	if !w.up[out] {
		switch {
		case flood:
		case w.blocked&(1<<out) != 0:
			w.drop(DropLoop)
		default:
			w.drop(DropPortDown)
		}
		return
	}
	// A VLAN-aware out port: the frame leaves untagged in its native
	// VLAN, tagged in an allowed one, not at all otherwise.
	egress := egressAsIs
	if v := w.set.ports[out].vlan; v != nil {
		var ok bool
		if egress, ok = v.egress(w.vid); !ok {
			if !flood {
				w.drop(DropVLAN)
			}
			return
		}
		if egress == egressUntagged && w.tagged {
			wire -= frame.VLANTagLen
			outer = w.f.EtherType
		} else if egress == egressTagged && !w.tagged {
			wire += frame.VLANTagLen
			outer = frame.EtherTypeVLAN
		}
	}
	if !fits(op.mtu, wire, outer) {
		w.drop(DropOversize)
		return
	}
	k := &w.key
	k.OutPort = out
	switch {
	case w.in.host:
		k.Chain = rules.Output
	case op.host:
		k.Chain = rules.Input
	default:
		k.Chain = rules.Forward
	}
	switch v := w.rw.Lookup(k, wire, w.now); v.Action {
	case rules.Accept:
	case rules.Reject:
		if !w.rejected {
			w.rejected = true
			w.reject(data)
		}
		w.drop(DropReject)
		return
	default:
		w.drop(DropRule)
		return
	}
	tx := w.tx[out]
	if !w.appendTo(tx, egress, data, stripped, tag) {
		// The ring is full: send what it holds and try once more.
		w.flushPort(out)
		if !w.appendTo(tx, egress, data, stripped, tag) {
			w.drop(DropTxFull)
			return
		}
	}
	w.dirty |= 1 << out
	w.c.txPackets[out]++
	w.c.txBytes[out] += uint64(wire)
	// The fast path may take a unicast flow between data ports over,
	// unless its outer tag is one the kernel did not strip.
	if w.fp != nil && !flood && !w.in.host && !op.host && (stripped || !w.tagged) {
		w.fp.OfferPair(&w.f, k, offload.Path{In: w.in.id, Out: out, VID: w.vid}, fastpath.Egress(egress), stripped, tag, w.mono)
	}
}

// reject answers the current frame on its ingress port (TCP RST or ICMP
// unreachable), if it is a frame one may answer.
func (w *fwd) reject(data []byte) {
	tx := w.tx[w.in.id]
	if tx == nil {
		return
	}
	slot := tx.TxSlot()
	if slot == nil {
		w.flushPort(w.in.id)
		if slot = tx.TxSlot(); slot == nil {
			return
		}
	}
	n := buildReject(slot, data, &w.f, w.in.mtu)
	if n == 0 || !tx.TxCommit(n) {
		return
	}
	w.dirty |= 1 << w.in.id
	w.c.rejectsSent++
}

func (w *fwd) flushPort(id uint16) {
	if err := w.tx[id].Flush(); err != nil {
		w.c.txFlushErrors++
		return
	}
	w.dirty &^= 1 << id
}

// flush ends a batch: one Flush per TX ring that got frames. A ring whose
// flush failed (its frames stay queued) stays marked and is retried with
// the next batch or idle tick.
func (w *fwd) flush() {
	for d := w.dirty; d != 0; d &= d - 1 {
		id := uint16(bits.TrailingZeros64(d))
		w.flushPort(id)
	}
}

// fillKey fills the rule key from the parsed frame; Chain and OutPort are
// set per copy.
func (w *fwd) fillKey() {
	f, k := &w.f, &w.key
	*k = rules.Key{
		SrcMAC:    f.Src,
		DstMAC:    f.Dst,
		InPort:    w.in.id,
		EtherType: rules.EtherType(f.EtherType),
		// Bridge mode tracks no connections.
		CtState: rules.CtUntracked,
	}
	if f.NTags > 0 {
		k.Tagged = true
		k.VLAN = f.Tags[0].VID()
	}
	switch f.EtherType {
	case frame.EtherTypeIPv4:
		copy(k.SrcIP[:4], f.IPv4.Src[:])
		copy(k.DstIP[:4], f.IPv4.Dst[:])
	case frame.EtherTypeIPv6:
		k.SrcIP, k.DstIP = f.IPv6.Src, f.IPv6.Dst
	default:
		return
	}
	k.Proto = rules.Proto(f.Proto)
	if f.L4Off == 0 {
		return
	}
	switch {
	case f.Proto == frame.ProtoTCP:
		k.SrcPort, k.DstPort = f.TCP.SrcPort, f.TCP.DstPort
		k.TCPFlags = rules.TCPFlagSet(f.TCP.Flags)
	case f.Proto == frame.ProtoUDP:
		k.SrcPort, k.DstPort = f.UDP.SrcPort, f.UDP.DstPort
	case f.IsICMP():
		k.ICMPType, k.ICMPCode = f.ICMP.Type, f.ICMP.Code
	}
}
