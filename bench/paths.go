package main

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"e1kbox/appliance/config"
	"e1kbox/rules"
	"e1kbox/tuning"
)

// pathKind is what forwards between b0 and b1 in the box namespace.
type pathKind int

const (
	kindDirect pathKind = iota // no box: g1 -> s1
	kindKernel                 // br0, optionally with nftables rules
	kindE1kbox                 // the appliance binary in bridge mode
)

// Path is one forwarding path under test.
type Path struct {
	Name string
	Kind pathKind
	// NftRules is the number of linear non-matching rules in a bridge-family
	// forward chain; NftSet the size of an nftables set matched by one rule.
	NftRules, NftSet int
	// Rules is the number of non-matching e1kbox forward rules.
	Rules int
	// Placement is the e1kbox CPU placement (tuning.Placement).
	Placement tuning.Placement
	// NAT routes with masquerade from the LAN side (b0) to the WAN side
	// (b1) instead of bridging: the kernel with nftables, or the appliance
	// in NAT mode. NftRules are then in an ip-family forward chain.
	NAT bool
	// Services runs the router's DHCP server, DNS forwarder and NTP
	// client (NAT paths; the bare router has them off).
	Services bool
	// WSClients is the number of dashboard WebSocket clients reading
	// /api/stream during the measurement (e1kbox paths only).
	WSClients int
	// Baseline is the path the ratios are taken against; "" is the kernel
	// bridge.
	Baseline string
}

// Path names of the reference rows.
const (
	directName    = "direct veth (no box)"
	kernelName    = "kernel bridge"
	kernelNATName = "kernel NAT"
	e1kboxName    = "e1kbox bridge"
)

// wsClients is the number of dashboard clients of the WebSocket row.
const wsClients = 100

// countName writes 1000 as "1k" and 10000 as "10k"; other numbers as is.
func countName(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// buildPaths lists the paths of a run: direct, the kernel bridge, the
// kernel bridge with each count of linear nft rules and with an nft set of
// the largest count, then e1kbox per placement with 0 rules and with the
// largest count of rules; then the NAT paths (the kernel with nftables
// masquerade and the appliance in NAT mode at the first placement, each
// bare and with the largest count of rules, ratios against the kernel
// NAT; the appliance also with its router services, against itself
// without) and the default-placement e1kbox bridge with wsClients dashboard
// clients (ratio against the same bridge without them).
func buildPaths(ruleCounts []int, placements []tuning.Placement) []Path {
	paths := []Path{{Name: directName, Kind: kindDirect}, {Name: kernelName, Kind: kindKernel}}
	most := 0
	for _, n := range ruleCounts {
		if n > 0 {
			paths = append(paths, Path{Name: kernelName + " + " + countName(n) + " nft rules", Kind: kindKernel, NftRules: n})
		}
		most = max(most, n)
	}
	if most > 0 {
		paths = append(paths, Path{Name: kernelName + " + " + countName(most) + " nft set", Kind: kindKernel, NftSet: most})
	}
	for _, pl := range placements {
		name := "e1kbox bridge"
		if pl != tuning.DefaultPlacement {
			name += " " + string(pl)
		}
		paths = append(paths, Path{Name: name, Kind: kindE1kbox, Placement: pl})
		if most > 0 {
			paths = append(paths, Path{Name: name + " + " + countName(most) + " rules", Kind: kindE1kbox, Rules: most, Placement: pl})
		}
	}
	paths = append(paths, Path{Name: kernelNATName, Kind: kindKernel, NAT: true})
	if most > 0 {
		paths = append(paths, Path{Name: kernelNATName + " + " + countName(most) + " rules", Kind: kindKernel, NAT: true, NftRules: most, Baseline: kernelNATName})
	}
	if len(placements) > 0 {
		name := "e1kbox nat"
		if pl := placements[0]; pl != tuning.DefaultPlacement {
			name += " " + string(pl)
		}
		paths = append(paths, Path{Name: name, Kind: kindE1kbox, NAT: true, Placement: placements[0], Baseline: kernelNATName})
		paths = append(paths, Path{Name: name + " + services", Kind: kindE1kbox, NAT: true, Services: true, Placement: placements[0], Baseline: name})
		if most > 0 {
			paths = append(paths, Path{Name: name + " + " + countName(most) + " rules", Kind: kindE1kbox, NAT: true, Rules: most,
				Placement: placements[0], Baseline: kernelNATName})
		}
	}
	if slices.Contains(placements, tuning.DefaultPlacement) {
		paths = append(paths, Path{Name: e1kboxName + " + " + strconv.Itoa(wsClients) + " ws clients", Kind: kindE1kbox,
			Placement: tuning.DefaultPlacement, WSClients: wsClients, Baseline: e1kboxName})
	}
	return paths
}

// selectPaths returns the paths whose name re matches (all for nil) and
// the baselines of those, in the order of all.
func selectPaths(all []Path, re *regexp.Regexp) []Path {
	want := map[string]bool{}
	for _, p := range all {
		if re == nil || re.MatchString(p.Name) {
			want[p.Name] = true
			if p.Baseline != "" {
				want[p.Baseline] = true
			}
		}
	}
	var out []Path
	for _, p := range all {
		if want[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// baselines maps the paths with their own ratio baseline to it.
func baselines(paths []Path) map[string]string {
	m := map[string]string{}
	for _, p := range paths {
		if p.Baseline != "" {
			m[p.Name] = p.Baseline
		}
	}
	return m
}

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

// boxPorts are the box's veth ports, in the appliance's port order.
var boxPorts = []string{"b0", "b1"}

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

// applianceListen is the appliance's dashboard address inside the box
// namespace.
const applianceListen = "127.0.0.1:8080"

// nftRules is the nftables script of a kernel path: NftRules linear
// "ip saddr A drop" rules or one rule matching a set of NftSet addresses,
// in a bridge-family forward chain (the hook bridged frames traverse).
// None of them matches the generated traffic. "" for no rules.
func nftRules(p Path) string {
	var b strings.Builder
	switch {
	case p.NAT:
		// Conntrack and masquerade on the WAN side; the rules in an
		// ip-family forward chain, which routed packets traverse.
		fmt.Fprintf(&b, "table ip e1kbench {\n\tchain benchpost {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t\toifname %q masquerade\n\t}\n", natWANPort)
		if p.NftRules > 0 {
			b.WriteString("\tchain benchfwd {\n\t\ttype filter hook forward priority 0; policy accept;\n")
			for i := range p.NftRules {
				fmt.Fprintf(&b, "\t\tip saddr %s drop\n", ruleAddr(i))
			}
			b.WriteString("\t}\n")
		}
		b.WriteString("}\n")
	case p.NftRules > 0:
		b.WriteString("table bridge e1kbench {\n\tchain benchfwd {\n\t\ttype filter hook forward priority 0; policy accept;\n")
		for i := range p.NftRules {
			fmt.Fprintf(&b, "\t\tip saddr %s drop\n", ruleAddr(i))
		}
		b.WriteString("\t}\n}\n")
	case p.NftSet > 0:
		b.WriteString("table bridge e1kbench {\n\tset blocked {\n\t\ttype ipv4_addr\n\t\telements = {\n")
		for i := range p.NftSet {
			fmt.Fprintf(&b, "\t\t\t%s,\n", ruleAddr(i))
		}
		b.WriteString("\t\t}\n\t}\n\tchain benchfwd {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tip saddr @blocked drop\n\t}\n}\n")
	default:
		return ""
	}
	return b.String()
}

// e1kboxRules is the e1kbox rule text of a path: Rules non-matching
// forward rules, the same addresses as the nftables rows.
func e1kboxRules(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "ip saddr %s drop\n", ruleAddr(i))
	}
	return b.String()
}

// The NAT paths' addressing: the generator is a LAN host behind the box's
// LAN port b0, the sink the WAN gateway behind its WAN port b1, and the
// traffic goes to a server beyond the gateway.
var (
	natLANPort, natWANPort = boxPorts[0], boxPorts[1]
	natGenIP               = netip.MustParseAddr("192.168.60.2")
	natLAN                 = netip.MustParsePrefix("192.168.60.1/24") // the router's LAN address
	natWAN                 = netip.MustParsePrefix("10.79.0.1/24")    // the box's static WAN address
	natGatewayIP           = netip.MustParseAddr("10.79.0.2")         // the sink (s0)
	natServerIP            = netip.MustParseAddr("198.51.100.9")      // the destination, routed via the gateway
)

// applianceConfig is the runtime config for an e1kbox path: bridge mode
// over b0 and b1 (NAT mode with b0 the LAN and b1 the WAN port for NAT
// paths), the path's rules and CPU placement. It is validated with the
// appliance's own config package.
func applianceConfig(p Path) ([]byte, error) {
	rs, err := rules.Parse(e1kboxRules(p.Rules))
	if err != nil {
		return nil, fmt.Errorf("e1kbox rules: %w", err)
	}
	c := &config.Config{
		Version: config.Version,
		Mode:    config.ModeBridge,
		Rules:   *rs,
		Tuning:  tuning.Plan{Placement: p.Placement},
	}
	for _, port := range boxPorts {
		c.Ports = append(c.Ports, config.Port{Name: port, Interface: port})
	}
	if p.NAT {
		c.Mode = config.ModeNAT
		c.Ports[0].Role, c.Ports[0].Addresses = config.RoleLAN, []netip.Prefix{natLAN}
		c.Ports[1].Role, c.Ports[1].Addresses = config.RoleWAN, []netip.Prefix{natWAN}
		c.NAT.Gateway = natGatewayIP
		// The bare router runs no services; the services row has the
		// defaults (DHCP server and DNS forwarder on the host port).
		c.DHCP.Enabled, c.DNS.Enabled = &p.Services, &p.Services
	}
	c.Dashboard.Listen = applianceListen
	c.ApplyDefaults()
	if err := c.Validate(config.Env{Interfaces: boxPorts}); err != nil {
		return nil, fmt.Errorf("e1kbox config: %w", err)
	}
	return config.Marshal(c)
}
