package tuning

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The knobs that place a port's work on CPUs: its interrupts, its
// receive packet steering and its NAPI threads.

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

func (k *irqKnob) Name() string     { return "irq-affinity" }
func (k *irqKnob) Target() string   { return k.vector.IRQName(k.p.name) }
func (k *irqKnob) ResetsLink() bool { return false }

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

func (k *rpsKnob) Name() string     { return "rps-cpus" }
func (k *rpsKnob) Target() string   { return k.p.name + " " + k.queue }
func (k *rpsKnob) ResetsLink() bool { return false }

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

func (k *threadedKnob) Name() string     { return "threaded-napi" }
func (k *threadedKnob) Target() string   { return k.p.name }
func (k *threadedKnob) ResetsLink() bool { return false }

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
