package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
	"e1kbox/rules"
	"e1kbox/tuning"
)

func TestBuildPaths(t *testing.T) {
	paths := buildPaths([]int{1000, 10000}, []tuning.Placement{tuning.PlacementSplit, tuning.PlacementSame})
	var names []string
	byName := map[string]Path{}
	for _, p := range paths {
		names = append(names, p.Name)
		byName[p.Name] = p
	}
	want := []string{
		"direct veth (no box)",
		"kernel bridge",
		"kernel bridge + 1k nft rules",
		"kernel bridge + 10k nft rules",
		"kernel bridge + 10k nft set",
		"e1kbox bridge",
		"e1kbox bridge + 10k rules",
		"e1kbox bridge, fast path off",
		"e1kbox bridge, fast path off, blocks ring",
		"e1kbox bridge, fast path xdp",
		"e1kbox bridge same",
		"e1kbox bridge same + 10k rules",
		"e1kbox bridge same, fast path off",
		"kernel NAT",
		"kernel NAT + 10k rules",
		"kernel NAT + fw4 rules",
		"e1kbox nat",
		"e1kbox nat + services",
		"e1kbox nat over VLAN",
		"e1kbox nat over PPPoE",
		"e1kbox nat over PPPoE in VLAN",
		"e1kbox nat + 10k rules",
		"e1kbox nat + fw4 rules",
		"e1kbox nat, fast path off",
		"e1kbox nat, fast path off, blocks ring",
		"e1kbox nat, fast path xdp",
		"e1kbox bridge + 100 ws clients",
		"e1kbox bridge, fast path off + 100 ws clients",
		"kernel IPv6 routing + nft stateful",
		"e1kbox ipv6",
		"e1kbox ipv6 + 10k rules",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	for name, ok := range map[string]func(Path) bool{
		"kernel bridge + 10k nft set":    func(p Path) bool { return p.NftSet == 10000 && p.NftRules == 0 && p.Kind == kindKernel },
		"e1kbox bridge same + 10k rules": func(p Path) bool { return p.Rules == 10000 && p.Placement == tuning.PlacementSame },
		"e1kbox nat + 10k rules": func(p Path) bool {
			return p.NAT && p.Rules == 10000 && p.Baseline == kernelNATName && p.Placement == tuning.PlacementSplit
		},
		"kernel NAT + 10k rules": func(p Path) bool { return p.NAT && p.NftRules == 10000 && p.Baseline == kernelNATName },
		"kernel NAT + fw4 rules": func(p Path) bool { return p.NAT && p.FW4 && p.Kind == kindKernel },
		"e1kbox nat + fw4 rules": func(p Path) bool { return p.NAT && p.FW4 && p.Baseline == kernelNATName+fw4Suffix },
		"e1kbox nat":             func(p Path) bool { return p.Latency && p.ConnRate && p.FastPath == "" },
		"e1kbox nat + services":  func(p Path) bool { return p.Services && p.Baseline == "e1kbox nat" && p.Rules == 0 },
		"e1kbox nat over VLAN": func(p Path) bool {
			return p.NAT && p.WANVLAN == 7 && !p.WANPPPoE && p.Baseline == "e1kbox nat" && !p.Services && p.FastPath == ""
		},
		"e1kbox nat over PPPoE": func(p Path) bool {
			return p.NAT && p.WANPPPoE && p.WANVLAN == 0 && p.Baseline == "e1kbox nat" && !p.Services && p.FastPath == ""
		},
		"e1kbox nat over PPPoE in VLAN": func(p Path) bool {
			return p.NAT && p.WANPPPoE && p.WANVLAN == 7 && p.Baseline == "e1kbox nat" && !p.Services && p.FastPath == ""
		},
		"e1kbox nat, fast path off, blocks ring": func(p Path) bool {
			return p.FastPath == "off" && p.RxRing == "blocks" && p.Latency && !p.ConnRate
		},
		"e1kbox bridge, fast path xdp": func(p Path) bool { return p.FastPath == "xdp" && !p.Latency },
		"e1kbox bridge, fast path off, blocks ring": func(p Path) bool {
			return p.FastPath == "off" && p.RxRing == "blocks" && !p.Latency && !p.NAT
		},
		"e1kbox bridge same":             func(p Path) bool { return !p.Latency },
		"kernel NAT":                     func(p Path) bool { return p.Latency && p.ConnRate },
		"e1kbox bridge + 100 ws clients": func(p Path) bool { return p.WSClients == 100 && p.Baseline == e1kboxName && !p.NAT },
		"kernel IPv6 routing + nft stateful": func(p Path) bool {
			return p.Kind == kindKernel && p.NAT && p.IPv6 && p.Baseline == "" && p.NftRules == 0 && !p.Latency && !p.ConnRate
		},
		"e1kbox ipv6": func(p Path) bool {
			return p.Kind == kindE1kbox && p.NAT && p.IPv6 && p.Baseline == kernel6Name && p.Rules == 0 && p.FastPath == "" &&
				p.Placement == tuning.PlacementSplit && !p.Latency && !p.ConnRate
		},
		"e1kbox ipv6 + 10k rules": func(p Path) bool {
			return p.Kind == kindE1kbox && p.NAT && p.IPv6 && p.Baseline == e1kbox6Name && p.Rules == 10000
		},
		"e1kbox bridge, fast path off + 100 ws clients": func(p Path) bool {
			return p.WSClients == 100 && p.FastPath == "off" && p.Baseline == e1kboxName+fastPathOffSuffix && !p.NAT
		},
	} {
		if !ok(byName[name]) {
			t.Errorf("path %q: %+v", name, byName[name])
		}
	}
	if got := buildPaths(nil, nil); len(got) != 5 || got[2].Name != kernelNATName || got[3].Name != kernelNATName+fw4Suffix || got[4].Name != kernel6Name {
		t.Errorf("no rules, no placements: %d paths, want direct, kernel bridge, kernel NAT, kernel NAT + fw4 rules and the kernel's IPv6", len(got))
	}
	same := buildPaths([]int{10}, []tuning.Placement{tuning.PlacementSame})
	var sameNames []string
	for _, p := range same {
		if p.NAT {
			sameNames = append(sameNames, p.Name)
		}
	}
	wantSame := []string{"kernel NAT", "kernel NAT + 10 rules", "kernel NAT + fw4 rules", "e1kbox nat same", "e1kbox nat same + services", "e1kbox nat same over VLAN", "e1kbox nat same over PPPoE",
		"e1kbox nat same over PPPoE in VLAN", "e1kbox nat same + 10 rules",
		"e1kbox nat same + fw4 rules", "e1kbox nat same, fast path off", "e1kbox nat same, fast path off, blocks ring", "e1kbox nat same, fast path xdp",
		"kernel IPv6 routing + nft stateful", "e1kbox ipv6 same", "e1kbox ipv6 same + 10 rules"}
	if diff := cmp.Diff(wantSame, sameNames); diff != "" {
		t.Errorf("same placement only: NAT paths (-want +got):\n%s", diff)
	}
	if got := countName(1500); got != "1500" {
		t.Errorf("countName(1500) = %q", got)
	}
}

// TestSlowPlace: new connections on a fast path row get the generator on
// the receive CPU, as the fast path off rows; other rows keep theirs.
func TestSlowPlace(t *testing.T) {
	two := tuning.CPUSet{0, 1}
	for _, tc := range []struct {
		name string
		p    Path
		want cpuPlace
	}{
		{"e1kbox nat", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit, NAT: true}, cpuPlace{Gen: 0, RX: 0, Worker: 1, Sink: 1}},
		{"e1kbox nat, fast path off", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit, NAT: true, FastPath: "off"}, cpuPlace{Gen: 0, RX: 0, Worker: 1, Sink: 1}},
		{"e1kbox same", Path{Kind: kindE1kbox, Placement: tuning.PlacementSame, NAT: true}, cpuPlace{Gen: 1, RX: 0, Worker: 0, Sink: 1}},
		{"kernel NAT", Path{Kind: kindKernel, NAT: true}, cpuPlace{Gen: 1, RX: 0, Worker: -1, Sink: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := placeFor(tc.p, two)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, slowPlace(tc.p, pl, two)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlaceFor(t *testing.T) {
	two := tuning.CPUSet{0, 1}
	for _, tc := range []struct {
		name string
		p    Path
		cpus tuning.CPUSet
		want cpuPlace
		text string
	}{
		{"direct", Path{Kind: kindDirect}, two, cpuPlace{Gen: 1, RX: -1, Worker: -1, Sink: 0}, "gen cpu1, sink cpu0"},
		{"kernel", Path{Kind: kindKernel}, two, cpuPlace{Gen: 1, RX: 0, Worker: -1, Sink: 1}, "gen cpu1, box rx cpu0, sink cpu1"},
		{"e1kbox same", Path{Kind: kindE1kbox, Placement: tuning.PlacementSame}, two,
			cpuPlace{Gen: 1, RX: 0, Worker: 0, Sink: 1}, "gen cpu1, box rx cpu0, worker cpu0, sink cpu1"},
		{"e1kbox split", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit, FastPath: "off"}, two,
			cpuPlace{Gen: 0, RX: 0, Worker: 1, Sink: 1}, "gen cpu0, box rx cpu0, worker cpu1, sink cpu1"},
		// The fast path does the box's work on the receive CPU.
		{"e1kbox split, fast path", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit}, two,
			cpuPlace{Gen: 1, RX: 0, Worker: 1, Sink: 1}, "gen cpu1, box rx cpu0, worker cpu1, sink cpu1"},
		// Routed IPv6 is the fast path's too.
		{"e1kbox split, IPv6", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit, NAT: true, IPv6: true}, two,
			cpuPlace{Gen: 1, RX: 0, Worker: 1, Sink: 1}, "gen cpu1, box rx cpu0, worker cpu1, sink cpu1"},
		{"kernel IPv6", Path{Kind: kindKernel, NAT: true, IPv6: true}, two, cpuPlace{Gen: 1, RX: 0, Worker: -1, Sink: 1}, ""},
		{"e1kbox split, 4 CPUs", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit}, tuning.CPUSet{0, 1, 2, 3},
			cpuPlace{Gen: 1, RX: 0, Worker: 2, Sink: 1}, ""},
		{"kernel, 1 CPU", Path{Kind: kindKernel}, tuning.CPUSet{3}, cpuPlace{Gen: 3, RX: 3, Worker: -1, Sink: 3}, ""},
		{"e1kbox split, 1 CPU", Path{Kind: kindE1kbox, Placement: tuning.PlacementSplit}, tuning.CPUSet{0},
			cpuPlace{Gen: 0, RX: 0, Worker: 0, Sink: 0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := placeFor(tc.p, tc.cpus)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tc.text != "" && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
		})
	}
	if _, err := placeFor(Path{Kind: kindKernel}, nil); err == nil {
		t.Error("no CPUs: no error")
	}
	if _, err := placeFor(Path{Kind: kindE1kbox, Placement: tuning.PlacementManual}, two); err == nil {
		t.Error("manual placement: no error")
	}
}

func TestNftRules(t *testing.T) {
	if s := nftRules(Path{Kind: kindKernel}); s != "" {
		t.Errorf("no rules: %q", s)
	}
	lin := nftRules(Path{NftRules: 3})
	for _, want := range []string{"table bridge e1kbench", "type filter hook forward priority 0;",
		"ip saddr 10.128.0.1 drop\n", "ip saddr 10.128.0.3 drop\n"} {
		if !strings.Contains(lin, want) {
			t.Errorf("linear script lacks %q:\n%s", want, lin)
		}
	}
	if n := strings.Count(lin, " drop\n"); n != 3 {
		t.Errorf("%d rules, want 3", n)
	}
	set := nftRules(Path{NftSet: 3})
	for _, want := range []string{"set blocked", "type ipv4_addr", "10.128.0.3,", "ip saddr @blocked drop"} {
		if !strings.Contains(set, want) {
			t.Errorf("set script lacks %q:\n%s", want, set)
		}
	}
	if n := strings.Count(set, " drop\n"); n != 1 {
		t.Errorf("set script has %d rules, want 1", n)
	}
}

func TestApplianceConfig(t *testing.T) {
	b, err := applianceConfig(Path{Kind: kindE1kbox, Rules: 100, Placement: tuning.PlacementSame})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b)
	if err != nil {
		t.Fatalf("the appliance does not parse it: %v\n%s", err, b)
	}
	if err := c.Validate(config.Env{Interfaces: []string{"b0", "b1"}}); err != nil {
		t.Fatalf("the appliance does not accept it: %v", err)
	}
	if c.Mode != config.ModeBridge || len(c.Ports) != 2 || c.Ports[0].Interface != "b0" || c.Ports[1].Interface != "b1" {
		t.Errorf("mode %s ports %+v", c.Mode, c.Ports)
	}
	if c.Tuning.Placement != tuning.PlacementSame || c.Dashboard.Listen != applianceListen {
		t.Errorf("placement %q listen %q", c.Tuning.Placement, c.Dashboard.Listen)
	}
	if len(c.Rules.Rules) != 100 {
		t.Fatalf("%d rules, want 100", len(c.Rules.Rules))
	}
	// The rules drop only 10.128.0.0/9: the generated traffic passes.
	tab, err := rules.Compile(&c.Rules, rules.Options{Ports: map[string]uint16{"b0": 1, "b1": 2}})
	if err != nil {
		t.Fatal(err)
	}
	k := rules.Key{InPort: 1, OutPort: 2, Proto: 17, SrcPort: firstSport, DstPort: udpDport, Chain: rules.Forward}
	k.SetAddrs(genIP, sinkIP)
	if v := tab.Lookup(&k); v.Action != rules.Accept || v.Rule != -1 {
		t.Errorf("generated traffic: verdict %+v, want the accept policy", v)
	}
	k.SetAddrs(ruleAddr(99), sinkIP)
	if v := tab.Lookup(&k); v.Action != rules.Drop || v.Rule != 99 {
		t.Errorf("traffic from %v: verdict %+v, want rule 99's drop", ruleAddr(99), v)
	}
	if !json.Valid(b) {
		t.Error("not JSON")
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.reps != 3 || o.duration != 2*time.Second || o.warmup != 500*time.Millisecond || o.cpuWindow != 3*time.Second || o.genRing || o.rx != "rps" {
		t.Errorf("defaults: %+v", o)
	}
	if diff := cmp.Diff([]int{64, 512}, o.sizes); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1000, 10000}, o.rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]tuning.Placement{"split", "same"}, o.placements); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	q, err := parseFlags([]string{"-quick", "-sizes", "128", "-rules", "5k", "-out", "r.json", "-paths", "kernel", "-gen-ring", "-rx", "napi"})
	if err != nil {
		t.Fatal(err)
	}
	if q.reps != 1 || q.duration != time.Second || q.sizes[0] != 128 || q.rules[0] != 5000 || q.out != "r.json" || !q.paths.MatchString("kernel bridge") || !q.genRing || q.rx != "napi" {
		t.Errorf("quick: %+v", q)
	}
	for _, bad := range [][]string{
		{"-sizes", "32"}, {"-sizes", ""}, {"-rules", "x"}, {"-placements", "manual"}, {"-placements", "sideways"},
		{"-flows", "0"}, {"-rate", "-1"}, {"-paths", "("}, {"extra"}, {"-rx", "irq"}, {"-rx", "napi", "-appliance-tune"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

func TestSelectPaths(t *testing.T) {
	all := buildPaths([]int{10000}, []tuning.Placement{tuning.PlacementSplit})
	for _, tc := range []struct {
		re   string
		want []string
	}{
		{"", nil}, // all
		{"(?i)nat|ws", []string{"e1kbox bridge", "e1kbox bridge, fast path off", "kernel NAT", "kernel NAT + 10k rules", "kernel NAT + fw4 rules", "e1kbox nat", "e1kbox nat + services", "e1kbox nat over VLAN", "e1kbox nat over PPPoE",
			"e1kbox nat over PPPoE in VLAN", "e1kbox nat + 10k rules", "e1kbox nat + fw4 rules", "e1kbox nat, fast path off", "e1kbox nat, fast path off, blocks ring", "e1kbox nat, fast path xdp",
			"e1kbox bridge + 100 ws clients", "e1kbox bridge, fast path off + 100 ws clients"}},
		{"^e1kbox nat$", []string{"kernel NAT", "e1kbox nat"}},
		{"ws", []string{"e1kbox bridge", "e1kbox bridge, fast path off", "e1kbox bridge + 100 ws clients", "e1kbox bridge, fast path off + 100 ws clients"}},
		{"^direct", []string{"direct veth (no box)"}},
		// bench -paths ipv6 (case-insensitive there): the kernel's row comes as the baseline.
		{"ipv6", []string{"kernel IPv6 routing + nft stateful", "e1kbox ipv6", "e1kbox ipv6 + 10k rules"}},
		{"nothing", nil},
	} {
		t.Run(tc.re, func(t *testing.T) {
			var re *regexp.Regexp
			want := tc.want
			if tc.re != "" {
				re = regexp.MustCompile(tc.re)
			} else {
				for _, p := range all {
					want = append(want, p.Name)
				}
			}
			var got []string
			for _, p := range selectPaths(all, re) {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	want := map[string]string{
		"kernel NAT + 10k rules":                        "kernel NAT",
		"kernel NAT + fw4 rules":                        "kernel NAT",
		"e1kbox nat":                                    "kernel NAT",
		"e1kbox nat + services":                         "e1kbox nat",
		"e1kbox nat over VLAN":                          "e1kbox nat",
		"e1kbox nat over PPPoE":                         "e1kbox nat",
		"e1kbox nat over PPPoE in VLAN":                 "e1kbox nat",
		"e1kbox nat + 10k rules":                        "kernel NAT",
		"e1kbox nat + fw4 rules":                        "kernel NAT + fw4 rules",
		"e1kbox nat, fast path off":                     "kernel NAT",
		"e1kbox nat, fast path off, blocks ring":        "kernel NAT",
		"e1kbox nat, fast path xdp":                     "kernel NAT",
		"e1kbox bridge + 100 ws clients":                "e1kbox bridge",
		"e1kbox bridge, fast path off + 100 ws clients": "e1kbox bridge, fast path off",
		"e1kbox ipv6":                                   "kernel IPv6 routing + nft stateful",
		"e1kbox ipv6 + 10k rules":                       "e1kbox ipv6",
	}
	if diff := cmp.Diff(want, baselines(all)); diff != "" {
		t.Errorf("baselines (-want +got):\n%s", diff)
	}
}

func TestNftRulesNAT(t *testing.T) {
	bare := nftRules(Path{NAT: true})
	for _, want := range []string{"table ip e1kbench", "type nat hook postrouting priority srcnat;", `oifname "b1" masquerade`} {
		if !strings.Contains(bare, want) {
			t.Errorf("NAT script lacks %q:\n%s", want, bare)
		}
	}
	if strings.Contains(bare, "hook forward") {
		t.Errorf("NAT script without rules has a forward chain:\n%s", bare)
	}
	ruled := nftRules(Path{NAT: true, NftRules: 5})
	for _, want := range []string{"table ip e1kbench", "masquerade", "type filter hook forward priority 0;", "ip saddr 10.128.0.5 drop\n"} {
		if !strings.Contains(ruled, want) {
			t.Errorf("NAT script with rules lacks %q:\n%s", want, ruled)
		}
	}
	if n := strings.Count(ruled, " drop\n"); n != 5 {
		t.Errorf("%d rules, want 5", n)
	}
	if strings.Contains(ruled, "bridge") {
		t.Errorf("NAT rules in a bridge table:\n%s", ruled)
	}
}

func TestApplianceConfigNAT(t *testing.T) {
	b, err := applianceConfig(Path{Kind: kindE1kbox, NAT: true, Rules: 10, Placement: tuning.PlacementSplit})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b)
	if err != nil {
		t.Fatalf("the appliance does not parse it: %v\n%s", err, b)
	}
	if err := c.Validate(config.Env{Interfaces: []string{"b0", "b1"}}); err != nil {
		t.Fatalf("the appliance does not accept it: %v\n%s", err, b)
	}
	if c.Mode != config.ModeNAT || len(c.Ports) != 2 {
		t.Fatalf("mode %s ports %+v", c.Mode, c.Ports)
	}
	lan, wan := c.Ports[0], c.Ports[1]
	if lan.Interface != "b0" || lan.Role != config.RoleLAN || len(lan.Addresses) != 1 || lan.Addresses[0] != natLAN {
		t.Errorf("LAN port %+v", lan)
	}
	if wan.Interface != "b1" || wan.Role != config.RoleWAN || len(wan.Addresses) != 1 || wan.Addresses[0] != natWAN {
		t.Errorf("WAN port %+v", wan)
	}
	if c.NAT.Gateway != natGatewayIP || !natWAN.Contains(natGatewayIP) || !natLAN.Contains(natGenIP) || natWAN.Contains(natServerIP) {
		t.Errorf("gateway %v, WAN %v, LAN %v, generator %v, server %v", c.NAT.Gateway, natWAN, natLAN, natGenIP, natServerIP)
	}
	if len(c.Rules.Rules) != 10 {
		t.Errorf("%d rules, want 10", len(c.Rules.Rules))
	}
}

// TestApplianceConfigPPPoE: the PPPoE rows' appliance config dials the
// sink's AC over the WAN (in VLAN 7 for the tagged row), with no static
// WAN address or gateway, and the appliance accepts it.
func TestApplianceConfigPPPoE(t *testing.T) {
	for _, vid := range []uint16{0, wanVLAN} {
		b, err := applianceConfig(Path{Kind: kindE1kbox, NAT: true, WANPPPoE: true, WANVLAN: vid, Placement: tuning.PlacementSplit})
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(b)
		if err != nil {
			t.Fatalf("the appliance does not parse it: %v\n%s", err, b)
		}
		if err := c.Validate(config.Env{Interfaces: []string{"b0", "b1"}}); err != nil {
			t.Fatalf("the appliance does not accept it: %v\n%s", err, b)
		}
		if !c.IsPPPoE() || c.NAT.WAN.VLAN.ID != vid || len(c.Ports[1].Addresses) != 0 || c.NAT.Gateway.IsValid() {
			t.Errorf("VLAN %d: PPPoE %v, WAN %+v, VLAN %+v, gateway %v", vid, c.IsPPPoE(), c.Ports[1], c.NAT.WAN.VLAN, c.NAT.Gateway)
		}
	}
}

// TestWithPPPoE: the AC's replies are the frames in the session, as the
// box's dataplane parses them.
func TestWithPPPoE(t *testing.T) {
	f, err := udpFrame(minFrame, macS0, macB1, natServerIP, natWAN.Addr())
	if err != nil {
		t.Fatal(err)
	}
	got := withPPPoE(f)
	want := append(append(append([]byte(nil), f[:12]...), 0x88, 0x64, 0x11, 0, benchSession>>8, benchSession&0xff,
		byte((len(f)-12)>>8), byte(len(f)-12), 0x00, 0x21), f[14:]...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestApplianceConfigServices(t *testing.T) {
	for _, on := range []bool{false, true} {
		b, err := applianceConfig(Path{Kind: kindE1kbox, NAT: true, Services: on, Placement: tuning.PlacementSplit})
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if c.DHCP.IsEnabled() != on || c.DNS.IsEnabled() != on || on && c.HostPort == nil {
			t.Errorf("services %v: DHCP %v, DNS %v, host port %v", on, c.DHCP.IsEnabled(), c.DNS.IsEnabled(), c.HostPort)
		}
	}
}

func TestNftRulesIPv6(t *testing.T) {
	for _, p := range []Path{{NAT: true, IPv6: true}, {NAT: true, IPv6: true, NftRules: 5}} {
		got := nftRules(p)
		// The chain's rules in order, then nothing else.
		want := []string{
			"table inet e1kbench6 {",
			"type filter hook forward priority filter; policy drop;",
			"ct state established,related accept",
			"ct state invalid drop",
			`iifname "b0" oifname "b1" ct state new accept`,
			"drop",
		}
		var lines []string
		for l := range strings.SplitSeq(got, "\n") {
			if l = strings.TrimSpace(l); l != "" && l != "}" && !strings.HasPrefix(l, "chain ") {
				lines = append(lines, l)
			}
		}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("%+v: IPv6 ruleset (-want +got):\n%s", p, diff)
		}
		if strings.Contains(got, "masquerade") || strings.Contains(got, "table ip ") {
			t.Errorf("%+v: the IPv6 ruleset translates or is IPv4-only:\n%s", p, got)
		}
	}
}

func TestApplianceConfigIPv6(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules int
	}{{"bare", 0}, {"rules", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := applianceConfig(Path{Kind: kindE1kbox, NAT: true, IPv6: true, Rules: tc.rules, Placement: tuning.PlacementSplit})
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse(b)
			if err != nil {
				t.Fatalf("the appliance does not parse it: %v\n%s", err, b)
			}
			if err := c.Validate(config.Env{Interfaces: []string{"b0", "b1"}}); err != nil {
				t.Fatalf("the appliance does not accept it: %v\n%s", err, b)
			}
			got := fmt.Sprintf("mode %s ipv6 %v prefix %v gateway %v host port %v fast path %s", c.Mode, c.IPv6.IsEnabled(), c.IPv6.Prefix,
				c.IPv6.Gateway, c.HostPort != nil, c.FastPath)
			want := fmt.Sprintf("mode nat ipv6 true prefix %v gateway %v host port true fast path auto", ipv6Prefix, ipv6Gateway)
			if got != want {
				t.Errorf("got %s\nwant %s", got, want)
			}
			if len(c.Rules.Rules) != tc.rules {
				t.Fatalf("%d rules, want %d", len(c.Rules.Rules), tc.rules)
			}
			for i, r := range c.Rules.Rules {
				want := netip.PrefixFrom(ruleAddr6(i), 128)
				if r.SrcIP != want || r.Action != rules.Drop || r.Chain != rules.Forward {
					t.Errorf("rule %d: %+v, want a forward drop from %v", i, r, want)
				}
				if r.SrcIP.Contains(ipv6GenIP) {
					t.Errorf("rule %d matches the generator", i)
				}
			}
		})
	}
	lan := netip.PrefixFrom(ipv6Prefix.Addr(), 64)
	if !lan.Contains(ipv6GenIP) || ipv6RouterIP.Masked() != lan || ipv6Prefix.Contains(ipv6ServerIP) || ipv6Prefix.Contains(ruleAddr6(0)) ||
		ipv6Gateway != netip.MustParseAddr("fe80::e1:b0ff:fe00:4") {
		t.Errorf("addressing: LAN %v, generator %v, router %v, server %v, rules from %v, gateway %v", lan, ipv6GenIP, ipv6RouterIP,
			ipv6ServerIP, ruleAddr6(0), ipv6Gateway)
	}
}
