package tuning

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Tuner applies plans to the system below Root.
type Tuner struct {
	// Root is the filesystem root under which /proc and /sys are found:
	// "/" on the box, a fake tree in tests.
	Root string
	// Ethtool does the ethtool calls; it must belong to the same network
	// namespace as Root's /sys/class/net.
	Ethtool Ethtool
	// Addrs lists the kernel's addresses on an interface; nil uses
	// net.InterfaceByName (the caller's network namespace).
	Addrs func(ifname string) ([]netip.Prefix, error)
	// CarrierTimeout bounds the wait for the carrier after a link reset
	// (default 5 s); CarrierPoll is the polling interval (default 50 ms).
	CarrierTimeout time.Duration
	CarrierPoll    time.Duration
	// Log receives one line per change or failure; nil uses slog.Default().
	Log *slog.Logger
}

// New returns a Tuner for the system below rootDir.
func New(rootDir string, et Ethtool) *Tuner {
	if et == nil {
		et = noEthtool{}
	}
	return &Tuner{Root: rootDir, Ethtool: et}
}

func (t *Tuner) root() root { return root(t.Root) }

func (t *Tuner) log() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

// Step is one knob with its wanted value.
type Step struct {
	Port string // "" for global knobs
	Knob Knob
	Want string
}

// OnlineCPUs reads /sys/devices/system/cpu/online.
func (t *Tuner) OnlineCPUs() (CPUSet, error) {
	s, err := t.root().read("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return ParseCPUList(s)
}

// CPUPlan resolves the plan's CPU placement over the online CPUs; the
// dataplane pins its workers with it.
func (t *Tuner) CPUPlan(p Plan) (CPUPlan, error) {
	_, cp, err := t.resolve(p)
	return cp, err
}

func (t *Tuner) resolve(p Plan) (Plan, CPUPlan, error) {
	cpus, cerr := t.OnlineCPUs()
	rp, cp, err := p.Resolve(cpus)
	if err != nil {
		if cerr != nil {
			return Plan{}, CPUPlan{}, fmt.Errorf("%w (online CPUs: %v)", err, cerr)
		}
		return Plan{}, CPUPlan{}, err
	}
	return rp, cp, nil
}

func planError(err error) []Report {
	return []Report{{Knob: "plan", Target: "tuning", Status: StatusError, Message: err.Error()}}
}

func cpuPlanReport(cp CPUPlan) Report {
	var parts []string
	for _, pc := range cp.Ports {
		s := fmt.Sprintf("%s irq cpu%d worker cpu%d", pc.Port, pc.IRQCPU, pc.WorkerCPU)
		if pc.Threaded {
			s += " threaded"
		}
		parts = append(parts, s)
	}
	msg := strings.Join(parts, "; ")
	return Report{
		Knob: "cpu-plan", Target: "cpus " + cp.CPUs.String(),
		Wanted: string(cp.Requested), After: string(cp.Placement),
		Status: StatusOK, Message: joinNotes(msg, cp.Note),
	}
}

// Steps returns the knobs of p in apply order, after resolving its CPU
// placement, and reports for what cannot be tuned at all (an invalid plan,
// a missing interface).
func (t *Tuner) Steps(p Plan) ([]Step, []Report) {
	rp, cp, err := t.resolve(p)
	if err != nil {
		return nil, planError(err)
	}
	reports := []Report{cpuPlanReport(cp)}
	r := t.root()
	var steps []Step
	if p.Copybreak != nil {
		steps = append(steps, Step{Knob: knob[uint64]{&copybreakKnob{r: r}}, Want: strconv.FormatUint(uint64(*p.Copybreak), 10)})
	}
	if p.BridgeNetfilterOff {
		for _, key := range bridgeNFKeys {
			steps = append(steps, Step{Knob: newBridgeNFKnob(r, key), Want: "0"})
		}
	}
	for _, pp := range rp.Ports {
		pt, err := t.port(pp.Name)
		if err != nil {
			reports = append(reports, Report{Knob: "port", Target: pp.Name, Status: StatusError, Message: err.Error()})
			continue
		}
		steps = append(steps, t.portSteps(pt, pp)...)
	}
	return steps, reports
}

// port finds the interface and its driver: the device/driver link in
// sysfs, else ethtool's driver info (virtual devices have no device).
func (t *Tuner) port(name string) (*port, error) {
	r := t.root()
	dir := "/sys/class/net/" + name
	if !r.exists(dir) {
		return nil, fmt.Errorf("no interface %s (no %s)", name, dir)
	}
	p := &port{name: name, r: r, et: t.Ethtool, virtual: !r.exists(dir + "/device")}
	if d, err := r.readlinkBase(dir + "/device/driver"); err == nil {
		p.driver = d
	} else if d, err := t.Ethtool.DriverName(name); err == nil {
		p.driver = d
	}
	return p, nil
}

func (t *Tuner) portSteps(pt *port, pp PortPlan) []Step {
	var reset, live []Step
	add := func(k Knob, want string) {
		s := Step{Port: pt.name, Knob: k, Want: want}
		if k.ResetsLink() {
			reset = append(reset, s)
		} else {
			live = append(live, s)
		}
	}
	if pp.RxRing != 0 || pp.TxRing != 0 {
		add(knob[ringWant]{&ringKnob{p: pt}}, ringWantString(pp.RxRing, pp.TxRing))
	}
	if pp.ITR != "" {
		add(knob[uint32]{&itrKnob{p: pt}}, string(pp.ITR))
	}
	for _, name := range featureOrder(pp.Offloads) {
		add(knob[Feature]{&featureKnob{p: pt, name: name}}, onOff(pp.Offloads[name]))
	}
	for _, v := range Vectors {
		if cpu, ok := pp.IRQ[v]; ok {
			add(knob[irqState]{&irqKnob{p: pt, vector: v}}, strconv.Itoa(cpu))
		}
	}
	if pp.RPS != "" {
		for _, q := range pt.rxQueues() {
			add(knob[CPUSet]{&rpsKnob{p: pt, queue: q}}, pp.RPS)
		}
	}
	if pp.Threaded != nil {
		add(knob[string]{&threadedKnob{p: pt}}, onOff(*pp.Threaded))
	}
	if pp.Data {
		for _, q := range t.quietSysctls(pt.name) {
			add(q.knob, q.want)
		}
	}
	return append(reset, live...)
}

// isFeature reports whether k is an offload (ethtool -K) knob.
func isFeature(k Knob) bool {
	f, ok := k.(knob[Feature])
	if ok {
		_, ok = f.typed.(*featureKnob)
	}
	return ok
}

type sysctlStep struct {
	knob Knob
	want string
}

// quietSysctls keep the kernel from forwarding or answering on a data
// port; see the package documentation for the choice of values.
func (t *Tuner) quietSysctls(ifname string) []sysctlStep {
	r := t.root()
	k := func(key string, guard func() error) Knob {
		return knob[string]{&sysctlKnob{r: r, key: strings.ReplaceAll(key, "IF", ifname), target: ifname, guard: guard}}
	}
	noV4 := func() error { return t.noAddrs(ifname, false) }
	noV6 := func() error { return t.noAddrs(ifname, true) }
	return []sysctlStep{
		{k("net/ipv4/conf/IF/forwarding", nil), "0"},
		{k("net/ipv6/conf/IF/forwarding", nil), "0"},
		{k("net/ipv6/conf/IF/accept_ra", nil), "0"},
		{k("net/ipv4/conf/IF/arp_ignore", noV4), "8"},
		{k("net/ipv4/conf/IF/arp_announce", nil), "2"},
		{k("net/ipv4/conf/IF/rp_filter", nil), "1"},
		{k("net/ipv6/conf/IF/disable_ipv6", noV6), "1"},
	}
}

// noAddrs fails if the interface has a kernel address of the family
// (IPv6 link-local addresses do not count): a data port must not have one.
func (t *Tuner) noAddrs(ifname string, v6 bool) error {
	addrs := t.Addrs
	if addrs == nil {
		addrs = stdAddrs
	}
	ps, err := addrs(ifname)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", ifname, err)
	}
	for _, p := range ps {
		a := p.Addr()
		if a.Is4() && !v6 {
			return fmt.Errorf("%s has kernel address %s: a quiet data port must have none (arp_ignore=8 would stop ARP replies for it)", ifname, p)
		}
		if a.Is6() && !a.Is4In6() && !a.IsLinkLocalUnicast() && v6 {
			return fmt.Errorf("%s has kernel address %s: a quiet data port must have none (disable_ipv6=1 would remove it)", ifname, p)
		}
	}
	return nil
}

func stdAddrs(ifname string) ([]netip.Prefix, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if addr, ok := netip.AddrFromSlice(n.IP); ok {
				ones, _ := n.Mask.Size()
				out = append(out, netip.PrefixFrom(addr.Unmap(), ones))
			}
		}
	}
	return out, nil
}

// Apply brings the system to the plan, in order: global knobs; per port
// the knobs that reset the link (rings, rx-checksum, rx-hashing,
// rx-vlan-hw-parse, rx-fcs, rx-all); a bounded wait for the carrier of
// every port whose link was reset; then the live knobs (ITR, offloads,
// IRQ affinity, RPS, threaded NAPI, sysctls). Finally it re-reads every
// offload it set, because the kernel adjusts dependent features silently.
// An invalid plan changes nothing and returns one error report.
func (t *Tuner) Apply(ctx context.Context, p Plan) []Report {
	steps, reports := t.Steps(p)
	if len(steps) == 0 {
		return reports
	}
	var global, reset, live []Step
	for _, s := range steps {
		switch {
		case s.Port == "":
			global = append(global, s)
		case s.Knob.ResetsLink():
			reset = append(reset, s)
		default:
			live = append(live, s)
		}
	}
	r := t.root()
	carrierBefore := map[string]bool{}
	for _, s := range reset {
		v, _ := r.read("/sys/class/net/" + s.Port + "/carrier")
		carrierBefore[s.Port] = v == "1"
	}
	type appliedFeature struct {
		step  Step
		after string
	}
	var features []appliedFeature
	run := func(ss []Step) (changed map[string]bool) {
		changed = map[string]bool{}
		for _, s := range ss {
			if err := ctx.Err(); err != nil {
				reports = append(reports, Report{Knob: s.Knob.Name(), Target: s.Knob.Target(), Wanted: s.Want,
					Status: StatusError, Message: "not applied: " + err.Error(), ResetsLink: s.Knob.ResetsLink()})
				continue
			}
			rep := s.Knob.Apply(s.Want)
			t.logReport(rep)
			if rep.Status == StatusChanged {
				changed[s.Port] = true
			}
			if isFeature(s.Knob) && (rep.Status == StatusChanged || rep.Status == StatusOK) {
				features = append(features, appliedFeature{s, rep.After})
			}
			reports = append(reports, rep)
		}
		return changed
	}
	run(global)
	changed := run(reset)
	var waitFor []string
	seen := map[string]bool{}
	for _, s := range reset {
		if !changed[s.Port] || seen[s.Port] {
			continue
		}
		seen[s.Port] = true
		if !carrierBefore[s.Port] {
			reports = append(reports, Report{Knob: "carrier-wait", Target: s.Port, Status: StatusOK,
				Message: "no carrier before the reset; not waiting for it"})
			continue
		}
		waitFor = append(waitFor, s.Port)
	}
	if len(waitFor) > 0 {
		reports = append(reports, t.waitCarrier(ctx, waitFor)...)
	}
	run(live)
	for _, f := range features {
		if c := f.step.Knob.Check(f.step.Want); c.Status != StatusOK {
			c.Status = StatusError
			c.Message = joinNotes(fmt.Sprintf("was %s after its step, now %s: a later step changed it", f.after, c.After), c.Message)
			t.logReport(c)
			reports = append(reports, c)
		}
	}
	return reports
}

// Read reports the current state of every knob of the plan without
// changing anything: ok where it matches, differs where it does not.
func (t *Tuner) Read(p Plan) []Report {
	steps, reports := t.Steps(p)
	for _, s := range steps {
		reports = append(reports, s.Knob.Check(s.Want))
	}
	return reports
}

// waitCarrier polls /sys/class/net/<if>/carrier until it reads 1 for
// every port or CarrierTimeout has passed.
func (t *Tuner) waitCarrier(ctx context.Context, ports []string) []Report {
	timeout, poll := t.CarrierTimeout, t.CarrierPoll
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	r := t.root()
	start := time.Now()
	pending := append([]string(nil), ports...)
	var out []Report
	for {
		var still []string
		for _, port := range pending {
			v, err := r.read("/sys/class/net/" + port + "/carrier")
			if err == nil && v == "1" {
				out = append(out, Report{Knob: "carrier-wait", Target: port, After: "1", Status: StatusOK,
					Message: fmt.Sprintf("carrier back %s after the reset", time.Since(start).Round(time.Millisecond))})
				continue
			}
			still = append(still, port)
		}
		pending = still
		if len(pending) == 0 {
			return out
		}
		var why string
		select {
		case <-ctx.Done():
			why = ctx.Err().Error()
		case <-time.After(poll):
			if time.Since(start) < timeout {
				continue
			}
			why = fmt.Sprintf("timed out after %s", timeout)
		}
		for _, port := range pending {
			v, _ := r.read("/sys/class/net/" + port + "/carrier")
			rep := Report{Knob: "carrier-wait", Target: port, After: v, Status: StatusError,
				Message: "no carrier after the link reset: " + why}
			t.logReport(rep)
			out = append(out, rep)
		}
		return out
	}
}

func (t *Tuner) logReport(r Report) {
	switch r.Status {
	case StatusChanged:
		t.log().Info("tuning: changed", "knob", r.Knob, "target", r.Target, "before", r.Before, "after", r.After, "message", r.Message)
	case StatusError:
		t.log().Warn("tuning: failed", "knob", r.Knob, "target", r.Target, "wanted", r.Wanted, "message", r.Message)
	}
}
