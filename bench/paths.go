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
	// FastPath is the appliance's fastPath setting (e1kbox paths): ""
	// is its default (auto: tcx), "off" or "xdp".
	FastPath string
	// RxRing is the appliance's -rx-ring ("" its default, "blocks" the
	// TPACKET_V3 rings of before).
	RxRing string
	// FW4 loads the OpenWrt-like ruleset (fw4Rules) instead of NftRules,
	// or, for e1kbox, its e1kbox equivalent.
	FW4 bool
	// IPv6 (with NAT) routes UDP/IPv6 from the LAN side to the WAN side
	// instead of masquerading IPv4: the kernel forwarding IPv6 with the
	// stateful nftables ruleset (nftRules6), or the appliance in NAT mode
	// with the static prefix ipv6Prefix; Rules are then ip6 rules.
	IPv6 bool
	// Latency measures one-way latency at fractions of the path's
	// capacity (latencyLoads); ConnRate the new NAT connections per
	// second it carries and the latency of new flows' first packets.
	Latency, ConnRate bool
}

// Path names of the reference rows.
const (
	directName    = "direct veth (no box)"
	kernelName    = "kernel bridge"
	kernelNATName = "kernel NAT"
	e1kboxName    = "e1kbox bridge"
	kernel6Name   = "kernel IPv6 routing + nft stateful"
	e1kbox6Name   = "e1kbox ipv6"
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
// the largest count, then e1kbox per placement with 0 rules, with the
// largest count of rules and with the fast path off (generic XDP too at
// the default placement); then the NAT paths (the kernel with nftables
// masquerade bare, with the largest count of rules and with the fw4-like
// ruleset; the appliance in NAT mode at the first placement bare, with
// the rules, with the fw4-like rules, with the fast path off and on XDP;
// ratios against the kernel NAT; also with its router services, against
// itself without) and the default-placement e1kbox bridge, with the
// fast path on and off, with wsClients dashboard clients (ratio against
// the same bridge without them; with the fast path off every frame
// crosses the worker, so the clients' cost shows in its rate). Latency is measured on the bare kernel and default-placement
// e1kbox paths (fast path on, off, and off with the old block rings), the
// connection rate on the bare NAT paths. Last the IPv6 paths: the kernel
// routing IPv6 with the stateful nftables ruleset, and the appliance in
// NAT mode with a static prefix at the first placement, bare (ratio
// against the kernel's) and with the largest count of ip6 rules (ratio
// against itself bare).
func buildPaths(ruleCounts []int, placements []tuning.Placement) []Path {
	paths := []Path{{Name: directName, Kind: kindDirect}, {Name: kernelName, Kind: kindKernel, Latency: true}}
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
		def := pl == tuning.DefaultPlacement
		paths = append(paths, Path{Name: name, Kind: kindE1kbox, Placement: pl, Latency: def})
		if most > 0 {
			paths = append(paths, Path{Name: name + " + " + countName(most) + " rules", Kind: kindE1kbox, Rules: most, Placement: pl})
		}
		paths = append(paths, Path{Name: name + fastPathOffSuffix, Kind: kindE1kbox, Placement: pl, FastPath: "off", Latency: def})
		if def {
			paths = append(paths, Path{Name: name + fastPathOffSuffix + blocksSuffix, Kind: kindE1kbox, Placement: pl, FastPath: "off", RxRing: "blocks"})
			paths = append(paths, Path{Name: name + xdpSuffix, Kind: kindE1kbox, Placement: pl, FastPath: "xdp"})
		}
	}
	paths = append(paths, Path{Name: kernelNATName, Kind: kindKernel, NAT: true, Latency: true, ConnRate: true})
	if most > 0 {
		paths = append(paths, Path{Name: kernelNATName + " + " + countName(most) + " rules", Kind: kindKernel, NAT: true, NftRules: most, Baseline: kernelNATName})
	}
	paths = append(paths, Path{Name: kernelNATName + fw4Suffix, Kind: kindKernel, NAT: true, FW4: true, Baseline: kernelNATName})
	if len(placements) > 0 {
		pl := placements[0]
		name := "e1kbox nat"
		if pl != tuning.DefaultPlacement {
			name += " " + string(pl)
		}
		nat := func(suffix string, mod func(*Path)) {
			p := Path{Name: name + suffix, Kind: kindE1kbox, NAT: true, Placement: pl, Baseline: kernelNATName}
			if mod != nil {
				mod(&p)
			}
			paths = append(paths, p)
		}
		def := pl == tuning.DefaultPlacement
		nat("", func(p *Path) { p.Latency, p.ConnRate = def, def })
		nat(" + services", func(p *Path) { p.Services, p.Baseline = true, name })
		if most > 0 {
			nat(" + "+countName(most)+" rules", func(p *Path) { p.Rules = most })
		}
		nat(fw4Suffix, func(p *Path) { p.FW4, p.Baseline = true, kernelNATName+fw4Suffix })
		nat(fastPathOffSuffix, func(p *Path) { p.FastPath, p.Latency = "off", def })
		nat(fastPathOffSuffix+blocksSuffix, func(p *Path) { p.FastPath, p.RxRing, p.Latency = "off", "blocks", def })
		nat(xdpSuffix, func(p *Path) { p.FastPath = "xdp" })
	}
	if slices.Contains(placements, tuning.DefaultPlacement) {
		ws := " + " + strconv.Itoa(wsClients) + " ws clients"
		paths = append(paths, Path{Name: e1kboxName + ws, Kind: kindE1kbox,
			Placement: tuning.DefaultPlacement, WSClients: wsClients, Baseline: e1kboxName})
		paths = append(paths, Path{Name: e1kboxName + fastPathOffSuffix + ws, Kind: kindE1kbox, FastPath: "off",
			Placement: tuning.DefaultPlacement, WSClients: wsClients, Baseline: e1kboxName + fastPathOffSuffix})
	}
	paths = append(paths, Path{Name: kernel6Name, Kind: kindKernel, NAT: true, IPv6: true})
	if len(placements) > 0 {
		pl := placements[0]
		name := e1kbox6Name
		if pl != tuning.DefaultPlacement {
			name += " " + string(pl)
		}
		paths = append(paths, Path{Name: name, Kind: kindE1kbox, NAT: true, IPv6: true, Placement: pl, Baseline: kernel6Name})
		if most > 0 {
			paths = append(paths, Path{Name: name + " + " + countName(most) + " rules", Kind: kindE1kbox, NAT: true, IPv6: true,
				Placement: pl, Rules: most, Baseline: name})
		}
	}
	return paths
}

// workerForwards reports whether an e1kbox path's frames are the worker's
// rather than the fast path's: with the fast path off (it takes IPv4 NAT
// flows, bridged pairs and routed IPv6 flows).
func (p Path) workerForwards() bool { return p.FastPath == "off" }

// Suffixes of the path variants.
const (
	fastPathOffSuffix = ", fast path off"
	xdpSuffix         = ", fast path xdp"
	blocksSuffix      = ", blocks ring" // TPACKET_V3 blocks, the rings before the fast path
	fw4Suffix         = " + fw4 rules"
)

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
		// With the fast path the box's work is the receive CPU's (the
		// worker sees only new flows and exceptions): the generator
		// takes the worker's CPU, as it takes the kernel paths' spare one.
		if p.Kind == kindE1kbox && !p.workerForwards() && pl.Worker >= 0 && pl.Worker != pl.RX {
			pl.Gen = pl.Worker
		}
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

// slowPlace is the placement for frames that all take the e1kbox
// worker's path (new connections) on path p placed at pl: the placement
// of p with its fast path off, when that keeps pl's sink CPU (the sink's
// steering is set up for pl); else pl.
func slowPlace(p Path, pl cpuPlace, cpus tuning.CPUSet) cpuPlace {
	if p.Kind != kindE1kbox || p.workerForwards() {
		return pl
	}
	p.FastPath = "off"
	if s, err := placeFor(p, cpus); err == nil && s.Sink == pl.Sink && s.RX == pl.RX && s.Worker == pl.Worker {
		return s
	}
	return pl
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
	case p.IPv6:
		return nftRules6(natLANPort, natWANPort)
	case p.FW4:
		return fw4Rules(natLANPort, natWANPort)
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

// fw4Rules is an nftables ruleset like OpenWrt's fw4 default for a lan
// and a wan zone (lan and wan the interfaces): the filter chains input,
// forward and output with "ct state established,related accept" first and
// invalid dropped, per-zone chains with the default zone policies (lan
// accepts, wan rejects input and forwarding but for DHCP, ping, IGMP and
// IPsec), a SYN flood limit, MSS clamping and masquerade on the wan:
// nft lists 48 rules.
func fw4Rules(lan, wan string) string { return fmt.Sprintf(fw4Template, lan, wan) }

// fw4Template is fw4Rules' ruleset: %[1]q is the LAN interface, %[2]q the WAN's.
const fw4Template = `table inet fw4 {
	chain input {
		type filter hook input priority filter; policy drop;
		iifname "lo" accept
		ct state vmap { established : accept, related : accept, invalid : drop }
		tcp flags syn / fin,syn,rst,ack jump syn_flood
		iifname %[1]q jump input_lan
		iifname %[2]q jump input_wan
		jump handle_reject
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state vmap { established : accept, related : accept, invalid : drop }
		iifname %[1]q jump forward_lan
		iifname %[2]q jump forward_wan
		jump handle_reject
	}
	chain output {
		type filter hook output priority filter; policy accept;
		oifname "lo" accept
		ct state vmap { established : accept, related : accept, invalid : drop }
		oifname %[1]q jump output_lan
		oifname %[2]q jump output_wan
	}
	chain prerouting {
		type filter hook prerouting priority filter; policy accept;
		iifname %[1]q jump helper_lan
	}
	chain handle_reject {
		meta l4proto tcp reject with tcp reset
		reject
	}
	chain syn_flood {
		limit rate 25/second burst 50 packets return
		drop
	}
	chain input_lan { ct status dnat accept; jump accept_from_lan; }
	chain output_lan { jump accept_to_lan; }
	chain forward_lan { jump accept_to_wan; jump accept_to_lan; }
	chain helper_lan { }
	chain accept_from_lan { iifname %[1]q accept; }
	chain accept_to_lan { oifname %[1]q accept; }
	chain input_wan {
		meta nfproto ipv4 udp dport 68 accept
		icmp type echo-request accept
		meta nfproto ipv4 meta l4proto igmp accept
		meta nfproto ipv6 udp dport 546 accept
		ip6 saddr fe80::/10 icmpv6 type . icmpv6 code { mld-listener-query . no-route, mld-listener-report . no-route } accept
		icmpv6 type { destination-unreachable, time-exceeded, echo-request, echo-reply, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept
		ct status dnat accept
		jump reject_from_wan
	}
	chain output_wan { jump accept_to_wan; }
	chain forward_wan {
		icmpv6 type { destination-unreachable, time-exceeded, echo-request, echo-reply } limit rate 1000/second accept
		meta l4proto esp jump accept_to_lan
		udp dport 500 jump accept_to_lan
		ct status dnat accept
		jump reject_to_lan
	}
	chain accept_to_wan {
		meta nfproto ipv4 oifname %[2]q ct state invalid drop
		oifname %[2]q accept
	}
	chain reject_from_wan { iifname %[2]q jump handle_reject; }
	chain reject_to_lan { oifname %[1]q jump handle_reject; }
	chain dstnat { type nat hook prerouting priority dstnat; policy accept; }
	chain srcnat {
		type nat hook postrouting priority srcnat; policy accept;
		oifname %[2]q jump srcnat_wan
	}
	chain srcnat_wan { meta nfproto ipv4 masquerade; }
	chain mangle_forward {
		type filter hook forward priority mangle; policy accept;
		iifname %[2]q tcp flags syn tcp option maxseg size set rt mtu
		oifname %[2]q tcp flags syn tcp option maxseg size set rt mtu
	}
}
`

// e1kboxFW4Rules is fw4Rules in e1kbox's rule language (NAT mode: the
// router's conntrack answers established traffic; the forward chain sees
// new connections, the input chain the router's own services, and
// masquerade and MSS clamping are the router's), 18 rules.
func e1kboxFW4Rules(lan, wan string) string {
	return fmt.Sprintf(`policy input drop
policy forward drop
chain input
ct state established,related accept
ct state invalid drop
iif %[1]s accept
iif %[2]s udp dport 68 accept
iif %[2]s icmp type echo-request accept
iif %[2]s ip protocol igmp accept
iif %[2]s reject
chain forward
ct state established,related accept
ct state invalid drop
iif %[1]s oif %[2]s accept
iif %[1]s oif %[1]s accept
iif %[2]s ip protocol esp oif %[1]s accept
iif %[2]s udp dport 500 oif %[1]s accept
iif %[2]s reject
chain output
ct state established,related accept
ct state invalid drop
oif %[1]s accept
oif %[2]s accept
`, lan, wan)
}

// nftRules6 is the IPv6 kernel path's ruleset, the stateful firewall
// e1kbox's IPv6 router implements: in an inet-family forward chain,
// established and related packets accepted, invalid ones dropped, new
// connections from the LAN (lan) to the WAN (wan) accepted, the rest
// dropped.
func nftRules6(lan, wan string) string {
	return fmt.Sprintf(`table inet e1kbench6 {
	chain benchfwd {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		ct state invalid drop
		iifname %q oifname %q ct state new accept
		drop
	}
}
`, lan, wan)
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

// e1kboxRules6 is e1kboxRules for the IPv6 paths: n non-matching
// "ip6 saddr" forward rules (ruleAddr6).
func e1kboxRules6(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "ip6 saddr %s drop\n", ruleAddr6(i))
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

// The IPv6 paths' addressing: the LAN is the first /64 of the static
// prefix, the generator a host in it; the sink is the WAN next hop (its
// link-local address), the server beyond it.
var (
	ipv6Prefix   = netip.MustParsePrefix("2001:db8:60::/48")  // the appliance's ipv6.prefix
	ipv6RouterIP = netip.MustParsePrefix("2001:db8:60::1/64") // the kernel router's LAN address
	ipv6GenIP    = netip.MustParseAddr("2001:db8:60::2")
	ipv6ServerIP = netip.MustParseAddr("2001:db8:99::9")
	ipv6Gateway  = linkLocal(macS0)
)

// natConntrackSize is the appliance's connection table in the NAT paths:
// the kernel's default nf_conntrack_max on a machine with this much
// memory (262144).
const natConntrackSize = 262144

// applianceConfig is the runtime config for an e1kbox path: bridge mode
// over b0 and b1 (NAT mode with b0 the LAN and b1 the WAN port for NAT
// paths), the path's rules and CPU placement. It is validated with the
// appliance's own config package.
func applianceConfig(p Path) ([]byte, error) {
	text := e1kboxRules(p.Rules)
	if p.IPv6 {
		text = e1kboxRules6(p.Rules)
	}
	if p.FW4 {
		text = e1kboxFW4Rules(natLANPort, natWANPort)
	}
	rs, err := rules.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("e1kbox rules: %w", err)
	}
	c := &config.Config{
		Version: config.Version,
		Mode:    config.ModeBridge,
		Rules:   *rs,
		Tuning:  tuning.Plan{Placement: p.Placement},
	}
	if p.FastPath != "" {
		c.FastPath = config.FastPath(p.FastPath)
	} else if !p.NAT {
		c.FastPath = config.FastPathTCX // auto leaves a bridge on the rings
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
		// As big as the kernel's nf_conntrack_max on the build host, for
		// the connection-rate rows.
		c.NAT.Conntrack.Size = natConntrackSize
	}
	if p.IPv6 {
		// The static prefix and the sink as the next hop: no DHCPv6, no
		// RAs from the WAN.
		c.IPv6.Enabled = &p.IPv6
		c.IPv6.Prefix, c.IPv6.Gateway = ipv6Prefix, ipv6Gateway
	}
	c.Dashboard.Listen = applianceListen
	c.ApplyDefaults()
	if err := c.Validate(config.Env{Interfaces: boxPorts}); err != nil {
		return nil, fmt.Errorf("e1kbox config: %w", err)
	}
	return config.Marshal(c)
}
