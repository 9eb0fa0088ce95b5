package main

import (
	"fmt"
	"slices"
	"strings"

	"e1kbox/tuning"
)

// cpuPlace is where the work of one path runs; -1 is "nowhere" (RX
// steering off, no worker).
type cpuPlace struct {
	Gen    int // the generator thread
	RX     int // RPS target of b0: the box's receive softirq
	Worker int // e1kbox's worker for b0
	Sink   int // RPS target of the sink veth: the sink's receive softirq
}

func (c cpuPlace) String() string {
	parts := []string{fmt.Sprintf("gen cpu%d", c.Gen)}
	if c.RX >= 0 {
		parts = append(parts, fmt.Sprintf("box rx cpu%d", c.RX))
	}
	if c.Worker >= 0 {
		parts = append(parts, fmt.Sprintf("worker cpu%d", c.Worker))
	}
	parts = append(parts, fmt.Sprintf("sink cpu%d", c.Sink))
	return strings.Join(parts, ", ")
}

// placeFor places a path's work on cpus (sorted). The box's receive work
// goes to the first CPU (its "IRQ" CPU, by RPS on b0); e1kbox's follows
// the tuning package's CPU plan for the two box ports, so the worker
// lands where the appliance pins it. The generator takes a CPU the box
// does not use if there is one, else the box's receive CPU rather than
// the worker's; the sink hop is steered to a CPU other than the box's
// receive CPU (the generator's, else the worker's) so that forwarded
// frames do not queue behind incoming ones in that CPU's backlog.
func placeFor(p Path, cpus tuning.CPUSet) (cpuPlace, error) {
	if len(cpus) == 0 {
		return cpuPlace{}, fmt.Errorf("placement: no CPUs")
	}
	pl := cpuPlace{RX: cpus[0], Worker: -1}
	switch p.Kind {
	case kindDirect:
		// The generator alone on the last CPU, the sink on the first.
		pl.RX = -1
		pl.Gen = cpus[len(cpus)-1]
		pl.Sink = cpus[0]
		return pl, nil
	case kindE1kbox:
		plan, err := tuning.NewCPUPlan(boxPorts, cpus, p.Placement)
		if err != nil {
			return cpuPlace{}, fmt.Errorf("placement: %w", err)
		}
		if len(plan.Ports) == 0 {
			return cpuPlace{}, fmt.Errorf("placement %q: no CPU plan for the box ports (use split, same or threaded)", p.Placement)
		}
		pl.RX, pl.Worker = plan.Ports[0].IRQCPU, plan.Ports[0].WorkerCPU
	}
	used := []int{pl.RX, pl.Worker}
	pl.Gen = -1
	for _, c := range cpus {
		if !slices.Contains(used, c) {
			pl.Gen = c
			break
		}
	}
	if pl.Gen < 0 {
		pl.Gen = pl.RX
		// With the fast path the box's work is the receive CPU's (the
		// worker sees only new flows and exceptions): the generator
		// takes the worker's CPU, as it takes the kernel paths' spare one.
		if p.Kind == kindE1kbox && !p.workerForwards() && pl.Worker >= 0 && pl.Worker != pl.RX {
			pl.Gen = pl.Worker
		}
	}
	// The sink hop must not share the box's receive CPU (its backlog would
	// hold forwarded frames behind incoming ones): the generator's CPU,
	// or, when the generator shares the receive CPU (e1kbox split on two
	// CPUs), the worker's.
	pl.Sink = pl.Gen
	if pl.Sink == pl.RX && pl.Worker >= 0 && pl.Worker != pl.RX {
		pl.Sink = pl.Worker
	}
	return pl, nil
}

// slowPlace is the placement for frames that all take the e1kbox
// worker's path (new connections) on path p placed at pl: the placement
// of p with its fast path off, when that keeps pl's sink CPU (the sink's
// steering is set up for pl); else pl.
func slowPlace(p Path, pl cpuPlace, cpus tuning.CPUSet) cpuPlace {
	if p.Kind != kindE1kbox || p.workerForwards() {
		return pl
	}
	p.FastPath = "off"
	if s, err := placeFor(p, cpus); err == nil && s.Sink == pl.Sink && s.RX == pl.RX && s.Worker == pl.Worker {
		return s
	}
	return pl
}
