package config

import (
	"strings"
	"time"

	"e1kbox/rules"
)

// Bridge configures MAC learning.
type Bridge struct {
	// FDBAging is how long a learned MAC address stays without traffic.
	// Default 300s (like Linux bridges).
	FDBAging Duration `json:"fdbAging"`
	// FDBSize is the capacity of the forwarding database (learned and
	// static entries), 16..4194304. Default 8192.
	FDBSize int `json:"fdbSize"`
	// FDBFull says what learning does when the forwarding database has
	// no room for a new MAC address: "evict" replaces the oldest entry
	// that was seen only once (a flood of forged addresses churns its own
	// entries; stations that talk keep theirs), "refuse" keeps every
	// entry and floods frames to the new address. Default "evict".
	FDBFull string `json:"fdbFull,omitempty"`
	// LoopProtection probes the bridged ports for a loop outside the box
	// (a cable or a switch joining two ports, or a port's segment to
	// itself) and blocks a port of the loop until it is gone. Default
	// true.
	LoopProtection *bool `json:"loopProtection,omitempty"`
	// Static are fixed FDB entries; they never age and are never relearned
	// elsewhere. Default none.
	Static []StaticFDB `json:"static,omitempty"`
}

// StaticFDB pins a MAC address to a port.
type StaticFDB struct {
	// MAC is a unicast Ethernet address.
	MAC rules.MAC `json:"mac"`
	// Port is a port name (Port.Name or HostPort.Name).
	Port string `json:"port"`
	// VLAN is the VLAN id the entry is for, 1..4094; 0 means untagged or a
	// VLAN-unaware port. Default 0.
	VLAN uint16 `json:"vlan,omitempty"`
}

// Protects reports whether loop protection is on (the default).
func (b *Bridge) Protects() bool { return b.LoopProtection == nil || *b.LoopProtection }

// size returns the FDB size, the default when unset.
func (b *Bridge) size() int {
	if b.FDBSize == 0 {
		return DefaultFDBSize
	}
	return b.FDBSize
}

// Defaults and settings of the bridge.
const (
	DefaultFDBAging = 300 * time.Second
	DefaultFDBSize  = 8192
	FDBEvict        = "evict"
	FDBRefuse       = "refuse"
)

// Limits of the bridge.
const (
	minFDBSize  = 16
	maxFDBSize  = 1 << 22
	maxFDBAging = 1000000 * time.Second // Linux's bridge maximum
)

func (b *Bridge) applyDefaults() {
	if b.FDBAging == 0 {
		b.FDBAging = Duration(DefaultFDBAging)
	}
	if b.FDBSize == 0 {
		b.FDBSize = DefaultFDBSize
	}
}

func (v *validator) bridge() {
	b := &v.c.Bridge
	if b.FDBAging != 0 && (b.FDBAging.D() < time.Second || b.FDBAging.D() > maxFDBAging) {
		v.add("bridge.fdbAging", "%s out of range 1s..%s", b.FDBAging, Duration(maxFDBAging))
	}
	if b.FDBSize != 0 && (b.FDBSize < minFDBSize || b.FDBSize > maxFDBSize) {
		v.add("bridge.fdbSize", "%d out of range %d..%d", b.FDBSize, minFDBSize, maxFDBSize)
	}
	switch b.FDBFull {
	case "", FDBEvict, FDBRefuse:
	default:
		v.add("bridge.fdbFull", "unknown policy %q; want %q or %q", b.FDBFull, FDBEvict, FDBRefuse)
	}
	if size := b.size(); len(b.Static) > size {
		v.add("bridge.static", "%d entries do not fit into fdbSize %d", len(b.Static), size)
	}
	type key struct {
		mac  rules.MAC
		vlan uint16
	}
	seen := map[key]int{}
	for i, s := range b.Static {
		at := index("bridge.static", i)
		v.unicastMAC(at+".mac", s.MAC, "a unicast MAC", "; static entries are for unicast addresses")
		if _, ok := v.names[s.Port]; !ok {
			v.add(at+".port", "unknown port %q (ports: %s)", s.Port, strings.Join(v.portNames(), ", "))
		}
		if s.VLAN > MaxVLAN {
			v.add(at+".vlan", "VLAN %d out of range %d..%d (0: untagged)", s.VLAN, MinVLAN, MaxVLAN)
		}
		k := key{s.MAC, s.VLAN}
		if j, dup := seen[k]; dup {
			v.add(at, "duplicate entry for %s (VLAN %d), already at bridge.static[%d]", s.MAC, s.VLAN, j)
		}
		seen[k] = i
	}
}
