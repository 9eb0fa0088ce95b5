package dataplane

import (
	"sync/atomic"

	"e1kbox/appliance/dataplane/ingressdrop"
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

// portInfo is a port as the engine opened it; only up and loop change.
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
	loop     portLoop
}

// afterTCX reports whether the port's rings are bound to EtherTypes,
// after tcx ingress (its kernel drop demotes and marks).
func (pi *portInfo) afterTCX() bool { return pi.kdrop != nil && pi.kdrop.Demote }

// settings is the immutable snapshot the workers load once per batch.
type settings struct {
	cfg   *Config
	ports []portSettings // by port id; [0] unused
	wan   wanLink        // NAT mode: the WAN port's link layer
}

type portSettings struct {
	noLearn, noFlood bool
	vlan             *vlanSet // nil: VLAN-unaware
}

// vlanSet is a VLAN-aware port's membership, a bitmap for the hot path.
type vlanSet struct {
	native  uint16
	allowed [4096 / 64]uint64
	// probe is the VLAN loop probes go out on: none (untagged) with a
	// native VLAN, else the lowest allowed one — a trunk without a native
	// VLAN may drop untagged frames.
	probe uint16
}

func (v *vlanSet) allows(vid uint16) bool { return v.allowed[vid>>6]&(1<<(vid&63)) != 0 }

// ingress classifies a frame that arrives on the VLAN-aware port: with
// an outer tag (tagged), that tag 802.1Q (q; else 802.1ad) of VLAN vid.
// It returns the frame's VLAN: the tag's if the port carries it, the
// native VLAN for untagged or priority-tagged frames; false where the
// port does not carry the frame.
func (v *vlanSet) ingress(tagged, q bool, vid uint16) (uint16, bool) {
	switch {
	case tagged && !q: // an 802.1ad outer tag
		return 0, false
	case q && vid != 0:
		return vid, vid == v.native || v.allows(vid)
	case v.native == 0: // untagged or priority-tagged, no native VLAN
		return 0, false
	}
	return v.native, true
}

// egress is the form a frame of VLAN vid leaves the VLAN-aware port in:
// untagged in its native VLAN, tagged in an allowed one; false for any
// other.
func (v *vlanSet) egress(vid uint16) (int, bool) {
	switch {
	case vid != 0 && vid == v.native:
		return egressUntagged, true
	case vid != 0 && v.allows(vid):
		return egressTagged, true
	}
	return 0, false
}

func newSettings(cfg *Config) *settings {
	s := &settings{cfg: cfg, ports: make([]portSettings, len(cfg.Ports)+2)}
	if modeOf(cfg) == ModeNAT && cfg.NAT != nil {
		s.wan = newWANLink(cfg.NAT.WANVLAN)
		s.wan.ppp = newPPPoELink(cfg.NAT)
	}
	for i, p := range cfg.Ports {
		s.ports[i+1] = portSettings{noLearn: p.NoLearn, noFlood: p.NoFlood}
		if p.VLANs != nil {
			v := &vlanSet{native: p.VLANs.Native}
			for _, id := range p.VLANs.Allowed {
				v.allowed[id>>6] |= 1 << (id & 63)
				if v.native == 0 && (v.probe == 0 || id < v.probe) {
					v.probe = id
				}
			}
			s.ports[i+1].vlan = v
		}
	}
	return s
}
