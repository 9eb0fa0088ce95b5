package dataplane

import (
	"e1kbox/appliance/dataplane/ingressdrop"
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/rules"
)

// txPort is a transmit ring as the forwarding path sees it. It is owned
// by exactly one worker. *afpacket.Socket implements it; so does the host
// port's per-worker stage.
type txPort interface {
	Append(frame []byte) bool
	AppendTagged(frame []byte, tpid, tci uint16) bool
	TxSlot() []byte
	TxCommit(n int) bool
	Flush() error
}

// portInfo is a port as the engine opened it; only up changes.
type portInfo struct {
	id    uint16
	name  string // rule name
	iface string
	host  bool
	mtu   int
	up    atomic.Bool // link state, from the link monitor
	// kdrop keeps the kernel's stack off a data port's frames (package
	// ingressdrop); nil, with kdropErr, where it could not be attached.
	kdrop    *ingressdrop.Drop
	kdropErr string
}

// settings is the immutable snapshot the workers load once per batch.
type settings struct {
	cfg   *Config
	ports []portSettings // by port id; [0] unused
}

type portSettings struct {
	noLearn, noFlood bool
	vlan             *vlanSet // nil: VLAN-unaware
}

// vlanSet is a VLAN-aware port's membership, a bitmap for the hot path.
type vlanSet struct {
	native  uint16
	allowed [4096 / 64]uint64
}

func (v *vlanSet) allows(vid uint16) bool { return v.allowed[vid>>6]&(1<<(vid&63)) != 0 }

func newSettings(cfg *Config) *settings {
	s := &settings{cfg: cfg, ports: make([]portSettings, len(cfg.Ports)+2)}
	for i, p := range cfg.Ports {
		s.ports[i+1] = portSettings{noLearn: p.NoLearn, noFlood: p.NoFlood}
		if p.VLANs != nil {
			v := &vlanSet{native: p.VLANs.Native}
			for _, id := range p.VLANs.Allowed {
				v.allowed[id>>6] |= 1 << (id & 63)
			}
			s.ports[i+1].vlan = v
		}
	}
	return s
}

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

	c counters
}

// setNAT makes the worker route: frames from the WAN port and frames to
// the router's LAN MAC go to nw. wan is the WAN port's id, natLAN the id
// nat.Config.LAN.ID names the LAN segment by.
func (w *fwd) setNAT(nw *nat.Worker, wan uint16, natLAN int, lanMAC [6]byte) {
	w.nw, w.wanID, w.natLAN, w.lanMAC = nw, wan, natLAN, lanMAC
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
	for id, p := range w.ports {
		if p != nil {
			w.up[id] = p.up.Load()
		}
	}
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
	wire := len(data)
	var outer uint16
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
		return
	}
	if !fits(w.in.mtu, wire, outer) {
		w.drop(DropOversize)
		return
	}
	f := &w.f
	var err error
	if stripped {
		err = frame.ParseWithTag(data, tag, f)
	} else {
		err = frame.Parse(data, f)
	}
	if err != nil {
		w.drop(Drop(frame.ReasonOf(err)))
		return
	}
	if bridge.IsGroup(&f.Src) || bridge.IsZero(&f.Src) {
		w.drop(DropBadSource)
		return
	}
	if f.Dst[0] == 0x01 && f.Dst[1] == 0x80 && f.Dst[2] == 0xc2 && f.Dst[3] == 0 && f.Dst[4] == 0 && f.Dst[5]&0xf0 == 0 {
		w.drop(DropLinkLocal)
		return
	}
	var vid uint16
	if f.NTags > 0 {
		vid = f.Tags[0].VID()
	}
	in := w.in.id
	w.tagged = f.NTags > 0 && f.Tags[0].TPID == frame.EtherTypeVLAN
	if v := w.set.ports[in].vlan; v != nil {
		switch {
		case f.NTags > 0 && !w.tagged: // an 802.1ad outer tag
			w.drop(DropVLAN)
			return
		case w.tagged && vid != 0:
			if vid != v.native && !v.allows(vid) {
				w.drop(DropVLAN)
				return
			}
		case v.native == 0: // untagged or priority-tagged, no native VLAN
			w.drop(DropVLAN)
			return
		default:
			vid = v.native
		}
	}
	w.vid = vid
	if in == w.wanID {
		w.natFrame(data, false) // nothing is bridged to or from the WAN
		return
	}
	if !w.set.ports[in].noLearn {
		w.fdb.Learn(&f.Src, vid, in, w.mono)
	}
	group := bridge.IsGroup(&f.Dst)
	if w.nw != nil && !group && f.Dst == w.lanMAC {
		w.natFrame(data, false)
		return
	}
	w.fillKey()
	if w.set.ports[in].vlan != nil {
		w.key.VLAN = vid
	}
	w.rejected = false
	if !group {
		out, ok := w.fdb.Lookup(&f.Dst, vid, w.mono)
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

// natFrame hands the parsed frame to the router and carries out its
// Result (see package nat): Forward to the port it names, Reply on the
// ingress port, ToHost and Drop counted. flooded says the frame was also
// bridged: then nothing but the router's answers counts. It then drains
// the router's outbox.
func (w *fwd) natFrame(data []byte, flooded bool) {
	side := w.natLAN
	if w.in.id == w.wanID {
		side = int(w.wanID)
	}
	res := w.nw.Process(w.now, side, data, &w.f)
	switch res.Action {
	case nat.Forward:
		w.natSend(res.Port, res.Frame)
	case nat.Reply:
		// An answer to the frame: its source is on the ingress port.
		w.natEmit(w.in.id, res.Frame)
	case nat.ToHost:
		// Broadcasts reached the host port through the bridge already;
		// unicast for the router's own address or for the box on the
		// WAN has no service behind it.
		if !flooded {
			w.drop(DropNATHost)
		}
	case nat.Drop:
		if !flooded {
			w.drop(NATDrop(res.Reason))
		}
	}
	w.natDrain()
}

// natPrefetch warms the router's table for a frame handle sees a few
// frames later (see natBlock).
func (w *fwd) natPrefetch(data []byte, stripped bool) {
	if stripped { // the router drops tagged frames without a lookup
		return
	}
	side := w.natLAN
	if w.in.id == w.wanID {
		side = int(w.wanID)
	}
	w.nw.Prefetch(side, data)
}

// natDrain sends the router's outbox: ARP requests and frames released
// from its ARP queue.
func (w *fwd) natDrain() {
	for port, b, ok := w.nw.Output(); ok; port, b, ok = w.nw.Output() {
		w.natSend(port, b)
	}
}

// natTick is the router's housekeeping at the end of a batch or on an
// idle tick.
func (w *fwd) natTick() {
	w.nw.Tick(w.now)
	w.natDrain()
}

// natSend transmits a routed frame on the router's port: the WAN port, or
// the LAN segment, where the destination MAC picks the port (FDB) and an
// unknown or group destination floods the segment.
func (w *fwd) natSend(port int, b []byte) {
	if port == int(w.wanID) {
		w.natEmit(w.wanID, b)
		return
	}
	dst := (*[6]byte)(b[0:6])
	if !bridge.IsGroup(dst) {
		if out, ok := w.fdb.Lookup(dst, 0, w.mono); ok && out != w.wanID && int(out) < len(w.ports) {
			w.natEmit(out, b)
			return
		}
	}
	w.c.flooded++
	for id := 1; id < len(w.ports); id++ {
		if uint16(id) == w.wanID || w.set.ports[id].noFlood || !w.up[id] {
			continue
		}
		w.natEmit(uint16(id), b)
	}
}

// natEmit copies a routed frame (untagged) into port out's TX ring.
func (w *fwd) natEmit(out uint16, b []byte) {
	if !w.up[out] {
		w.drop(DropPortDown)
		return
	}
	if !fits(w.ports[out].mtu, len(b), 0) {
		w.drop(DropOversize)
		return
	}
	tx := w.tx[out]
	if !tx.Append(b) {
		w.flushPort(out)
		if !tx.Append(b) {
			w.drop(DropTxFull)
			return
		}
	}
	w.dirty |= 1 << out
	w.c.txPackets[out]++
	w.c.txBytes[out] += uint64(len(b))
}

// forward sends one copy of the frame to port out after the rules had
// their say. Copies of a flood to ports whose link is down are skipped
// without counting a drop.
func (w *fwd) forward(out uint16, data []byte, stripped bool, tag frame.VLANTag, wire int, outer uint16, flood bool) {
	op := w.ports[out]
	if !w.up[out] {
		if !flood {
			w.drop(DropPortDown)
		}
		return
	}
	// A VLAN-aware out port: the frame leaves untagged in its native
	// VLAN, tagged in an allowed one, not at all otherwise.
	egress := egressAsIs
	if v := w.set.ports[out].vlan; v != nil {
		switch {
		case w.vid != 0 && w.vid == v.native:
			egress = egressUntagged
		case w.vid != 0 && v.allows(w.vid):
			egress = egressTagged
		default:
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
}

// How a copy leaves its port.
const (
	egressAsIs     = iota // as received (VLAN-unaware out port)
	egressUntagged        // without its outer 802.1Q tag
	egressTagged          // with an outer 802.1Q tag of the frame's VLAN
)

// appendTo queues a copy of the frame on tx in the form egress asks for.
func (w *fwd) appendTo(tx txPort, egress int, data []byte, stripped bool, tag frame.VLANTag) bool {
	switch {
	case egress == egressUntagged && stripped:
		return tx.Append(data)
	case egress == egressUntagged && w.tagged: // the tag is in data: cut it out
		slot := tx.TxSlot()
		if slot == nil || len(slot) < len(data)-frame.VLANTagLen {
			return false
		}
		copy(slot, data[:12])
		n := 12 + copy(slot[12:], data[12+frame.VLANTagLen:])
		return tx.TxCommit(n)
	case egress == egressTagged && !w.tagged:
		return tx.AppendTagged(data, frame.EtherTypeVLAN, w.vid)
	case egress == egressTagged && stripped:
		return tx.AppendTagged(data, frame.EtherTypeVLAN, tag.TCI&^0xfff|w.vid)
	case egress == egressTagged && binary.BigEndian.Uint16(data[14:])&0xfff != w.vid: // a priority tag in data: set the VLAN
		slot := tx.TxSlot()
		if slot == nil || len(slot) < len(data) {
			return false
		}
		n := copy(slot, data)
		binary.BigEndian.PutUint16(slot[14:], binary.BigEndian.Uint16(data[14:])&^0xfff|w.vid)
		return tx.TxCommit(n)
	case stripped:
		return tx.AppendTagged(data, tag.TPID, tag.TCI)
	}
	return tx.Append(data)
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
