package fastpath

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
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

// statsMemory is the stats array mapped into the process: every CPU's
// counters of every slot, CPU by CPU (struct flow_stats in
// bpf/fastpath.c). The programs write it while it is read, a 64-bit
// word at a time, so it is read and written only with atomic loads and
// stores.
type statsMemory struct {
	mu   sync.RWMutex // held for writing only to unmap
	mem  []byte
	flow []fastpathFlowStats // over mem
}

// mapStats maps the stats array (BPF_F_MMAPABLE) into the process.
func (p *Program) mapStats() error {
	n := p.slots * p.ncpu
	size := n * int(unsafe.Sizeof(fastpathFlowStats{}))
	if page := unix.Getpagesize(); size%page != 0 {
		size += page - size%page
	}
	mem, err := unix.Mmap(p.maps.Stats.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("fastpath: mapping the stats array: %w", err)
	}
	p.stats.mem, p.stats.flow = mem, unsafe.Slice((*fastpathFlowStats)(unsafe.Pointer(&mem[0])), n)
	return nil
}

func (m *statsMemory) unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem, m.flow = nil, nil
	if err != nil {
		return fmt.Errorf("fastpath: unmapping the stats array: %w", err)
	}
	return nil
}

// StatsReader reads the stats array. It is not safe for concurrent use.
type StatsReader struct {
	p *Program
}

// NewStatsReader returns a reader of p's stats.
func (p *Program) NewStatsReader() *StatsReader { return &StatsReader{p: p} }

// Read fills dst[i] with the counters of slot i for i < len(dst) (at
// most Slots()), from the mapped array: no syscall.
func (r *StatsReader) Read(dst []Stats) error {
	p := r.p
	n := min(len(dst), p.slots)
	if n == 0 {
		return nil
	}
	p.stats.mu.RLock()
	defer p.stats.mu.RUnlock()
	if p.stats.flow == nil {
		return errors.New("fastpath: reading stats: the program is closed")
	}
	clear(dst[:n])
	for c := range p.ncpu {
		part := p.stats.flow[c*p.slots : c*p.slots+n]
		for i := range part {
			v, s := &part[i], &dst[i]
			pk := atomic.LoadUint64(&v.Packets)
			if pk == 0 {
				continue // never counted on this CPU
			}
			s.Packets += pk
			s.Bytes += atomic.LoadUint64(&v.Bytes)
			s.L3Bytes += atomic.LoadUint64(&v.L3bytes)
			s.Last = max(s.Last, int64(atomic.LoadUint64(&v.Last)))
		}
	}
	return nil
}

// ResetStats zeroes slot's counters on every CPU (before the slot is
// given to a new flow).
func (p *Program) ResetStats(slot uint32) error {
	if int(slot) >= p.slots {
		return fmt.Errorf("fastpath: resetting slot %d: only %d slots", slot, p.slots)
	}
	p.stats.mu.RLock()
	defer p.stats.mu.RUnlock()
	if p.stats.flow == nil {
		return fmt.Errorf("fastpath: resetting slot %d: the program is closed", slot)
	}
	for c := range p.ncpu {
		v := &p.stats.flow[c*p.slots+int(slot)]
		atomic.StoreUint64(&v.Packets, 0)
		atomic.StoreUint64(&v.Bytes, 0)
		atomic.StoreUint64(&v.L3bytes, 0)
		atomic.StoreUint64(&v.Last, 0)
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
	PuntPPPoE                 // a PPPoE frame of another session, or a flow of a session no longer current
	NumPunts
)

var puntNames = [NumPunts]string{"miss", "ether", "ip", "fragment", "ttl", "checksum", "tcp_flags", "mtu", "mac", "icmp", "vlan",
	"reinject", "ring", "error", "ext_header", "scope", "pppoe"}

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
