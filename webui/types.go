package webui

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"time"
)

// Stats gives the dashboard one consistent view of the box's counters.
// Snapshot is called once per publishing interval (and once per
// /metrics scrape) from one goroutine at a time per caller; it must not
// block the dataplane. Counters are cumulative: the server derives rates.
type Stats interface {
	Snapshot() Snapshot
}

// Snapshot is the state of the box's counters at one moment.
type Snapshot struct {
	// Time is when the counters were read; zero means "now".
	Time  time.Time
	Ports []PortStats
	// Drops are frames dropped by the dataplane, by reason (see the Drop*
	// constants; other reasons are shown as they are).
	Drops []DropStat
	// CPUs are cumulative busy and idle times per core.
	CPUs []CPUStat
	// IRQs are cumulative interrupt counts per NIC vector.
	IRQs []IRQStat
	// WorkerRestarts counts dataplane workers restarted after a failure.
	WorkerRestarts uint64
	// Conntrack is nil when there is no connection table (bridge mode).
	Conntrack *ConntrackSummary
	// FastPath is nil when the box has no dataplane running.
	FastPath *FastPathSummary
	// IPv6 is nil without an IPv6 router (bridge mode, ipv6.enabled off).
	IPv6 *IPv6Counters
}

// PortStats are one data port's link state and cumulative counters.
type PortStats struct {
	Name      string `json:"name"`
	Interface string `json:"iface"`
	// Kind is PortData or PortHost (the TAP that carries the box's own
	// address: its traffic is the box's, not the network's).
	Kind string `json:"kind,omitempty"`
	Up   bool   `json:"up"`
	// SpeedMbps is the negotiated link speed, 0 when unknown or down.
	SpeedMbps int    `json:"speed_mbps"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	// RingDrops are frames the kernel dropped because the port's RX ring
	// was full (tp_drops).
	RingDrops uint64 `json:"ring_drops"`
	// Blocked: loop protection found a loop through this port and it
	// forwards nothing until the loop is gone; LoopWith is the loop's
	// other port (the port itself for a loop back into its own segment).
	Blocked  bool   `json:"blocked"`
	LoopWith string `json:"loop_with,omitempty"`
}

// Port kinds.
const (
	PortData = "data"
	PortHost = "host"
)

// Drop reasons the dashboard knows by name.
const (
	DropRing      = "ring"           // RX ring full (kernel tp_drops)
	DropRules     = "rules"          // a rule or a chain policy dropped it
	DropNATFull   = "nat_table_full" // no room for a new connection
	DropMalformed = "malformed"      // the frame did not parse
)

// DropStat is a cumulative count of dropped frames for one reason.
type DropStat struct {
	Reason  string `json:"reason"`
	Packets uint64 `json:"packets"`
}

// CPUStat is one core's cumulative busy and idle time.
type CPUStat struct {
	CPU         int     `json:"cpu"`
	BusySeconds float64 `json:"busy_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
}

// IRQStat is one interrupt vector's cumulative count.
type IRQStat struct {
	IRQ int `json:"irq"`
	// Name is the vector's name in /proc/interrupts, e.g. "eth1-rx-0".
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	// PerCPU are the counts per CPU, to see a pinned vector follow its CPU.
	PerCPU []uint64 `json:"per_cpu,omitempty"`
}

// ConntrackSummary is the size of the NAT connection table.
type ConntrackSummary struct {
	Entries  int `json:"entries"`
	Capacity int `json:"capacity"`
}

// FastPathSummary is the state of the dataplane's in-kernel fast path
// for established flows.
type FastPathSummary struct {
	// Mode is the hook it runs in ("tcx", "xdp"), or "off": then the
	// rings carry every frame, and Reason says why.
	Mode   string `json:"mode"`
	Reason string `json:"reason,omitempty"`
	// Flows are the flows in the kernel now (NAT connection directions,
	// bridged pairs and microflows); Packets the frames it forwarded.
	Flows   int    `json:"flows"`
	Packets uint64 `json:"packets"`
	// Cost is what the programs cost a frame on this kernel, measured
	// when the fast path first loaded; absent before, or when not
	// measured.
	Cost *FastPathCost `json:"cost,omitempty"`
}

// FastPathCost is the fast path's self-test, summed up: what its programs
// cost a frame on this kernel (GET /api/dataplane has all of it).
type FastPathCost struct {
	// JIT: the kernel compiled the programs to machine code; false: its
	// BPF interpreter runs them.
	JIT bool `json:"jit"`
	// Path is the box's kind of flow ("nat" in NAT mode, else "bridge");
	// Hit is the ns per frame of such a flow's frame in the kernel (0:
	// not measured), Userspace of the same frame in the slow path's
	// forwarding without the rings (a lower bound of the rings' cost; 0:
	// not measured), Miss of a frame the fast path leaves to the rings.
	Path      string  `json:"path"`
	Hit       float64 `json:"hit_ns"`
	Userspace float64 `json:"userspace_ns"`
	Miss      float64 `json:"miss_ns"`
}

// FieldError is one problem with a config, named by its JSON path
// ("ports[1].interface").
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// FieldErrors is a list of FieldError usable as an error: a ConfigStore's
// Apply may return it (possibly wrapped) to reject a config.
type FieldErrors []FieldError

func (l FieldErrors) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteString("; ")
		}
		if e.Path != "" {
			b.WriteString(e.Path)
			b.WriteString(": ")
		}
		b.WriteString(e.Message)
	}
	return b.String()
}

// Errors an implementation may return (wrapped) so the API answers with the
// right status.
var (
	// ErrNotFound: the version, pending change or connection does not exist
	// (404).
	ErrNotFound = errors.New("not found")
	// ErrBusy: another change is waiting for confirmation (409).
	ErrBusy = errors.New("another change is waiting for confirmation")
)

// PendingID names an applied change that waits for confirmation.
type PendingID string

// Version is one stored runtime config.
type Version struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// Source says where it came from: "factory", "web", "restore", ...
	Source string `json:"source,omitempty"`
}

// PendingInfo describes an applied change that rolls back unless it is
// confirmed before Deadline.
type PendingInfo struct {
	ID       PendingID `json:"id"`
	Version  Version   `json:"version"`
	Previous Version   `json:"previous"`
	Deadline time.Time `json:"deadline"`
}

// ApplyState is what became of an applied change.
type ApplyState string

// States of an applied change.
const (
	ApplyPending    ApplyState = "pending"
	ApplyConfirmed  ApplyState = "confirmed"
	ApplyRolledBack ApplyState = "rolled_back"
	ApplyUnknown    ApplyState = "unknown"
)

// ConfigStore is the runtime configuration with commit-confirm semantics.
// The store, not the web server, rolls a change back when its deadline
// passes.
type ConfigStore interface {
	// Current returns the running config and its version.
	Current() (json.RawMessage, Version)
	// Version returns the running config's version alone, without
	// encoding the config: the publisher reads it every second.
	Version() Version
	// Validate checks a whole config without applying it.
	Validate(cfg []byte) []FieldError
	// Apply validates cfg, makes it take effect and starts the
	// confirmation timer. Errors: FieldErrors (invalid), ErrBusy.
	Apply(cfg []byte, confirmTimeout time.Duration) (PendingID, error)
	// Confirm keeps a pending change. Errors: ErrNotFound (no such
	// pending change, e.g. it already rolled back).
	Confirm(id PendingID) error
	// Rollback reverts a pending change now.
	Rollback(id PendingID) error
	// Pending returns the change waiting for confirmation, nil if none.
	Pending() *PendingInfo
	// State says what became of an applied change.
	State(id PendingID) ApplyState
	// History lists the stored versions, newest first.
	History() []Version
	// Get returns a stored version. Errors: ErrNotFound.
	Get(versionID string) (json.RawMessage, error)
}

// Rules exposes the compiled rule table and its counters.
type Rules interface {
	Table() RuleTable
}

// RuleTable is the running rule set with its counters.
type RuleTable struct {
	Policies []PolicyStat `json:"policies"`
	Rules    []RuleStat   `json:"rules"`
	// Subtables is the number of hash subtables of the compiled table.
	Subtables  int    `json:"subtables"`
	Generation uint64 `json:"generation"`
}

// PolicyStat is a chain's default verdict and how many frames it decided.
type PolicyStat struct {
	Chain   string `json:"chain"`
	Action  string `json:"action"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// RuleStat is one rule in table order with its counters.
type RuleStat struct {
	Chain string `json:"chain"`
	// Text is the rule in the rules package's canonical text form,
	// without its chain.
	Text string `json:"text"`
	// Counted says whether the rule has counters ("counter" statement).
	Counted bool      `json:"counted"`
	Packets uint64    `json:"packets"`
	Bytes   uint64    `json:"bytes"`
	LastHit time.Time `json:"last_hit,omitzero"`
}

// Conntrack is the NAT connection table.
type Conntrack interface {
	// Query returns one page of the entries matching q, sorted as q asks,
	// and the number of matching entries. FilterConns implements it over a
	// slice.
	Query(q ConnQuery) (page []Conn, total int)
	// Delete removes a connection. Errors: ErrNotFound.
	Delete(id uint64) error
	// DeleteMatching removes the connections matching q's filters (its
	// sort and paging do not apply) and returns how many.
	DeleteMatching(q ConnQuery) (int, error)
}

// Conn is one tracked connection. Src and Dst are the original direction
// (as the initiator sent it); NATSrc and NATDst the translated addresses,
// invalid when the connection is not translated.
type Conn struct {
	// ID names the connection for Delete; a string in JSON (it needs
	// more than 53 bits).
	ID      uint64         `json:"id,string"`
	Proto   string         `json:"proto"`
	State   string         `json:"state"`
	Kind    string         `json:"kind,omitempty"` // masquerade, forward, hairpin; routed (IPv6)
	Src     netip.AddrPort `json:"src"`
	Dst     netip.AddrPort `json:"dst"`
	NATSrc  netip.AddrPort `json:"nat_src,omitzero"`
	NATDst  netip.AddrPort `json:"nat_dst,omitzero"`
	Packets uint64         `json:"packets"`
	Bytes   uint64         `json:"bytes"`
	// Created is zero where the table does not keep it (IPv6).
	Created time.Time `json:"created,omitzero"`
	Expires time.Time `json:"expires,omitzero"`
}

// FDB is the bridge's forwarding database.
type FDB interface {
	Entries() []FDBEntry
}

// FDBEntry is one learned (or static) MAC address.
type FDBEntry struct {
	MAC    string        `json:"mac"`
	Port   string        `json:"port"`
	VLAN   uint16        `json:"vlan"`
	Age    time.Duration `json:"-"`
	Static bool          `json:"static,omitempty"`
}

// MarshalJSON adds the age in seconds.
func (e FDBEntry) MarshalJSON() ([]byte, error) {
	type plain FDBEntry
	return json.Marshal(struct {
		plain
		AgeSeconds float64 `json:"age_s"`
	}{plain(e), e.Age.Seconds()})
}

// Tuning reports the NIC and kernel knobs.
type Tuning interface {
	Reports() []TuningReport
}

// TuningReport is what one knob looked like before, what was wanted and
// what it looks like now (the tuning package's Report).
type TuningReport struct {
	Knob       string `json:"knob"`
	Target     string `json:"target"`
	Before     string `json:"before,omitempty"`
	Wanted     string `json:"wanted,omitempty"`
	After      string `json:"after,omitempty"`
	Status     string `json:"status"` // ok, changed, differs, unavailable, error
	Message    string `json:"message,omitempty"`
	ResetsLink bool   `json:"resetsLink,omitempty"`
}

// System describes the box.
type System interface {
	Info() SystemInfo
}

// SystemInfo is the box's identity and health. Zero fields are filled by
// the server where it can (Go version, heap, process start).
type SystemInfo struct {
	Hostname       string    `json:"hostname"`
	Version        string    `json:"version"`
	BuildTimestamp string    `json:"build_timestamp"`
	GoVersion      string    `json:"go_version"`
	Mode           string    `json:"mode"` // bridge or nat
	Started        time.Time `json:"started"`
	// MemTotal and MemAvailable are the machine's memory in bytes
	// (/proc/meminfo), 0 when unknown.
	MemTotal     uint64 `json:"mem_total"`
	MemAvailable uint64 `json:"mem_available"`
	// GoHeap is the appliance's Go heap in use, in bytes.
	GoHeap uint64 `json:"go_heap"`
	// PermProblem, if set, says why changes are not kept across reboots
	// (no writable /perm) and how to fix it.
	PermProblem string `json:"perm_problem,omitempty"`
	// Kernel is the running kernel; nil when unknown.
	Kernel *KernelInfo `json:"kernel,omitempty"`
}

// KernelInfo is the running kernel as the System page shows it.
type KernelInfo struct {
	Release string `json:"release"` // uname -r
	Version string `json:"version"` // uname -v
	// Source is the distribution's source package the kernel was built
	// from, where Version names it (e1kbox's kernel: "Debian 6.12.118-1");
	// empty when it does not.
	Source string `json:"source,omitempty"`
	// JIT is the BPF JIT: "on", "off", "none" (not in the kernel: the
	// interpreter runs BPF programs) or "unknown".
	JIT      string   `json:"jit"`
	Watchdog Watchdog `json:"watchdog"`
	// FastPath is what the fast path's programs cost a frame on this
	// kernel; absent before they were measured.
	FastPath *FastPathCost `json:"fast_path,omitempty"`
}

// Watchdog is the hardware watchdog (/sys/class/watchdog/watchdog0),
// which gokrazy's init keeps petting: while it runs, a hung box resets.
type Watchdog struct {
	// Identity is the driver's name for it ("iTCO_wdt", "i6300ESB
	// timer"), "none" when the box has no watchdog.
	Identity string `json:"identity"`
	// TimeoutSeconds is how long it waits for a pet before it resets the
	// box, 0 when unknown.
	TimeoutSeconds int `json:"timeout_s,omitempty"`
	// State is "active" (running) or "inactive"; empty when unknown.
	State string `json:"state,omitempty"`
}
