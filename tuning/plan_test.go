package tuning

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan Plan
		errs []string // substrings; none means valid
	}{
		{name: "empty", plan: Plan{}},
		{name: "full", plan: e1000ePlan()},
		{name: "data port preset", plan: Plan{Ports: []PortPlan{DataPort("eth1")}}},
		{name: "placement", plan: Plan{Placement: "spread"}, errs: []string{"placement: \"spread\""}},
		{name: "itr", plan: Plan{Ports: []PortPlan{{Name: "eth1", ITR: "500000"}}}, errs: []string{"ports[0].itr: itr 500000 interrupts/s: out of range"}},
		{name: "itr mode", plan: Plan{Ports: []PortPlan{{Name: "eth1", ITR: "adaptive"}}}, errs: []string{"ports[0].itr"}},
		{name: "rings", plan: Plan{Ports: []PortPlan{{Name: "eth1", RxRing: 8192, TxRing: 32}}},
			errs: []string{"ports[0].rxRing: 8192 out of range 64..4096", "ports[0].txRing: 32 out of range"}},
		{name: "legacy feature names", plan: Plan{Ports: []PortPlan{{Name: "eth1", Offloads: map[string]bool{"gro": false, "scatter-gather": true, "tso": false}}}},
			errs: []string{"ports[0].offloads.gro: not a kernel feature name; use rx-gro", "offloads.scatter-gather: not a kernel feature name; use tx-scatter-gather", "offloads.tso"}},
		{name: "bad feature name", plan: Plan{Ports: []PortPlan{{Name: "eth1", Offloads: map[string]bool{"RX GRO": false}}}}, errs: []string{`"RX GRO" is not a feature name`}},
		{name: "tso without checksum", plan: Plan{Ports: []PortPlan{{Name: "eth1", Offloads: map[string]bool{"tx-checksum-ip-generic": false, "tx-tcp-segmentation": true}}}},
			errs: []string{"tx-tcp-segmentation on needs TX checksumming"}},
		{name: "tso with ipv4 checksum", plan: Plan{Ports: []PortPlan{{Name: "eth1", Offloads: map[string]bool{"tx-checksum-ip-generic": false, "tx-checksum-ipv4": true, "tx-tcp-segmentation": true}}}}},
		{name: "gso without sg", plan: Plan{Ports: []PortPlan{{Name: "eth1", Offloads: map[string]bool{"tx-scatter-gather": false, "tx-generic-segmentation": true}}}},
			errs: []string{"tx-generic-segmentation on needs tx-scatter-gather on"}},
		{name: "duplicate port", plan: Plan{Ports: []PortPlan{{Name: "eth1"}, {Name: "eth1"}}}, errs: []string{`ports[1].name: "eth1" already at ports[0]`}},
		{name: "bad name", plan: Plan{Ports: []PortPlan{{Name: "eth/1"}, {Name: ""}, {Name: "a-very-long-interface"}}},
			errs: []string{"ports[0].name", "ports[1].name", "ports[2].name"}},
		{name: "irq", plan: Plan{Ports: []PortPlan{{Name: "eth1", IRQ: map[Vector]int{"rx-0": 1, VectorTX: -1}}}},
			errs: []string{`ports[0].irq: unknown vector "rx-0"`, "ports[0].irq.tx: cpu -1 out of range"}},
		{name: "rps", plan: Plan{Ports: []PortPlan{{Name: "eth1", RPS: "1-0"}, {Name: "eth2", RPS: "0-1"}, {Name: "eth3", RPS: "off"}}},
			errs: []string{"ports[0].rps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan.Validate()
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, want)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.errs) {
				t.Errorf("Validate() gave %d errors, want %d:\n%v", n, len(tc.errs), err)
			}
		})
	}
}

func TestPlanJSON(t *testing.T) {
	in := `{
		"placement": "threaded",
		"copybreak": 256,
		"bridgeNetfilterOff": true,
		"ports": [
			{"name": "eth1", "data": true, "itr": 20000, "rxRing": 1024, "txRing": 512,
			 "offloads": {"rx-gro": false, "tx-tcp-segmentation": false},
			 "irq": {"rx": 0, "tx": 0, "other": 1}, "rps": "1", "threaded": true},
			{"name": "eth0", "itr": "dynamic-conservative"}
		]
	}`
	var p Plan
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	want := Plan{
		Placement: PlacementThreaded, Copybreak: ptr(uint32(256)), BridgeNetfilterOff: true,
		Ports: []PortPlan{
			{Name: "eth1", Data: true, ITR: "20000", RxRing: 1024, TxRing: 512,
				Offloads: map[string]bool{"rx-gro": false, "tx-tcp-segmentation": false},
				IRQ:      map[Vector]int{VectorRX: 0, VectorTX: 0, VectorOther: 1}, RPS: "1", Threaded: ptr(true)},
			{Name: "eth0", ITR: ITRConservative},
		},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("unmarshal (-want +got):\n%s", diff)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var bad Plan
	if err := json.Unmarshal([]byte(`{"ports":[{"name":"eth1","itr":true}]}`), &bad); err == nil {
		t.Errorf("itr true accepted")
	}
}

func TestNewCPUPlanExamples(t *testing.T) {
	for _, tc := range []struct {
		ports []string
		cpus  CPUSet
		p     Placement
		want  CPUPlan
	}{
		{[]string{"eth1", "eth2"}, CPUSet{0, 1}, PlacementAuto, CPUPlan{Requested: PlacementAuto, Placement: PlacementSplit, CPUs: CPUSet{0, 1},
			Ports: []PortCPU{{"eth1", 0, 1, false}, {"eth2", 0, 1, false}}, Housekeeping: CPUSet{0}}},
		{[]string{"eth1", "eth2"}, CPUSet{0, 1, 2, 3}, PlacementSplit, CPUPlan{Requested: PlacementSplit, Placement: PlacementSplit, CPUs: CPUSet{0, 1, 2, 3},
			Ports: []PortCPU{{"eth1", 0, 2, false}, {"eth2", 1, 3, false}}, Housekeeping: CPUSet{0, 1}}},
		{[]string{"eth1", "eth2"}, CPUSet{0, 1}, PlacementSame, CPUPlan{Requested: PlacementSame, Placement: PlacementSame, CPUs: CPUSet{0, 1},
			Ports: []PortCPU{{"eth1", 0, 0, false}, {"eth2", 1, 1, false}}}},
		{[]string{"eth1"}, CPUSet{2, 3}, PlacementThreaded, CPUPlan{Requested: PlacementThreaded, Placement: PlacementThreaded, CPUs: CPUSet{2, 3},
			Ports: []PortCPU{{"eth1", 2, 2, true}}}},
		{[]string{"eth1", "eth2"}, CPUSet{0}, "", CPUPlan{Requested: PlacementAuto, Placement: PlacementSame, CPUs: CPUSet{0},
			Ports: []PortCPU{{"eth1", 0, 0, false}, {"eth2", 0, 0, false}},
			Note:  "one CPU: split is impossible, IRQs and workers share CPU 0"}},
		{[]string{"eth1"}, CPUSet{0, 1}, PlacementManual, CPUPlan{Requested: PlacementManual, Placement: PlacementManual, CPUs: CPUSet{0, 1}}},
		{nil, nil, PlacementSplit, CPUPlan{Requested: PlacementSplit, Placement: PlacementSplit}},
	} {
		got, err := NewCPUPlan(tc.ports, tc.cpus, tc.p)
		if err != nil {
			t.Errorf("NewCPUPlan(%v, %v, %q): %v", tc.ports, tc.cpus, tc.p, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("NewCPUPlan(%v, %v, %q) (-want +got):\n%s", tc.ports, tc.cpus, tc.p, diff)
		}
	}
	for _, bad := range []struct {
		cpus CPUSet
		p    Placement
	}{{nil, PlacementSplit}, {CPUSet{1, 0}, PlacementSame}, {CPUSet{0}, "spread"}} {
		if _, err := NewCPUPlan([]string{"eth1"}, bad.cpus, bad.p); err == nil {
			t.Errorf("NewCPUPlan(%v, %q) accepted", bad.cpus, bad.p)
		}
	}
	if _, err := NewCPUPlan(nil, nil, "spread"); err == nil {
		t.Errorf("NewCPUPlan without ports accepted an unknown placement")
	}
}

// TestNewCPUPlanProperties checks 1..4 ports over 1..4 CPUs for every
// placement against the placement rules.
func TestNewCPUPlanProperties(t *testing.T) {
	for _, pl := range []Placement{PlacementAuto, PlacementSplit, PlacementSame, PlacementThreaded} {
		for m := 1; m <= 4; m++ {
			for n := 1; n <= 4; n++ {
				t.Run(fmt.Sprintf("%s/%dports/%dcpus", pl, n, m), func(t *testing.T) {
					var ports []string
					for i := range n {
						ports = append(ports, fmt.Sprintf("eth%d", i+1))
					}
					var cpus CPUSet
					for c := range m {
						cpus = append(cpus, c+4) // not starting at 0
					}
					cp, err := NewCPUPlan(ports, cpus, pl)
					if err != nil {
						t.Fatal(err)
					}
					if len(cp.Ports) != n {
						t.Fatalf("%d ports placed, want %d", len(cp.Ports), n)
					}
					irqLoad, workerLoad := map[int]int{}, map[int]int{}
					for i, pc := range cp.Ports {
						if pc.Port != ports[i] {
							t.Errorf("port %d is %s, want %s", i, pc.Port, ports[i])
						}
						if !cpus.Contains(pc.IRQCPU) || !cpus.Contains(pc.WorkerCPU) {
							t.Errorf("%+v uses a CPU outside %v", pc, cpus)
						}
						if w, ok := cp.WorkerCPU(pc.Port); !ok || w != pc.WorkerCPU {
							t.Errorf("WorkerCPU(%s) = %d, %v", pc.Port, w, ok)
						}
						irqLoad[pc.IRQCPU]++
						workerLoad[pc.WorkerCPU]++
						split := cp.Placement == PlacementSplit
						if split != (pc.IRQCPU != pc.WorkerCPU) {
							t.Errorf("%s: %+v", cp.Placement, pc)
						}
						if pc.Threaded != (pl == PlacementThreaded) {
							t.Errorf("threaded %v under %s", pc.Threaded, pl)
						}
					}
					wantSplit := (pl == PlacementSplit || pl == PlacementAuto) && m > 1
					if (cp.Placement == PlacementSplit) != wantSplit {
						t.Errorf("placement %s, want split=%v", cp.Placement, wantSplit)
					}
					if cp.Placement == PlacementSplit {
						// No CPU runs both kernel RX work and a worker.
						for c := range irqLoad {
							if workerLoad[c] > 0 {
								t.Errorf("cpu %d has IRQs and workers", c)
							}
						}
					}
					// Balanced: loads differ by at most one over the CPUs in use.
					for what, load := range map[string]map[int]int{"irq": irqLoad, "worker": workerLoad} {
						lo, hi := n, 0
						for _, l := range load {
							lo, hi = min(lo, l), max(hi, l)
						}
						if hi-lo > 1 {
							t.Errorf("%s load unbalanced: %v", what, load)
						}
					}
				})
			}
		}
	}
}

func TestResolve(t *testing.T) {
	p := Plan{Ports: []PortPlan{
		DataPort("eth1"),
		{Name: "eth2", Data: true, IRQ: map[Vector]int{VectorOther: 0}, RPS: "1", Threaded: ptr(true)},
		{Name: "eth0", ITR: ITROff},
	}}
	rp, cp, err := p.Resolve(CPUSet{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []PortPlan{
		{Name: "eth1", Data: true, Offloads: DataPortOffloads(), IRQ: map[Vector]int{VectorRX: 0, VectorTX: 0, VectorOther: 0}, RPS: "off", Threaded: ptr(false)},
		{Name: "eth2", Data: true, IRQ: map[Vector]int{VectorRX: 0, VectorTX: 0, VectorOther: 0}, RPS: "1", Threaded: ptr(true)},
		{Name: "eth0", ITR: ITROff},
	}
	if diff := cmp.Diff(want, rp.Ports); diff != "" {
		t.Errorf("resolved ports (-want +got):\n%s", diff)
	}
	if p.Ports[0].IRQ != nil || p.Ports[1].IRQ[VectorRX] != 0 || len(p.Ports[1].IRQ) != 1 {
		t.Errorf("Resolve modified its input: %+v", p.Ports)
	}
	if w, ok := cp.WorkerCPU("eth2"); !ok || w != 1 {
		t.Errorf("WorkerCPU(eth2) = %d, %v; want 1", w, ok)
	}

	// CPUs must be online.
	bad := Plan{Placement: PlacementManual, Ports: []PortPlan{{Name: "eth1", IRQ: map[Vector]int{VectorRX: 2}, RPS: "0-3"}}}
	_, _, err = bad.Resolve(CPUSet{0, 1})
	if err == nil || !strings.Contains(err.Error(), "ports[0].irq.rx: cpu 2 is not online") || !strings.Contains(err.Error(), "ports[0].rps: cpu 3 is not online") {
		t.Errorf("Resolve(offline cpus) = %v", err)
	}
}

func TestFeatureOrder(t *testing.T) {
	got := featureOrder(map[string]bool{
		"rx-gro": false, "tx-tcp-segmentation": true, "tx-checksum-ip-generic": true, "tx-scatter-gather": true,
		"tx-generic-segmentation": false, "tx-checksum-ipv6": false, "rx-hashing": true,
	})
	want := []string{
		// off: segmentation, then checksums, then the rest
		"tx-generic-segmentation", "tx-checksum-ipv6", "rx-gro",
		// on: the rest, then checksums, scatter-gather, segmentation
		"rx-hashing", "tx-checksum-ip-generic", "tx-scatter-gather", "tx-tcp-segmentation",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
