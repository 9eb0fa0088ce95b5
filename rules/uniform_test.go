package rules

import (
	"testing"
)

// copyFields copies the fields in f from src to dst (and the chain).
func copyFields(dst, src *Key, f Fields) {
	dst.Chain = src.Chain
	if f&FieldInPort != 0 {
		dst.InPort = src.InPort
	}
	if f&FieldOutPort != 0 {
		dst.OutPort = src.OutPort
	}
	if f&FieldSrcMAC != 0 {
		dst.SrcMAC = src.SrcMAC
	}
	if f&FieldDstMAC != 0 {
		dst.DstMAC = src.DstMAC
	}
	if f&FieldVLAN != 0 {
		dst.VLAN, dst.Tagged = src.VLAN, src.Tagged
	}
	if f&FieldCtState != 0 {
		dst.CtState = src.CtState
	}
	if f&FieldTCPFlags != 0 {
		dst.TCPFlags = src.TCPFlags
	}
	if f&^(L2Fields|FieldTCPFlags) != 0 {
		dst.EtherType, dst.SrcIP, dst.DstIP, dst.Proto = src.EtherType, src.SrcIP, src.DstIP, src.Proto
		dst.SrcPort, dst.DstPort, dst.ICMPType, dst.ICMPCode = src.SrcPort, src.DstPort, src.ICMPType, src.ICMPCode
	}
}

// TestUniformVerdict checks UniformVerdict against the linear oracle:
// when it says every key that agrees with k on the fixed fields gets v,
// random keys that agree on them do.
func TestUniformVerdict(t *testing.T) {
	allButFlags := ^Fields(0) &^ FieldTCPFlags
	uniform := map[Fields]int{}
	for seed := range uint64(200) {
		r := newRand(seed)
		cfg := genConfig{p: []float64{0.02, 0.1, 0.4}[seed%3], maxChain: 1 + int(seed%3)}
		rs := randRuleset(r, []int{0, 1, 5, 30}[seed%4], cfg)
		opts := Options{Ports: testPorts}
		lin, err := NewLinear(rs, opts)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := Compile(rs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			var rule *Rule
			if len(rs.Rules) > 0 && r.IntN(2) == 0 {
				rule = &rs.Rules[r.IntN(len(rs.Rules))]
			}
			k := randKey(r, rule)
			for _, fixed := range []Fields{L2Fields, allButFlags} {
				v, ok := tab.UniformVerdict(&k, fixed)
				if !ok {
					continue
				}
				uniform[fixed]++
				for j := range 30 {
					k2 := randKey(r, nil)
					copyFields(&k2, &k, fixed)
					if want := lin.Lookup(&k2); want != v {
						t.Fatalf("seed %d key %d/%d fixed %#x: UniformVerdict(%s) = %+v, but %s gets %+v", seed, i, j, fixed, k.String(), v, k2.String(), want)
					}
				}
			}
		}
	}
	// Not vacuous: both kinds of question got uniform answers.
	if uniform[L2Fields] < 1000 || uniform[allButFlags] < 1000 {
		t.Errorf("uniform verdicts: %d for L2 fields, %d for all but the flags; want over 1000 each", uniform[L2Fields], uniform[allButFlags])
	}
}

func TestUniformVerdictCases(t *testing.T) {
	rs, err := Parse(`
iif lan0 oif lan1 ether saddr 02:00:00:00:00:01 drop
ether daddr 02:00:00:00:00:09 counter accept
ip saddr 10.0.0.0/8 drop
tcp flags & (syn|ack) == syn drop
`)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	pair := func(in, out uint16, src, dst MAC) *Key {
		return &Key{InPort: in, OutPort: out, SrcMAC: src, DstMAC: dst, CtState: CtUntracked}
	}
	for _, tc := range []struct {
		name string
		k    *Key
		ok   bool
		rule int32
	}{
		{"the pair rule decides", pair(1, 2, MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 2}), true, 0},
		{"the MAC rule decides", pair(2, 1, MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 9}), true, 1},
		{"an address rule may match first", pair(2, 1, MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 2}), false, 0},
	} {
		v, ok := tab.UniformVerdict(tc.k, L2Fields)
		if ok != tc.ok || ok && v.Rule != tc.rule {
			t.Errorf("%s: UniformVerdict = %+v, %v; want rule %d, %v", tc.name, v, ok, tc.rule, tc.ok)
		}
	}
	if !tab.Uses(Forward, FieldTCPFlags) || tab.Uses(Input, FieldTCPFlags) || tab.Uses(Forward, FieldICMP) {
		t.Errorf("Uses: forward flags %v, input flags %v, forward icmp %v; want true, false, false",
			tab.Uses(Forward, FieldTCPFlags), tab.Uses(Input, FieldTCPFlags), tab.Uses(Forward, FieldICMP))
	}
}

// TestCount checks that Count adds to the rule's and the policy's
// counters like that many lookups.
func TestCount(t *testing.T) {
	rs, err := Parse("ether daddr 02:00:00:00:00:09 counter accept\n")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(SetOptions{Workers: 2})
	s.Swap(tab)
	w := s.Worker(1)
	k := Key{DstMAC: MAC{2, 0, 0, 0, 0, 9}}
	v := w.Lookup(&k, 100, 5)
	w.Count(Forward, v, 9, 900, 7)
	w.Count(Forward, Verdict{Rule: -1, Action: Accept}, 3, 30, 8)
	_, cs := s.Counters()
	if len(cs) != 1 || cs[0].Packets != 10 || cs[0].Bytes != 1000 || cs[0].LastHit != 7 {
		t.Errorf("rule counters %+v, want 10 packets, 1000 bytes, last hit 7", cs)
	}
	if p, b := s.PolicyCounter(Forward); p != 3 || b != 30 {
		t.Errorf("policy counter %d packets %d bytes, want 3, 30", p, b)
	}
}
