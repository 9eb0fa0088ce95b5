package tuning

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Plan is the wanted state of the NIC and kernel knobs. Every field is
// optional: a zero field leaves its knob alone. It is part of the runtime
// configuration, so errors from Validate name the JSON path.
type Plan struct {
	// Placement chooses how data ports' RX IRQs and dataplane workers are
	// spread over the CPUs (see CPUPlan). Empty means PlacementAuto.
	Placement Placement `json:"placement,omitempty"`
	// Copybreak is e1000e's global copybreak in bytes (all e1000e ports):
	// received frames shorter than it are copied into a fresh small skb.
	Copybreak *uint32 `json:"copybreak,omitempty"`
	// BridgeNetfilterOff sets bridge-nf-call-{iptables,ip6tables,arptables}
	// to 0 where the kernel has bridge netfilter.
	BridgeNetfilterOff bool `json:"bridgeNetfilterOff,omitempty"`
	// Ports are the per-port settings, applied in this order.
	Ports []PortPlan `json:"ports,omitempty"`
}

// PortPlan is the wanted state of one network interface.
type PortPlan struct {
	// Name is the interface name, e.g. "eth1".
	Name string `json:"name"`
	// Data marks a dataplane port: it gets a CPU placement (IRQ, RPS,
	// threaded NAPI, a worker CPU) and the kernel is kept quiet on it:
	// no forwarding, no ARP replies, strict reverse-path filter, no router
	// advertisements, IPv6 off (see the package documentation).
	Data bool `json:"data,omitempty"`
	// ITR is the interrupt throttling mode (e1000e only).
	ITR ITR `json:"itr,omitempty"`
	// RxRing and TxRing are ring sizes in descriptors, 64..4096; e1000e
	// rounds up to a multiple of 8. 0 leaves the size alone. Changing a
	// ring resets the NIC.
	RxRing uint32 `json:"rxRing,omitempty"`
	TxRing uint32 `json:"txRing,omitempty"`
	// Offloads maps real ethtool feature names ("rx-gro",
	// "tx-tcp-segmentation", ...) to on/off.
	Offloads map[string]bool `json:"offloads,omitempty"`
	// IRQ pins interrupt vectors to one CPU each. For a data port the CPU
	// plan fills in the vectors that are not given.
	IRQ map[Vector]int `json:"irq,omitempty"`
	// RPS is the CPU list for receive packet steering on every RX queue
	// ("1", "0-1"), or "off". Empty leaves it alone, except on a data
	// port, where the CPU plan sets it (off).
	RPS string `json:"rps,omitempty"`
	// Threaded turns threaded NAPI on or off. nil leaves it alone, except
	// on a data port, where the CPU plan sets it.
	Threaded *bool `json:"threaded,omitempty"`
}

// Vector names an e1000e MSI-X interrupt vector.
type Vector string

// e1000e's three MSI-X vectors per port, named in /proc/interrupts
// "<if>-rx-0", "<if>-tx-0" and "<if>".
const (
	VectorRX    Vector = "rx"
	VectorTX    Vector = "tx"
	VectorOther Vector = "other" // link status and other causes
)

// Vectors lists the vectors in the order they are applied.
var Vectors = []Vector{VectorRX, VectorTX, VectorOther}

// IRQName returns the vector's action name in /proc/interrupts.
func (v Vector) IRQName(ifname string) string {
	switch v {
	case VectorRX:
		return ifname + "-rx-0"
	case VectorTX:
		return ifname + "-tx-0"
	}
	return ifname
}

// DataPortOffloads are the offloads a dataplane port needs off: GRO and
// LRO would hand the AF_PACKET ring merged super-frames, GSO and TSO
// would do the same for frames the kernel sends. TSO is the whole family
// that ethtool's "tso off" clears (tx-tcp-accecn-segmentation exists
// since Linux 6.18; on older kernels its knob reports unavailable).
func DataPortOffloads() map[string]bool {
	return map[string]bool{
		"rx-gro":                       false,
		"rx-lro":                       false,
		"tx-generic-segmentation":      false,
		"tx-tcp-segmentation":          false,
		"tx-tcp6-segmentation":         false,
		"tx-tcp-ecn-segmentation":      false,
		"tx-tcp-mangleid-segmentation": false,
		"tx-tcp-accecn-segmentation":   false,
	}
}

// DataPort returns the plan of a dataplane port with its offloads off.
func DataPort(name string) PortPlan {
	return PortPlan{Name: name, Data: true, Offloads: DataPortOffloads()}
}

// legacyFeatureNames are ethtool's user-interface aliases (ethtool -k
// output, -K arguments) that are not feature names of the kernel's string
// set; the value is the real name to use.
var legacyFeatureNames = map[string]string{
	"gro":                          "rx-gro",
	"generic-receive-offload":      "rx-gro",
	"lro":                          "rx-lro",
	"large-receive-offload":        "rx-lro",
	"gso":                          "tx-generic-segmentation",
	"generic-segmentation-offload": "tx-generic-segmentation",
	"tso":                          "tx-tcp-segmentation and tx-tcp6-segmentation",
	"tcp-segmentation-offload":     "tx-tcp-segmentation and tx-tcp6-segmentation",
	"sg":                           "tx-scatter-gather",
	"scatter-gather":               "tx-scatter-gather",
	"rx":                           "rx-checksum",
	"rx-checksumming":              "rx-checksum",
	"tx":                           "tx-checksum-ip-generic (e1000e) or tx-checksum-ipv4/ipv6",
	"tx-checksumming":              "tx-checksum-ip-generic (e1000e) or tx-checksum-ipv4/ipv6",
	"rxhash":                       "rx-hashing",
	"receive-hashing":              "rx-hashing",
	"rxvlan":                       "rx-vlan-hw-parse",
	"rx-vlan-offload":              "rx-vlan-hw-parse",
	"txvlan":                       "tx-vlan-hw-insert",
	"tx-vlan-offload":              "tx-vlan-hw-insert",
	"ntuple":                       "rx-ntuple-filter",
	"ntuple-filters":               "rx-ntuple-filter",
}

var featureNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// tsoFeatures need scatter-gather and TX checksumming; the kernel turns
// them off silently when those go off (netdev_fix_features).
var tsoFeatures = []string{"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation"}

// Validate checks the plan without looking at the system. Errors name the
// JSON path of the offending field.
func (p Plan) Validate() error {
	var errs []error
	switch p.Placement {
	case "", PlacementAuto, PlacementSplit, PlacementSame, PlacementThreaded, PlacementManual:
	default:
		errs = append(errs, fmt.Errorf("placement: %q is not one of auto, split, same, threaded, manual", p.Placement))
	}
	seen := map[string]int{}
	for i, pp := range p.Ports {
		at := fmt.Sprintf("ports[%d]", i)
		if j, dup := seen[pp.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: %q already at ports[%d]", at, pp.Name, j))
		}
		seen[pp.Name] = i
		errs = append(errs, pp.validate(at))
	}
	return errors.Join(errs...)
}

func (pp PortPlan) validate(at string) error {
	var errs []error
	if !validIfname(pp.Name) {
		errs = append(errs, fmt.Errorf("%s.name: %q is not an interface name", at, pp.Name))
	}
	if pp.ITR != "" {
		if _, err := pp.ITR.RxUsecs(); err != nil {
			errs = append(errs, fmt.Errorf("%s.itr: %w", at, err))
		}
	}
	for _, r := range []struct {
		field string
		n     uint32
	}{{"rxRing", pp.RxRing}, {"txRing", pp.TxRing}} {
		if r.n != 0 && (r.n < minRing || r.n > maxRing) {
			errs = append(errs, fmt.Errorf("%s.%s: %d out of range %d..%d", at, r.field, r.n, minRing, maxRing))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pp.Offloads)) {
		if real, ok := legacyFeatureNames[name]; ok {
			errs = append(errs, fmt.Errorf("%s.offloads.%s: not a kernel feature name; use %s", at, name, real))
		} else if !featureNameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s.offloads: %q is not a feature name", at, name))
		}
	}
	errs = append(errs, offloadConflicts(at, pp.Offloads))
	for _, v := range slices.Sorted(maps.Keys(pp.IRQ)) {
		if !slices.Contains(Vectors, v) {
			errs = append(errs, fmt.Errorf("%s.irq: unknown vector %q (want rx, tx, other)", at, v))
		}
		if pp.IRQ[v] < 0 || pp.IRQ[v] > maxCPU {
			errs = append(errs, fmt.Errorf("%s.irq.%s: cpu %d out of range", at, v, pp.IRQ[v]))
		}
	}
	if pp.RPS != "" && pp.RPS != "off" {
		if s, err := ParseCPUList(pp.RPS); err != nil {
			errs = append(errs, fmt.Errorf("%s.rps: %w", at, err))
		} else if len(s) == 0 {
			errs = append(errs, fmt.Errorf("%s.rps: empty cpu list (use \"off\")", at))
		}
	}
	return errors.Join(errs...)
}

// offloadConflicts finds wanted combinations the kernel cannot hold: TSO
// on with scatter-gather off, or TSO on with every TX checksum off (the
// kernel would turn TSO off again), GSO on with scatter-gather off.
func offloadConflicts(at string, o map[string]bool) error {
	var errs []error
	off := func(name string) bool { v, ok := o[name]; return ok && !v }
	csumOff := off("tx-checksum-ip-generic") && !o["tx-checksum-ipv4"] && !o["tx-checksum-ipv6"]
	for _, f := range append(slices.Clone(tsoFeatures), "tx-generic-segmentation") {
		if !o[f] {
			continue
		}
		if off("tx-scatter-gather") {
			errs = append(errs, fmt.Errorf("%s.offloads: %s on needs tx-scatter-gather on", at, f))
		}
		if csumOff && f != "tx-generic-segmentation" {
			errs = append(errs, fmt.Errorf("%s.offloads: %s on needs TX checksumming (tx-checksum-ip-generic) on", at, f))
		}
	}
	return errors.Join(errs...)
}

// validIfname follows the kernel's dev_valid_name.
func validIfname(s string) bool {
	return s != "" && len(s) < 16 && s != "." && s != ".." &&
		!strings.ContainsAny(s, "/: \t\n\x00")
}
