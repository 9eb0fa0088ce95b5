package tuning

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// port is what the NIC knobs know about their interface.
type port struct {
	name    string
	driver  string // "e1000e", "veth", "virtio_net", ... ("" if unknown)
	virtual bool   // no /sys/class/net/<if>/device: veth, bridge, tun
	r       root
	et      Ethtool
}

func (p *port) requireE1000e(what string) error {
	if p.driver != "e1000e" {
		return unavailable("%s: %s is e1000e-specific; %s has driver %q", p.name, what, p.name, p.driver)
	}
	return nil
}

// e1000eResetFeatures reset the NIC when toggled (e1000_set_features calls
// e1000e_reinit_locked for them). Other physical NICs are assumed to do
// the same, which only moves the features to the first apply phase.
var e1000eResetFeatures = map[string]bool{
	"rx-checksum":      true,
	"rx-hashing":       true,
	"rx-vlan-hw-parse": true,
	"rx-fcs":           true,
	"rx-all":           true,
}

const resetNote = "the NIC resets: link down for about 2 s on e1000e"

// ---- ITR ----

// itrKnob is e1000e's interrupt throttle rate through ethtool rx-usecs.
// Live: no reset.
type itrKnob struct{ p *port }

func (k *itrKnob) Name() string             { return "itr" }
func (k *itrKnob) Target() string           { return k.p.name }
func (k *itrKnob) ResetsLink() bool         { return false }
func (k *itrKnob) Read() (string, error)    { return readTyped[uint32](k) }
func (k *itrKnob) Check(want string) Report { return checkTyped[uint32](k, want) }
func (k *itrKnob) Apply(want string) Report { return applyTyped[uint32](k, want) }

func (k *itrKnob) parse(want string) (uint32, string, error) {
	u, err := ITR(want).RxUsecs()
	if err != nil {
		return 0, "", err
	}
	note := ""
	if n, err := strconv.Atoi(want); err == nil && 1000000/int(u) != n {
		note = fmt.Sprintf("%d ints/s is rx-usecs %d, which e1000e keeps as %d ints/s", n, u, 1000000/int(u))
	}
	return u, note, nil
}

func (k *itrKnob) get() (uint32, error) {
	if err := k.p.requireE1000e("ITR"); err != nil {
		return 0, err
	}
	return k.p.et.GetCoalesce(k.p.name)
}

func (k *itrKnob) set(_, want uint32) (string, error) {
	if !validRxUsecs(want) {
		return "", fmt.Errorf("rx-usecs %d: e1000e accepts 0, 1, 3, 4 and 10..10000", want)
	}
	return "", k.p.et.SetCoalesce(k.p.name, want)
}

func (k *itrKnob) same(cur, want uint32) bool { return cur == want }
func (k *itrKnob) format(v uint32) string     { return DescribeRxUsecs(v) }

// ---- rings ----

// e1000e's ring limits (E1000_MIN_RXD .. E1000_MAX_RXD, same for TX).
const (
	minRing = 64
	maxRing = 4096
)

// ringWant is a ring state; in a wanted value 0 means "keep".
type ringWant struct{ rx, tx uint32 }

// ringKnob sets both e1000e ring sizes in one call: every change resets
// the NIC, so RX and TX are never set separately.
type ringKnob struct{ p *port }

func (k *ringKnob) Name() string             { return "rings" }
func (k *ringKnob) Target() string           { return k.p.name }
func (k *ringKnob) ResetsLink() bool         { return true }
func (k *ringKnob) Read() (string, error)    { return readTyped[ringWant](k) }
func (k *ringKnob) Check(want string) Report { return checkTyped[ringWant](k, want) }
func (k *ringKnob) Apply(want string) Report { return applyTyped[ringWant](k, want) }

// ringWantString is the Knob want of a ring plan: "rx=1024,tx=256";
// a zero size is left out.
func ringWantString(rx, tx uint32) string {
	var parts []string
	if rx != 0 {
		parts = append(parts, fmt.Sprintf("rx=%d", rx))
	}
	if tx != 0 {
		parts = append(parts, fmt.Sprintf("tx=%d", tx))
	}
	return strings.Join(parts, ",")
}

// roundRing rounds n the way e1000e does: up to a multiple of 8.
func roundRing(n uint32) uint32 { return (n + 7) &^ 7 }

func (k *ringKnob) parse(want string) (ringWant, string, error) {
	var w ringWant
	var notes []string
	for part := range strings.SplitSeq(want, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseUint(val, 10, 32)
		if !ok || err != nil || (key != "rx" && key != "tx") {
			return ringWant{}, "", fmt.Errorf("rings: want rx=N,tx=N, got %q", want)
		}
		if n < minRing || n > maxRing {
			return ringWant{}, "", fmt.Errorf("rings: %s %d out of range %d..%d", key, n, minRing, maxRing)
		}
		r := roundRing(uint32(n))
		if r != uint32(n) {
			notes = append(notes, fmt.Sprintf("%s %d rounded up to %d (multiple of 8, as e1000e does)", key, n, r))
		}
		if key == "rx" {
			w.rx = r
		} else {
			w.tx = r
		}
	}
	return w, strings.Join(notes, "; "), nil
}

func (k *ringKnob) get() (ringWant, error) {
	if err := k.p.requireE1000e("ring sizing"); err != nil {
		return ringWant{}, err
	}
	r, err := k.p.et.GetRing(k.p.name)
	return ringWant{rx: r.RX, tx: r.TX}, err
}

func (k *ringKnob) set(cur, want ringWant) (string, error) {
	r, err := k.p.et.GetRing(k.p.name)
	if err != nil {
		return "", err
	}
	rx, tx := cmp.Or(want.rx, cur.rx), cmp.Or(want.tx, cur.tx)
	if rx > r.RXMax || tx > r.TXMax {
		return "", fmt.Errorf("rings rx %d tx %d exceed the driver's maximum rx %d tx %d", rx, tx, r.RXMax, r.TXMax)
	}
	return resetNote, k.p.et.SetRing(k.p.name, rx, tx)
}

func (k *ringKnob) same(cur, want ringWant) bool {
	return (want.rx == 0 || cur.rx == want.rx) && (want.tx == 0 || cur.tx == want.tx)
}

func (k *ringKnob) format(v ringWant) string {
	f := func(n uint32) string {
		if n == 0 {
			return "keep"
		}
		return strconv.FormatUint(uint64(n), 10)
	}
	return fmt.Sprintf("rx %s tx %s", f(v.rx), f(v.tx))
}

// ---- offload features ----

// featureKnob is one netdev feature by its real name. Whether a change
// resets the link depends on the feature (e1000eResetFeatures).
type featureKnob struct {
	p    *port
	name string
}

func (k *featureKnob) Name() string { return k.name }
func (k *featureKnob) Target() string {
	return k.p.name
}
func (k *featureKnob) ResetsLink() bool         { return !k.p.virtual && e1000eResetFeatures[k.name] }
func (k *featureKnob) Read() (string, error)    { return readTyped[Feature](k) }
func (k *featureKnob) Check(want string) Report { return checkTyped[Feature](k, want) }
func (k *featureKnob) Apply(want string) Report { return applyTyped[Feature](k, want) }

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func parseOnOff(s string) (bool, error) {
	switch s {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, got %q", s)
}

func (k *featureKnob) parse(want string) (Feature, string, error) {
	on, err := parseOnOff(want)
	return Feature{Active: on, Changeable: true}, "", err
}

func (k *featureKnob) get() (Feature, error) {
	fs, err := k.p.et.Features(k.p.name)
	if err != nil {
		return Feature{}, err
	}
	f, ok := fs[k.name]
	if !ok {
		// The feature string set is the kernel's, the same for every
		// device: the name is new, old or misspelt.
		return Feature{}, unavailable("the kernel has no feature named %q", k.name)
	}
	return f, nil
}

func (k *featureKnob) set(cur, want Feature) (string, error) {
	if !cur.Changeable {
		return "", unavailable("%s is fixed %s on %s (driver %q)", k.name, onOff(cur.Active), k.p.name, k.p.driver)
	}
	before, err := k.p.et.Features(k.p.name)
	if err != nil {
		return "", err
	}
	if err := k.p.et.Change(k.p.name, map[string]bool{k.name: want.Active}); err != nil {
		return "", err
	}
	after, err := k.p.et.Features(k.p.name)
	if err != nil {
		return "", err
	}
	var side []string
	for _, n := range slices.Sorted(maps.Keys(after)) {
		if n != k.name && after[n].Active != before[n].Active {
			side = append(side, fmt.Sprintf("%s %s->%s", n, onOff(before[n].Active), onOff(after[n].Active)))
		}
	}
	var notes []string
	if len(side) > 0 {
		notes = append(notes, "the kernel also changed "+strings.Join(side, ", "))
	}
	if k.ResetsLink() {
		notes = append(notes, resetNote)
	}
	return strings.Join(notes, "; "), nil
}

func (k *featureKnob) same(cur, want Feature) bool { return cur.Active == want.Active }
func (k *featureKnob) format(v Feature) string     { return onOff(v.Active) }

// featureRank orders features by dependency: checksums, then
// scatter-gather, then segmentation offloads (which need both); the rest
// rank lowest. Features turned on go in rank order, features turned off
// in reverse (segmentation first), so that no step is undone by the
// kernel's dependency fixes.
func featureRank(name string) int {
	switch {
	case strings.HasPrefix(name, "tx-checksum-"):
		return 0
	case name == "tx-scatter-gather" || name == "tx-scatter-gather-fraglist":
		return 1
	case strings.HasPrefix(name, "tx-") && (strings.HasSuffix(name, "-segmentation") || strings.HasPrefix(name, "tx-gso-")):
		return 2
	}
	return -1
}

// featureOrder returns the names of o in apply order: the ones turned off
// (highest rank first), then the ones turned on (lowest rank first).
func featureOrder(o map[string]bool) []string {
	names := slices.Collect(maps.Keys(o))
	slices.SortFunc(names, func(a, b string) int {
		if o[a] != o[b] {
			if !o[a] {
				return -1
			}
			return 1
		}
		ra, rb := featureRank(a), featureRank(b)
		if ra != rb {
			if o[a] {
				return ra - rb
			}
			return rb - ra
		}
		return strings.Compare(a, b)
	})
	return names
}

// ---- IRQ affinity ----

type irqState struct {
	irq       int
	how       string
	affinity  CPUSet
	effective CPUSet // nil when the kernel has no effective_affinity_list
}

// irqKnob pins one interrupt vector, found by name at every call.
type irqKnob struct {
	p      *port
	vector Vector
}

func (k *irqKnob) Name() string             { return "irq-affinity" }
func (k *irqKnob) Target() string           { return k.vector.IRQName(k.p.name) }
func (k *irqKnob) ResetsLink() bool         { return false }
func (k *irqKnob) Read() (string, error)    { return readTyped[irqState](k) }
func (k *irqKnob) Check(want string) Report { return checkTyped[irqState](k, want) }
func (k *irqKnob) Apply(want string) Report { return applyTyped[irqState](k, want) }

func (k *irqKnob) parse(want string) (irqState, string, error) {
	s, err := ParseCPUList(want)
	if err == nil && len(s) == 0 {
		err = fmt.Errorf("empty cpu list")
	}
	return irqState{affinity: s}, "", err
}

func (k *irqKnob) get() (irqState, error) {
	if k.p.virtual {
		return irqState{}, unavailable("%s is a virtual device (driver %q) without IRQs", k.p.name, k.p.driver)
	}
	name := k.Target()
	irq, how, err := k.p.r.irqByName(k.p.name, name)
	if err != nil {
		if k.p.driver != "e1000e" {
			return irqState{}, unavailable("driver %q: no vector named %s (vector names are e1000e's)", k.p.driver, name)
		}
		return irqState{}, err
	}
	st := irqState{irq: irq, how: how}
	dir := fmt.Sprintf("/proc/irq/%d/", irq)
	s, err := k.p.r.read(dir + "smp_affinity_list")
	if err != nil {
		return irqState{}, err
	}
	if st.affinity, err = ParseCPUList(s); err != nil {
		return irqState{}, err
	}
	if s, err := k.p.r.read(dir + "effective_affinity_list"); err == nil {
		st.effective, _ = ParseCPUList(s)
	}
	return st, nil
}

func (k *irqKnob) set(cur, want irqState) (string, error) {
	return "", k.p.r.write(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", cur.irq), want.affinity.String())
}

func (k *irqKnob) same(cur, want irqState) bool { return cur.affinity.Equal(want.affinity) }

func (k *irqKnob) format(v irqState) string {
	if v.irq == 0 {
		return "cpus " + v.affinity.String()
	}
	s := fmt.Sprintf("irq %d cpus %s", v.irq, v.affinity)
	if v.effective != nil {
		s += " effective " + v.effective.String()
	}
	return s
}

func (k *irqKnob) note(v, want irqState) string {
	var notes []string
	if v.how != "/proc/interrupts" && v.how != "" {
		notes = append(notes, fmt.Sprintf("irq %d found through %s", v.irq, v.how))
	}
	if v.effective != nil && !subset(v.effective, want.affinity) {
		notes = append(notes, fmt.Sprintf("effective_affinity_list is still %s: the kernel moves the vector at its next interrupt (a rarely firing vector keeps the old CPU until then)", v.effective))
	}
	return strings.Join(notes, "; ")
}

func subset(a, b CPUSet) bool {
	for _, c := range a {
		if !b.Contains(c) {
			return false
		}
	}
	return true
}

// ---- RPS ----

// rpsKnob is receive packet steering of one RX queue.
type rpsKnob struct {
	p     *port
	queue string // "rx-0"
}

func (k *rpsKnob) Name() string             { return "rps-cpus" }
func (k *rpsKnob) Target() string           { return k.p.name + " " + k.queue }
func (k *rpsKnob) ResetsLink() bool         { return false }
func (k *rpsKnob) Read() (string, error)    { return readTyped[CPUSet](k) }
func (k *rpsKnob) Check(want string) Report { return checkTyped[CPUSet](k, want) }
func (k *rpsKnob) Apply(want string) Report { return applyTyped[CPUSet](k, want) }

func (k *rpsKnob) path() string {
	return "/sys/class/net/" + k.p.name + "/queues/" + k.queue + "/rps_cpus"
}

func (k *rpsKnob) parse(want string) (CPUSet, string, error) {
	if want == "off" {
		return CPUSet{}, "", nil
	}
	s, err := ParseCPUList(want)
	return s, "", err
}

func (k *rpsKnob) get() (CPUSet, error) {
	s, err := k.p.r.read(k.path())
	if err != nil {
		return nil, err
	}
	return ParseCPUMask(s)
}

func (k *rpsKnob) set(_, want CPUSet) (string, error) {
	return "", k.p.r.write(k.path(), want.Mask())
}

func (k *rpsKnob) same(cur, want CPUSet) bool { return cur.Equal(want) }

func (k *rpsKnob) format(v CPUSet) string {
	if len(v) == 0 {
		return "off"
	}
	return v.String()
}

// rxQueues lists the interface's RX queues ("rx-0", ...); if there are
// none it returns rx-0 so that the knob reports why.
func (p *port) rxQueues() []string {
	names, _ := p.r.readDir("/sys/class/net/" + p.name + "/queues")
	var qs []string
	for _, n := range names {
		if strings.HasPrefix(n, "rx-") {
			qs = append(qs, n)
		}
	}
	if len(qs) == 0 {
		return []string{"rx-0"}
	}
	slices.SortFunc(qs, func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "rx-"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "rx-"))
		return x - y
	})
	return qs
}

// ---- threaded NAPI ----

// threadedKnob is /sys/class/net/<if>/threaded.
type threadedKnob struct{ p *port }

func (k *threadedKnob) Name() string             { return "threaded-napi" }
func (k *threadedKnob) Target() string           { return k.p.name }
func (k *threadedKnob) ResetsLink() bool         { return false }
func (k *threadedKnob) Read() (string, error)    { return readTyped[string](k) }
func (k *threadedKnob) Check(want string) Report { return checkTyped[string](k, want) }
func (k *threadedKnob) Apply(want string) Report { return applyTyped[string](k, want) }

func (k *threadedKnob) path() string { return "/sys/class/net/" + k.p.name + "/threaded" }

func (k *threadedKnob) parse(want string) (string, string, error) {
	on, err := parseOnOff(want)
	if on {
		return "1", "", err
	}
	return "0", "", err
}

func (k *threadedKnob) get() (string, error) { return k.p.r.read(k.path()) }

func (k *threadedKnob) set(_, want string) (string, error) {
	if err := k.p.r.write(k.path(), want); err != nil {
		if isUnavailable(err) {
			return "", unavailable("%s has no NAPI instance to thread (veth has one only with GRO or XDP on): %v", k.p.name, err)
		}
		return "", err
	}
	return "", nil
}

func (k *threadedKnob) same(cur, want string) bool { return cur == want }

func (k *threadedKnob) format(v string) string {
	switch v {
	case "0":
		return "off"
	case "1":
		return "on"
	}
	return v
}
