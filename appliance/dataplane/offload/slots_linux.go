package offload

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/fastpath"
)

// The stats slots: every flow in the kernel counts into a slot of the
// program's stats array, which the manager maps into its memory
// (fastpath.StatsReader). A slot goes to a flow when it is installed and
// back to the free list one harvest after it was evicted, when no program
// run can still be counting into it and its last counts were read.

// slotTable is the manager's stats slots. It is the manager's, under its
// lock.
type slotTable struct {
	prog   *fastpath.Program
	reader *fastpath.StatsReader
	free   []uint32 // free slots, the lowest last
	high   uint32   // slots below high have been used
	stats  []fastpath.Stats
	prev   []fastpath.Stats // what was carried into the tables of each slot so far
	slots  []slot           // by slot
	dying  []dying          // evicted flows whose last counts are still to read
	turn   uint32           // the harvests so far (whose turn it is)
	turns  []uint32         // the turn pass's slots (reused)
	sums   portSums         // the count pass's scratch
}

// slot is a stats slot's flow and what every harvest's count pass needs
// of it without touching the flow (harvest).
type slot struct {
	rec     any // *natFlow, *v6Flow, *pair or *micro; nil while free
	in, out uint16
	delta   int32 // bytes a frame gains on egress (pairs)
	ports   bool  // its frames count on the ports (a microflow's are its pair's)
	routed  bool  // a NAT or routed IPv6 flow: the NAT worker's frames too
	v6      bool  // a routed IPv6 flow: route6's too
	turns   uint8 // harvests between its turns (turnsFor its idle time)
	dying   bool
	// packets and bytes the count pass has counted so far.
	packets, bytes uint64
}

// dying is an evicted flow whose last counts are read at the next
// harvest, when no program run can still be counting into its slot.
type dying struct {
	slot uint32
	rec  any // *natFlow, *v6Flow, *pair or *micro
}

// portSums are a count pass's frames by port id.
type portSums struct {
	rxPackets, rxBytes, txPackets, txBytes []uint64
}

func (t *slotTable) init(prog *fastpath.Program, nports int) {
	n := prog.Slots()
	t.prog, t.reader = prog, prog.NewStatsReader()
	t.stats, t.prev = make([]fastpath.Stats, n), make([]fastpath.Stats, n)
	t.slots = make([]slot, n)
	t.free = make([]uint32, n)
	for i := range t.free {
		t.free[i] = uint32(n - 1 - i)
	}
	t.sums = portSums{make([]uint64, nports), make([]uint64, nports), make([]uint64, nports), make([]uint64, nports)}
}

// read reads the counters of the slots in use.
func (t *slotTable) read() error { return t.reader.Read(t.stats[:t.high]) }

// alloc takes a free slot and zeroes its counters.
func (t *slotTable) alloc() (uint32, error) {
	n := len(t.free)
	if n == 0 {
		return 0, errNoSlot
	}
	s := t.free[n-1]
	if err := t.prog.ResetStats(s); err != nil {
		return 0, err
	}
	t.free = t.free[:n-1]
	t.prev[s] = fastpath.Stats{}
	t.slots[s] = slot{}
	t.high = max(t.high, s+1)
	return s, nil
}

// errNoSlot: every slot is in use (not counted as an error: the flow
// stays on the rings).
var errNoSlot = errors.New("offload: no free stats slot")

// unused gives back a slot from alloc whose flow the kernel refused.
func (t *slotTable) unused(s uint32) { t.free = append(t.free, s) }

// own gives slot s (from alloc) to an installed flow.
func (t *slotTable) own(s uint32, sl slot) { t.slots[s] = sl }

// release returns slot s to the free list.
func (t *slotTable) release(s uint32) {
	t.slots[s] = slot{}
	t.free = append(t.free, s)
}

// die queues an evicted flow's slot for its last counts.
func (t *slotTable) die(s uint32, rec any) {
	t.slots[s].dying = true
	t.dying = append(t.dying, dying{slot: s, rec: rec})
}

// delta returns what slot s counted since the last call, and its last
// time.
func (t *slotTable) delta(s uint32) fastpath.Stats {
	cur, prev := t.stats[s], t.prev[s]
	t.prev[s] = cur
	return fastpath.Stats{Packets: cur.Packets - prev.Packets, Bytes: cur.Bytes - prev.Bytes,
		L3Bytes: cur.L3Bytes - prev.L3Bytes, Last: cur.Last}
}

// alloc takes a slot for a new flow; false when none is left or the
// kernel refused to zero it (counted).
func (m *Manager) alloc() (uint32, bool) {
	s, err := m.slots.alloc()
	if err != nil && !errors.Is(err, errNoSlot) {
		m.fail(err)
	}
	return s, err == nil
}

// die evicts the flow rec of slot s: its last counts at the next harvest.
func (m *Manager) die(s uint32, rec any) {
	m.slots.die(s, rec)
	m.c.evicted.Add(1)
}

// turnsFor is how many harvests pass between the turns of a flow that
// leaves after idle ns without a packet (or of every flow, for an FDB
// aging time of idle): the largest power of two up to MaxTurns whose
// harvests last at most half of idle. A flow is then judged within 1.5
// times its idle time, so within 0.75 times its connection's timeout, and
// an FDB entry it keeps is refreshed twice within the aging time.
func turnsFor(idle int64) uint8 {
	n := uint8(1)
	for n < MaxTurns && int64(2*n)*int64(HarvestInterval) <= idle/2 {
		n *= 2
	}
	return n
}

// due reports whether slot s has its turn at harvest turn when turns (a
// power of two) harvests pass between its turns: the slots of a period
// spread evenly over its harvests.
func due(s, turn uint32, turns uint8) bool {
	return (s^turn)&(uint32(turns)-1) == 0
}

// clock is one reading of the clocks the counters are converted with:
// the wall clock, CLOCK_MONOTONIC (the program's) and the engine's.
type clock struct {
	wall, mono, eng int64
}

func (m *Manager) clock() clock {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return clock{wall: time.Now().UnixNano(), mono: ts.Nano(), eng: int64(time.Since(m.o.Start))}
}

// unix and engine convert a CLOCK_MONOTONIC time of the program's.
func (c clock) unix(m int64) int64   { return c.wall - (c.mono - m) }
func (c clock) engine(m int64) int64 { return c.eng - (c.mono - m) }
