package main

import (
	"regexp"
	"slices"
	"strconv"

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
	// WANVLAN (with NAT, e1kbox) tags the WAN with this 802.1Q VLAN
	// (nat.wan.vlan), the sink's s0 speaking it (internal/vlanpeer).
	WANVLAN uint16
	// WANPPPoE (with NAT, e1kbox) makes the WAN a PPPoE link
	// (nat.wan.pppoe), inside WANVLAN if set: the sink's s0 is the access
	// concentrator (internal/pppoeac), session benchSession.
	WANPPPoE bool
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
// itself without, and over a WAN tagged VLAN wanVLAN, over a PPPoE WAN
// and over PPPoE in that VLAN, each against itself untagged) and the default-placement e1kbox bridge, with the
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
		nat(wanVLANSuffix, func(p *Path) { p.WANVLAN, p.Baseline = wanVLAN, name })
		nat(wanPPPoESuffix, func(p *Path) { p.WANPPPoE, p.Baseline = true, name })
		nat(wanPPPoESuffix+inVLANSuffix, func(p *Path) { p.WANPPPoE, p.WANVLAN, p.Baseline = true, wanVLAN, name })
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
	wanVLANSuffix     = " over VLAN"
	wanPPPoESuffix    = " over PPPoE"
	inVLANSuffix      = " in VLAN"
)

// wanVLAN is the VLAN of the NAT row over a tagged WAN.
const wanVLAN = 7

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
