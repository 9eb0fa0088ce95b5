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

func (k *itrKnob) Name() string     { return "itr" }
func (k *itrKnob) Target() string   { return k.p.name }
func (k *itrKnob) ResetsLink() bool { return false }

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

func (k *ringKnob) Name() string     { return "rings" }
func (k *ringKnob) Target() string   { return k.p.name }
func (k *ringKnob) ResetsLink() bool { return true }

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
func (k *featureKnob) ResetsLink() bool { return !k.p.virtual && e1000eResetFeatures[k.name] }

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
