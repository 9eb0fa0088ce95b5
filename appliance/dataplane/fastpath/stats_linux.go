package fastpath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Stats are a slot's counters summed over the CPUs.
type Stats struct {
	Packets uint64
	Bytes   uint64 // wire bytes as received (an outer VLAN tag included)
	L3Bytes uint64 // IP bytes
	// Last is the CLOCK_MONOTONIC time of the slot's last packet (ns), 0
	// before the first: read at the last scheduler tick before it (the
	// coarse clock), up to a tick early.
	Last int64
}

// StatsReader reads the stats array; it keeps its buffers between
// reads. It is not safe for concurrent use.
type StatsReader struct {
	p    *Program
	keys []uint32
	vals []fastpathFlowStats
}

// NewStatsReader returns a reader of p's stats.
func (p *Program) NewStatsReader() *StatsReader { return &StatsReader{p: p} }

// Read fills dst[i] with the counters of slot i for i < len(dst) (at
// most Slots()), with one batch lookup.
func (r *StatsReader) Read(dst []Stats) error {
	n := min(len(dst), r.p.slots)
	if n == 0 {
		return nil
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("fastpath: %w", err)
	}
	if cap(r.keys) < n {
		r.keys = make([]uint32, n)
		r.vals = make([]fastpathFlowStats, n*ncpu)
	}
	keys, vals := r.keys[:n], r.vals[:n*ncpu]
	var cursor ebpf.MapBatchCursor
	got, err := r.p.maps.Stats.BatchLookup(&cursor, keys, vals, nil)
	if err != nil && got < n {
		return fmt.Errorf("fastpath: reading stats: %w", err)
	}
	for i := range n {
		var s Stats
		for c := range ncpu {
			v := &vals[i*ncpu+c]
			s.Packets += v.Packets
			s.Bytes += v.Bytes
			s.L3Bytes += v.L3bytes
			s.Last = max(s.Last, int64(v.Last))
		}
		dst[i] = s
	}
	return nil
}

// ResetStats zeroes slot's counters on every CPU (before the slot is
// given to a new flow).
func (p *Program) ResetStats(slot uint32) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("fastpath: %w", err)
	}
	if err := p.maps.Stats.Put(slot, make([]fastpathFlowStats, ncpu)); err != nil {
		return fmt.Errorf("fastpath: resetting slot %d: %w", slot, err)
	}
	return nil
}

// Punt is why the fast path left a frame to the slow path.
type Punt int

// The punt reasons, as bpf/fastpath.c counts them.
const (
	PuntMiss      Punt = iota // no flow
	PuntEther                 // not IPv4/IPv6, an inner VLAN tag, a group or zero source
	PuntIP                    // IP options, bad version, length or L4 header; a padded routed IPv6 frame
	PuntFrag                  // a fragment
	PuntTTL                   // TTL (IPv6: hop limit) <= 1
	PuntChecksum              // bad IPv4 header checksum, or an ICMP checksum the slow path must fix
	PuntTCP                   // TCP flags other than ACK, PSH, URG, ECE, CWR (SYN, FIN, RST)
	PuntMTU                   // too big for the ingress or egress MTU
	PuntMAC                   // not the MAC the flow expects
	PuntICMP                  // ICMP other than an echo of the flow's type
	PuntVLAN                  // a VLAN change generic XDP cannot make
	PuntReinject              // kept out of the ring, then the flow changed: sent back to ingress
	PuntRing                  // reserved
	PuntError                 // a helper failed: the frame was dropped
	PuntExtHeader             // IPv6: a next header other than TCP, UDP and ICMPv6 (an extension header)
	PuntScope                 // IPv6: a link-local, multicast or unspecified address
	NumPunts
)

var puntNames = [NumPunts]string{"miss", "ether", "ip", "fragment", "ttl", "checksum", "tcp_flags", "mtu", "mac", "icmp", "vlan",
	"reinject", "ring", "error", "ext_header", "scope"}

func (p Punt) String() string {
	if p >= 0 && p < NumPunts {
		return puntNames[p]
	}
	return fmt.Sprintf("punt(%d)", int(p))
}

// Punts returns how many frames the tcx or XDP program left to the slow
// path, by reason, summed over the CPUs.
func (p *Program) Punts() ([NumPunts]uint64, error) {
	var out [NumPunts]uint64
	var per []uint64
	for i := range NumPunts {
		if err := p.maps.Punts.Lookup(uint32(i), &per); err != nil {
			return out, fmt.Errorf("fastpath: punts: %w", err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}
