package tuning

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// brief is the comparable part of a Report.
type brief struct {
	Knob, Target, Status, After string
}

func briefs(rs []Report) []brief {
	out := make([]brief, len(rs))
	for i, r := range rs {
		out[i] = brief{r.Knob, r.Target, string(r.Status), r.After}
	}
	return out
}

func find(t *testing.T, rs []Report, knob, target string) Report {
	t.Helper()
	for _, r := range rs {
		if r.Knob == knob && r.Target == target {
			return r
		}
	}
	t.Fatalf("no report for %s %s in %v", knob, target, rs)
	return Report{}
}

func ptr[T any](v T) *T { return &v }

const noBridgeNF = "kernel has no bridge netfilter; bridged traffic bypasses netfilter (effectively off)"

func e1000ePlan() Plan {
	return Plan{
		Placement:          PlacementSplit,
		Copybreak:          ptr(uint32(128)),
		BridgeNetfilterOff: true,
		Ports: []PortPlan{
			{Name: "eth1", Data: true, ITR: "20000", RxRing: 1000, TxRing: 100, Offloads: DataPortOffloads()},
			{Name: "eth2", Data: true, ITR: ITRConservative, Offloads: DataPortOffloads(), Threaded: ptr(true)},
			{Name: "eth0", ITR: ITROff},
		},
	}
}

func quietBriefs(ifname, fwd4, fwd6 string) []brief {
	return []brief{
		{"net.ipv4.conf." + ifname + ".forwarding", ifname, fwd4, "0"},
		{"net.ipv6.conf." + ifname + ".forwarding", ifname, fwd6, "0"},
		{"net.ipv6.conf." + ifname + ".accept_ra", ifname, "changed", "0"},
		{"net.ipv4.conf." + ifname + ".arp_ignore", ifname, "changed", "8"},
		{"net.ipv4.conf." + ifname + ".arp_announce", ifname, "changed", "2"},
		{"net.ipv4.conf." + ifname + ".rp_filter", ifname, "changed", "1"},
		{"net.ipv6.conf." + ifname + ".disable_ipv6", ifname, "changed", "1"},
	}
}

func dataOffloadBriefs(ifname string) []brief {
	// Off first, segmentation before the rest; rx-lro is fixed off on e1000e.
	// tx-tcp-accecn-segmentation is not in the fake kernel's feature set
	// (an older kernel), tx-tcp-ecn-segmentation is fixed off.
	return []brief{
		{"tx-generic-segmentation", ifname, "changed", "off"},
		{"tx-tcp-accecn-segmentation", ifname, "unavailable", ""},
		{"tx-tcp-ecn-segmentation", ifname, "ok", "off"},
		{"tx-tcp-mangleid-segmentation", ifname, "ok", "off"},
		{"tx-tcp-segmentation", ifname, "changed", "off"},
		{"tx-tcp6-segmentation", ifname, "changed", "off"},
		{"rx-gro", ifname, "changed", "off"},
		{"rx-lro", ifname, "ok", "off"},
	}
}

func TestApplyE1000e(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth0", 24)
	eth1 := f.e1000e("eth1", 27)
	f.e1000e("eth2", 30)
	tu := f.tuner()
	plan := e1000ePlan()

	got := tu.Apply(context.Background(), plan)

	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "split"},
		{"copybreak", "e1000e (all ports)", "changed", "128"},
		{"net.bridge.bridge-nf-call-iptables", "bridge netfilter", "unavailable", ""},
		{"net.bridge.bridge-nf-call-ip6tables", "bridge netfilter", "unavailable", ""},
		{"net.bridge.bridge-nf-call-arptables", "bridge netfilter", "unavailable", ""},
		{"rings", "eth1", "changed", "rx 1000 tx 104"},
		{"carrier-wait", "eth1", "ok", "1"},
		{"itr", "eth1", "changed", "rx-usecs 50 (20000 ints/s)"},
	}
	want = append(want, dataOffloadBriefs("eth1")...)
	want = append(want,
		brief{"irq-affinity", "eth1-rx-0", "changed", "irq 27 cpus 0 effective 1"},
		brief{"irq-affinity", "eth1-tx-0", "changed", "irq 28 cpus 0 effective 1"},
		brief{"irq-affinity", "eth1", "changed", "irq 29 cpus 0 effective 1"},
		brief{"rps-cpus", "eth1 rx-0", "ok", "off"},
		brief{"threaded-napi", "eth1", "ok", "off"},
	)
	want = append(want, quietBriefs("eth1", "ok", "ok")...)
	want = append(want, brief{"itr", "eth2", "ok", "rx-usecs 3 (dynamic-conservative)"})
	want = append(want, dataOffloadBriefs("eth2")...)
	want = append(want,
		brief{"irq-affinity", "eth2-rx-0", "changed", "irq 30 cpus 0 effective 1"},
		brief{"irq-affinity", "eth2-tx-0", "changed", "irq 31 cpus 0 effective 1"},
		brief{"irq-affinity", "eth2", "changed", "irq 32 cpus 0 effective 1"},
		brief{"rps-cpus", "eth2 rx-0", "ok", "off"},
		brief{"threaded-napi", "eth2", "changed", "on"},
	)
	want = append(want, quietBriefs("eth2", "ok", "ok")...)
	want = append(want, brief{"itr", "eth0", "changed", "rx-usecs 0 (off)"})
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Fatalf("first apply (-want +got):\n%s\nreports:\n%s", diff, reportLines(got))
	}

	// Reports carry the details the dashboard shows.
	if r := find(t, got, "rings", "eth1"); !r.ResetsLink || !strings.Contains(r.Message, "tx 100 rounded up to 104") {
		t.Errorf("rings report = %+v, want ResetsLink and the rounding note", r)
	}
	if r := find(t, got, "net.bridge.bridge-nf-call-iptables", "bridge netfilter"); r.Message != noBridgeNF {
		t.Errorf("bridge-nf message = %q, want %q", r.Message, noBridgeNF)
	}
	if r := find(t, got, "irq-affinity", "eth1"); !strings.Contains(r.Message, "effective_affinity_list is still 1") {
		t.Errorf("irq report for the link vector = %q, want the effective-affinity note", r.Message)
	}
	// The system state, read behind the tuner's back.
	for file, want := range map[string]string{
		"sys/module/e1000e/parameters/copybreak":   "128",
		"proc/irq/27/smp_affinity_list":            "0",
		"proc/irq/32/smp_affinity_list":            "0",
		"proc/irq/24/smp_affinity_list":            "0-1", // eth0 is not a data port
		"sys/class/net/eth2/threaded":              "1",
		"proc/sys/net/ipv4/conf/eth1/arp_ignore":   "8",
		"proc/sys/net/ipv6/conf/eth2/disable_ipv6": "1",
	} {
		if got := f.read(file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if eth1.ring.RX != 1000 || eth1.ring.TX != 104 || eth1.itr != 20000 {
		t.Errorf("eth1 ring %+v itr %d, want rx 1000 tx 104 itr 20000", eth1.ring, eth1.itr)
	}

	// Ordering: the ring change came first, with carrier up; every later
	// call on eth1 ran after the carrier was back.
	ops := f.et.opsSnapshot()
	var eth1Ops []fakeOp
	for _, op := range ops {
		if op.Ifname == "eth1" {
			eth1Ops = append(eth1Ops, op)
		}
	}
	if len(eth1Ops) < 2 || !strings.HasPrefix(eth1Ops[0].Op, "ring ") {
		t.Fatalf("eth1 ops = %v, want the ring change first", eth1Ops)
	}
	for _, op := range eth1Ops {
		if op.Carrier != "1" {
			t.Errorf("op %q on eth1 ran with carrier %q, want 1 (after the wait)", op.Op, op.Carrier)
		}
	}

	// Apply twice: nothing changes, nothing is called.
	again := tu.Apply(context.Background(), plan)
	for _, r := range again {
		if r.Status != StatusOK && r.Status != StatusUnavailable {
			t.Errorf("second apply: %v, want ok or unavailable", r)
		}
		if r.Status == StatusOK && r.Knob != "cpu-plan" && !strings.Contains(r.Message, "already set") {
			t.Errorf("second apply: %v, want message \"already set\"", r)
		}
	}
	if n := len(f.et.opsSnapshot()); n != len(ops) {
		t.Errorf("second apply made %d ethtool changes: %v", n-len(ops), f.et.opsSnapshot()[len(ops):])
	}

	// Read is read-only and agrees; a change behind our back shows as differs.
	f.file("proc/sys/net/ipv4/conf/eth1/arp_ignore", "0\n")
	read := tu.Read(plan)
	for _, r := range read {
		wantStatus := StatusOK
		switch {
		case r.Knob == "net.ipv4.conf.eth1.arp_ignore":
			wantStatus = StatusDiffers
		case strings.HasPrefix(r.Knob, "net.bridge."), r.Knob == "tx-tcp-accecn-segmentation":
			wantStatus = StatusUnavailable
		}
		if r.Status != wantStatus {
			t.Errorf("read: %v, want %s", r, wantStatus)
		}
	}
	if got := f.read("proc/sys/net/ipv4/conf/eth1/arp_ignore"); got != "0" {
		t.Errorf("Read wrote arp_ignore: %q", got)
	}
}

func reportLines(rs []Report) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

func TestApplyCarrierTimeout(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	f.et.resetDown = -1 // the link never comes back
	tu := f.tuner()
	tu.CarrierTimeout = 200 * time.Millisecond
	start := time.Now()
	got := tu.Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", RxRing: 512, ITR: "8000"},
	}})
	if d := time.Since(start); d < tu.CarrierTimeout {
		t.Errorf("Apply returned after %s, before the carrier timeout %s", d, tu.CarrierTimeout)
	}
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"rings", "eth1", "changed", "rx 512 tx 256"},
		{"carrier-wait", "eth1", "error", "0"},
		{"itr", "eth1", "changed", "rx-usecs 125 (8000 ints/s)"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestApplyWaitsAfterLaterResettingStep(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	tu := f.tuner()
	// rings are already 256 (no change), rx-hashing goes off (a reset).
	got := tu.Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", RxRing: 256, Offloads: map[string]bool{"rx-hashing": false}, ITR: ITRSimplified},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"rings", "eth1", "ok", "rx 256 tx 256"},
		{"rx-hashing", "eth1", "changed", "off"},
		{"carrier-wait", "eth1", "ok", "1"},
		{"itr", "eth1", "changed", "rx-usecs 4 (simplified)"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ops := f.et.opsSnapshot(); len(ops) != 2 || ops[1].Carrier != "1" {
		t.Errorf("ops %v: want the coalesce call after the carrier came back", ops)
	}
}

func TestApplyNoCarrierBefore(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	f.file("sys/class/net/eth1/carrier", "0\n") // cable unplugged
	f.et.resetDown = -1
	tu := f.tuner()
	tu.CarrierTimeout = time.Minute // would fail the test's patience if used
	got := tu.Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Offloads: map[string]bool{"rx-hashing": false, "rx-gro": false}},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"rx-hashing", "eth1", "changed", "off"},
		{"carrier-wait", "eth1", "ok", ""},
		{"rx-gro", "eth1", "changed", "off"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if r := find(t, got, "rx-hashing", "eth1"); !r.ResetsLink {
		t.Errorf("rx-hashing report %+v: want ResetsLink", r)
	}
}

func TestApplyCanceled(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := f.tuner().Apply(ctx, Plan{Placement: PlacementManual, Ports: []PortPlan{{Name: "eth1", ITR: ITROff}}})
	if r := find(t, got, "itr", "eth1"); r.Status != StatusError || !strings.Contains(r.Message, "canceled") {
		t.Errorf("itr report %+v, want a canceled error", r)
	}
	if ops := f.et.opsSnapshot(); len(ops) != 0 {
		t.Errorf("canceled apply changed %v", ops)
	}
}

func TestApplyInvalidPlanChangesNothing(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	got := f.tuner().Apply(context.Background(), Plan{Ports: []PortPlan{
		{Name: "eth1", ITR: "200000", Offloads: map[string]bool{"gro": false}},
	}})
	if len(got) != 1 || got[0].Status != StatusError || got[0].Knob != "plan" {
		t.Fatalf("Apply(invalid) = %v, want one plan error", got)
	}
	for _, want := range []string{"ports[0].itr", "ports[0].offloads.gro", "use rx-gro"} {
		if !strings.Contains(got[0].Message, want) {
			t.Errorf("message %q does not contain %q", got[0].Message, want)
		}
	}
	if ops := f.et.opsSnapshot(); len(ops) != 0 {
		t.Errorf("invalid plan changed %v", ops)
	}
}

func TestApplyMissingInterface(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	got := f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth7", ITR: ITROff}, {Name: "eth1", ITR: ITROff},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"port", "eth7", "error", ""},
		{"itr", "eth1", "changed", "rx-usecs 0 (off)"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCPUPlanFromTuner(t *testing.T) {
	f := newFakeSys(t)
	tu := f.tuner()
	cp, err := tu.CPUPlan(Plan{Ports: []PortPlan{DataPort("eth1"), DataPort("eth2"), {Name: "eth0"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"eth1": 1, "eth2": 1}
	if diff := cmp.Diff(want, cp.Workers()); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	if cp.Placement != PlacementSplit || cp.Requested != PlacementAuto {
		t.Errorf("placement %s (requested %s), want split (auto)", cp.Placement, cp.Requested)
	}
	if _, ok := cp.WorkerCPU("eth0"); ok {
		t.Errorf("eth0 is not a data port but has a worker CPU")
	}
}
