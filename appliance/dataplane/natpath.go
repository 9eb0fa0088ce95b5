package dataplane

import (
	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/offload"
	"e1kbox/appliance/dataplane/routing"
)

// setNAT makes the worker route: frames from the WAN port and frames to
// the router's LAN MAC go to nw. wan is the WAN port's id, natLAN the id
// nat.Config.LAN.ID names the LAN segment by.
func (w *fwd) setNAT(nw *nat.Worker, wan uint16, natLAN int, lanMAC [6]byte, host uint16) {
	w.nw, w.wanID, w.natLAN, w.lanMAC, w.hostID = nw, wan, natLAN, lanMAC, host
}

// natFrame hands the parsed frame to the router and carries out its
// Result (see package nat): Forward to the port it names, Reply on the
// ingress port, ToHost and Drop counted. flooded says the frame was also
// bridged: then nothing but the router's answers counts. It then drains
// the router's outbox.
func (w *fwd) natFrame(data []byte, flooded bool) {
	side := w.natLAN
	switch {
	case w.in.id == w.wanID:
		side = int(w.wanID)
	case w.hostID != 0 && w.in.id == w.hostID:
		side = int(w.in.id) // the box's own stack (nat.Config.Host)
	}
	if w.hostID != 0 && !flooded && side == w.natLAN && w.f.EtherType == frame.EtherTypeARP {
		// ARP for the router's MAC is also the box's stack's (it has the
		// router's MAC and LAN address): answers to its requests.
		w.natEmit(w.hostID, data)
	}
	var pre offload.Pre
	w.fpBefore(side, &pre) // the fast path needs the flow before Process rewrites it
	res := w.nw.Process(w.now, side, data, &w.f)
	switch res.Action {
	case routing.Forward:
		out := w.natSend(res.Port, res.Frame)
		// The fast path may take the flow over when the frame went to
		// one data port (floods and replies to the box's own stack stay
		// on the rings). IPv4: only a packet of a connection the fast
		// path takes (nat.Worker.Offerable); routed IPv6: the manager
		// judges.
		if pre.OK() && out != 0 && !w.ports[out].host && (pre.IPv6() || w.nw.Offerable()) {
			w.fp.OfferRoute(&pre, offload.Path{In: w.in.id, Out: out, VID: w.vid}, [6]byte(res.Frame[0:6]), w.mono)
		}
	case routing.Reply:
		// An answer to the frame: its source is on the ingress port.
		w.natEmit(w.in.id, res.Frame)
	case routing.Deliver:
		w.natEmit(w.hostID, res.Frame)
	case routing.ToHost:
		// Broadcasts reached the host port through the bridge already;
		// DHCP replies on the WAN are the DHCP client's (it reads its own
		// socket); unicast for the box on the WAN, or without a host
		// port, has no service behind it.
		if !flooded && !w.dhcpClient() {
			w.drop(DropNATHost)
		}
	case routing.Drop:
		if !flooded {
			w.drop(NATDrop(res.Reason))
		}
	}
	w.natDrain()
}

// dhcpClient reports whether the current frame is a DHCP reply to the
// WAN's DHCP client (UDP port 68 on the WAN).
func (w *fwd) dhcpClient() bool {
	f := &w.f
	return w.in.id == w.wanID && f.IsIPv4() && f.Proto == frame.ProtoUDP && f.L4Off != 0 && f.UDP.DstPort == 68
}

// natPrefetch warms the router's table for a frame handle sees a few
// frames later (see natBlock).
func (w *fwd) natPrefetch(data []byte, stripped bool) {
	side := w.natLAN
	if w.in.id == w.wanID {
		side = int(w.wanID)
	}
	// The router drops tagged frames without a lookup; on a tagged WAN
	// the kernel stripped the tag of the frames it takes.
	if stripped && (side != int(w.wanID) || w.set.wan.vid == 0) || side == int(w.wanID) && w.set.wan.ppp.on {
		return
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
// unknown or group destination floods the segment. It returns the port
// it sent the frame to, 0 for a flood.
func (w *fwd) natSend(port int, b []byte) uint16 {
	if port == int(w.wanID) || port == int(w.hostID) && port != 0 {
		w.natEmit(uint16(port), b)
		return uint16(port)
	}
	dst := (*[6]byte)(b[0:6])
	if !bridge.IsGroup(dst) {
		if out, ok := w.fdb.Lookup(dst, 0, w.mono); ok && out != w.wanID && int(out) < len(w.ports) {
			w.natEmit(out, b)
			return out
		}
	}
	w.c.flooded++
	for id := 1; id < len(w.ports); id++ {
		if uint16(id) == w.wanID || w.set.ports[id].noFlood || !w.up[id] {
			continue
		}
		w.natEmit(uint16(id), b)
	}
	return 0
}

// natEmit copies a routed frame (untagged) into port out's TX ring; on
// the WAN port with the WAN link's headers (wanEmit), which lie outside
// the port's MTU.
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
	wan := out == w.wanID && w.set.wan.framed()
	if wan && w.set.wan.ppp.on && !w.pppoeAdmit(b) {
		return
	}
	if !w.emit(tx, b, wan) {
		w.flushPort(out)
		if !w.emit(tx, b, wan) {
			w.drop(DropTxFull)
			return
		}
	}
	w.dirty |= 1 << out
	w.c.txPackets[out]++
	w.c.txBytes[out] += uint64(len(b))
	if wan {
		w.c.txBytes[out] += uint64(w.set.wan.headerLen())
	}
}

func (w *fwd) emit(tx txPort, b []byte, wan bool) bool {
	if wan {
		return w.wanEmit(tx, b)
	}
	return tx.Append(b)
}
