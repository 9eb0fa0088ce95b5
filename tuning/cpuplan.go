package tuning

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Placement is how a data port's kernel RX work and its dataplane worker
// share the CPUs.
type Placement string

// Placements. See CPUPlan.
const (
	// PlacementAuto is the documented default; it resolves to
	// DefaultPlacement.
	PlacementAuto Placement = "auto"
	// PlacementSplit puts a port's IRQ vectors (and so its RX softirq) on
	// one CPU and its worker on another: the CPUs are split into a kernel
	// half and a worker half (the worker half gets the odd one).
	PlacementSplit Placement = "split"
	// PlacementSame puts a port's IRQ vectors and its worker on the same
	// CPU, ports round-robin over all CPUs.
	PlacementSame Placement = "same"
	// PlacementThreaded is PlacementSame with threaded NAPI on: the RX work
	// runs in a schedulable kernel thread ("napi/<if>-<id>") that the
	// scheduler places, instead of in softirq context on the IRQ's CPU.
	PlacementThreaded Placement = "threaded"
	// PlacementManual derives nothing: IRQ, RPS and threaded NAPI come
	// only from the port plans, and workers are not pinned.
	PlacementManual Placement = "manual"
)

// DefaultPlacement is what PlacementAuto means. Split, because a worker
// that shares its CPU with the port's RX softirq is starved by it (the
// numbers: docs/dataplane.md, Measured). The bench harness re-measures
// the placements; change this when the numbers say so.
const DefaultPlacement = PlacementSplit

// PortCPU is one data port's placement.
type PortCPU struct {
	Port      string `json:"port"`
	IRQCPU    int    `json:"irqCPU"`    // all of the port's IRQ vectors
	WorkerCPU int    `json:"workerCPU"` // the port's dataplane worker
	Threaded  bool   `json:"threaded"`  // threaded NAPI
}

// CPUPlan places N data ports over M CPUs. tuning applies its IRQ
// affinity and threaded NAPI parts; the dataplane pins its workers with
// WorkerCPU. RPS is off in every placement: with one RX queue it would
// move the protocol work to another CPU through an IPI per batch, which is
// what the placements choose explicitly.
type CPUPlan struct {
	Requested Placement `json:"requested"`
	Placement Placement `json:"placement"` // what was applied
	CPUs      CPUSet    `json:"cpus"`
	Ports     []PortCPU `json:"ports,omitempty"`
	// Housekeeping are the CPUs for the supervisor's own threads (the
	// fast path's manager, the dashboard, the router services, the Go
	// runtime's): the kernel half of a split placement, which leaves the
	// worker half to the workers. Empty: anywhere. Their work is
	// occasional bursts that would otherwise take the CPU from a worker
	// mid-batch; on the kernel half the RX softirq preempts them.
	Housekeeping CPUSet `json:"housekeeping,omitempty"`
	Note         string `json:"note,omitempty"`
}

// NewCPUPlan places ports (in order) over the online cpus.
func NewCPUPlan(ports []string, cpus CPUSet, p Placement) (CPUPlan, error) {
	cp := CPUPlan{Requested: p, Placement: p, CPUs: cpus}
	if p == "" || p == PlacementAuto {
		cp.Placement = DefaultPlacement
	}
	if p == "" {
		cp.Requested = PlacementAuto
	}
	switch cp.Placement {
	case PlacementSplit, PlacementSame, PlacementThreaded, PlacementManual:
	default:
		return CPUPlan{}, fmt.Errorf("cpu plan: unknown placement %q", p)
	}
	if cp.Placement == PlacementManual || len(ports) == 0 {
		return cp, nil
	}
	if len(cpus) == 0 {
		return CPUPlan{}, fmt.Errorf("cpu plan: no CPUs")
	}
	if !slices.IsSorted(cpus) || len(slices.Compact(slices.Clone(cpus))) != len(cpus) {
		return CPUPlan{}, fmt.Errorf("cpu plan: cpus %v not a sorted set", []int(cpus))
	}
	if cp.Placement == PlacementSplit && len(cpus) == 1 {
		cp.Placement = PlacementSame
		cp.Note = fmt.Sprintf("one CPU: split is impossible, IRQs and workers share CPU %d", cpus[0])
	}
	switch cp.Placement {
	case PlacementSplit:
		k := len(cpus) / 2
		kernel, workers := cpus[:k], cpus[k:]
		cp.Housekeeping = slices.Clone(kernel)
		for i, name := range ports {
			cp.Ports = append(cp.Ports, PortCPU{Port: name, IRQCPU: kernel[i%len(kernel)], WorkerCPU: workers[i%len(workers)]})
		}
	case PlacementSame, PlacementThreaded:
		for i, name := range ports {
			c := cpus[i%len(cpus)]
			cp.Ports = append(cp.Ports, PortCPU{Port: name, IRQCPU: c, WorkerCPU: c, Threaded: cp.Placement == PlacementThreaded})
		}
	}
	return cp, nil
}

// WorkerCPU returns the CPU the port's dataplane worker is pinned to;
// false for a port that is not in the plan or a manual placement.
func (c CPUPlan) WorkerCPU(port string) (int, bool) {
	for _, p := range c.Ports {
		if p.Port == port {
			return p.WorkerCPU, true
		}
	}
	return 0, false
}

// Workers maps each planned port to its worker CPU.
func (c CPUPlan) Workers() map[string]int {
	m := make(map[string]int, len(c.Ports))
	for _, p := range c.Ports {
		m[p.Port] = p.WorkerCPU
	}
	return m
}

// Resolve computes the CPU plan for the plan's data ports over cpus and
// returns a copy of the plan in which each data port's IRQ vectors, RPS
// and threaded NAPI are filled from it where the port plan leaves them
// unset. It also checks every CPU the plan names against cpus.
func (p Plan) Resolve(cpus CPUSet) (Plan, CPUPlan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, CPUPlan{}, err
	}
	var data []string
	for _, pp := range p.Ports {
		if pp.Data {
			data = append(data, pp.Name)
		}
	}
	cp, err := NewCPUPlan(data, cpus, p.Placement)
	if err != nil {
		return Plan{}, CPUPlan{}, err
	}
	out := p
	out.Ports = make([]PortPlan, len(p.Ports))
	var errs []error
	for i, pp := range p.Ports {
		pp.Offloads = maps.Clone(pp.Offloads)
		pp.IRQ = maps.Clone(pp.IRQ)
		for _, pc := range cp.Ports {
			if pc.Port != pp.Name {
				continue
			}
			if pp.IRQ == nil {
				pp.IRQ = map[Vector]int{}
			}
			for _, v := range Vectors {
				if _, set := pp.IRQ[v]; !set {
					pp.IRQ[v] = pc.IRQCPU
				}
			}
			if pp.RPS == "" {
				pp.RPS = "off"
			}
			if pp.Threaded == nil {
				threaded := pc.Threaded
				pp.Threaded = &threaded
			}
		}
		at := fmt.Sprintf("ports[%d]", i)
		for _, v := range slices.Sorted(maps.Keys(pp.IRQ)) {
			if !cpus.Contains(pp.IRQ[v]) {
				errs = append(errs, fmt.Errorf("%s.irq.%s: cpu %d is not online (online: %s)", at, v, pp.IRQ[v], cpus))
			}
		}
		if pp.RPS != "" && pp.RPS != "off" {
			s, _ := ParseCPUList(pp.RPS) // validated above
			for _, c := range s {
				if !cpus.Contains(c) {
					errs = append(errs, fmt.Errorf("%s.rps: cpu %d is not online (online: %s)", at, c, cpus))
				}
			}
		}
		out.Ports[i] = pp
	}
	if err := errors.Join(errs...); err != nil {
		return Plan{}, CPUPlan{}, err
	}
	return out, cp, nil
}
