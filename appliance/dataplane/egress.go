package dataplane

import (
	"encoding/binary"

	"e1kbox/appliance/dataplane/frame"
)

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
