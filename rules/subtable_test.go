package rules

import (
	"math/bits"
	"net/netip"
	"strings"
	"testing"
)

func TestNarrowMeta(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  Rule
		index int
		rbits uint8
	}{
		{"first rule", Rule{Action: Accept}, 0, 1},
		{"counter", Rule{Action: Drop, Counter: true}, 6, 3},
		{"log reject", Rule{Action: Reject, Log: true}, 99998, 17},
		{"all flags", Rule{Action: Reject, Counter: true, Log: true}, 1<<20 - 2, 20},
		{"widest index", Rule{Action: Drop, Log: true}, 1<<31 - 2, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metaOf(&tc.rule, tc.index)
			n := narrowOf(m, tc.rbits)
			if n>>(tc.rbits+metaHighBits) != 0 {
				t.Errorf("narrowOf(%#x, %d) = %#x, wider than %d bits", m, tc.rbits, n, tc.rbits+metaHighBits)
			}
			if got := narrowMeta(n, tc.rbits); got != m {
				t.Errorf("narrowMeta(narrowOf(%#x)) = %#x", m, got)
			}
		})
	}
}

// describeLine returns the Describe line of subtable i.
func describeLine(tab *Table, i int) string {
	return strings.Split(tab.Describe(), "\n")[2+i]
}

// checkAgainstLinear compares tab with the linear walk of rs on keys.
func checkAgainstLinear(t *testing.T, rs *Ruleset, tab *Table, keys []Key) {
	t.Helper()
	lin, err := NewLinear(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if got, want := tab.Lookup(&keys[i]), lin.Lookup(&keys[i]); got != want {
			t.Fatalf("Lookup(%s) = %+v, linear %+v", keys[i].String(), got, want)
		}
	}
}

// TestSubtableLayout checks how entries are stored: the constant bits of
// a mask are left out of the slots and checked by the prefilter, the rest
// is gathered into a compact key, narrow slots hold key and verdict in one
// word, and full groups send probes on to the next group.
func TestSubtableLayout(t *testing.T) {
	r := newRand(11)
	v4 := func(a, b, c, d int) netip.Addr { return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)}) }
	v6 := func() netip.Addr {
		var a [16]byte
		for i := range a {
			a[i] = byte(r.IntN(256))
		}
		return netip.AddrFrom16(a)
	}
	for _, tc := range []struct {
		name string
		// rule returns the text of rule i; key a key that matches it.
		rule func(i int) string
		key  func(i int) Key
		// miss changes a matching key into one that matches no rule.
		miss func(k *Key)
		want string // the Describe line of the only subtable
	}{{
		// 10.1.X.Y with X < 6: the key is the low 3 bits of X and Y;
		// the rest is constant.
		name: "host list",
		rule: func(i int) string { return sprintf("ip saddr %s drop", v4(10, 1, i>>8, i&0xff)) },
		key: func(i int) Key {
			var k Key
			k.SetAddrs(v4(10, 1, i>>8, i&0xff), v4(192, 0, 2, 1))
			return k
		},
		miss: func(k *Key) { k.SrcIP[1] = 2 }, // same compact key, other constant bits
		want: "0: first rule 0, 1500 entries, 2008 slots of 1, key 11 bits, exact: chain ethertype saddr/32",
	}, {
		// Random IPv6 pairs: 256 varying bits, four key words.
		name: "wide keys",
		rule: func(i int) string {
			return sprintf("ip6 saddr %s ip6 daddr %s accept", v6(), v6())
		},
		miss: func(k *Key) { k.DstIP[15] ^= 1 },
		want: "0: first rule 0, 1500 entries, 2008 slots of 5, key 256 bits, exact: chain ethertype saddr/128 daddr/128",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			for i := range 1500 {
				b.WriteString(tc.rule(i) + "\n")
			}
			rs, err := Parse(b.String())
			if err != nil {
				t.Fatal(err)
			}
			tab, err := Compile(rs, Options{Ports: testPorts})
			if err != nil {
				t.Fatal(err)
			}
			if got := describeLine(tab, 0); got != tc.want {
				t.Errorf("Describe line:\n got %q\nwant %q", got, tc.want)
			}
			st := &tab.subs[0]
			full := 0
			for _, w := range st.groups {
				if matchEmpty(w) == 0 {
					full++
				}
			}
			if full == 0 {
				t.Fatalf("no full group: probes never go on to the next group")
			}
			var keys []Key
			for i := range rs.Rules {
				var k Key
				if tc.key != nil {
					k = tc.key(i)
				} else {
					k.SetAddrs(rs.Rules[i].SrcIP.Addr(), rs.Rules[i].DstIP.Addr())
				}
				if v := tab.Lookup(&k); v.Rule != int32(i) {
					t.Fatalf("Lookup(%s) = %+v, want rule %d", k.String(), v, i)
				}
				tc.miss(&k)
				keys = append(keys, k)
				if v := tab.Lookup(&k); v.Rule != -1 {
					t.Fatalf("Lookup(%s) = %+v, want the policy", k.String(), v)
				}
			}
			checkAgainstLinear(t, rs, tab, keys)
		})
	}
}

// TestConstantWords checks a rule whose constant bits span more words
// than the prefilter holds: a key that differs from it in any one field
// must miss, whichever word the field is in.
func TestConstantWords(t *testing.T) {
	rs, err := Parse("iif lan0 oif wan0 ether saddr 02:00:00:00:00:01 ether daddr 02:00:00:00:00:02 vlan id 7 " +
		"ip saddr 10.0.0.1 ip daddr 10.0.0.2 tcp sport 1000 tcp dport 22 drop")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	if st := &tab.subs[0]; st.nextra == 0 || tab.pre[0].meta != 0 {
		t.Fatalf("nextra = %d, prefilter meta %#x: want constant words beyond the prefilter's, and a probe", st.nextra, tab.pre[0].meta)
	}
	match := Key{InPort: 1, OutPort: 3, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Tagged: true, VLAN: 7, Proto: ProtoTCP, SrcPort: 1000, DstPort: 22}
	match.SetAddrs(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	if v := tab.Lookup(&match); v.Rule != 0 {
		t.Fatalf("Lookup(%s) = %+v, want rule 0", match.String(), v)
	}
	keys := []Key{match}
	for _, tc := range []struct {
		name   string
		change func(*Key)
	}{
		{"iif", func(k *Key) { k.InPort = 2 }},
		{"oif", func(k *Key) { k.OutPort = 1 }},
		{"ether saddr", func(k *Key) { k.SrcMAC[5] = 3 }},
		{"ether daddr", func(k *Key) { k.DstMAC[0] = 0 }},
		{"vlan", func(k *Key) { k.VLAN = 8 }},
		{"ip saddr", func(k *Key) { k.SrcIP[3] = 2 }},
		{"ip daddr", func(k *Key) { k.DstIP[0] = 11 }},
		{"sport", func(k *Key) { k.SrcPort = 1001 }},
		{"dport", func(k *Key) { k.DstPort = 23 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := match
			tc.change(&k)
			keys = append(keys, k)
			if v := tab.Lookup(&k); v.Rule != -1 {
				t.Errorf("Lookup(%s) = %+v, want the policy", k.String(), v)
			}
		})
	}
	checkAgainstLinear(t, rs, tab, keys)
}

// TestSingleKeySubtable checks that a subtable of one key is decided by
// its prefilter: lookups never touch its slots.
func TestSingleKeySubtable(t *testing.T) {
	rs, err := Parse("iif lan0 oif wan0 accept\nip saddr 10.0.0.0/8 tcp dport 22 drop")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	for i := range tab.subs {
		if tab.pre[i].meta == 0 {
			t.Fatalf("subtable %d has no verdict in its prefilter:\n%s", i, tab.Describe())
		}
		// A lookup that probed the subtable would panic.
		tab.subs[i].groups, tab.subs[i].slots = nil, nil
	}
	k := Key{InPort: 1, OutPort: 3, Proto: ProtoTCP, DstPort: 22}
	k.SetAddrs(netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("192.0.2.1"))
	keys := []Key{k}
	if v := tab.Lookup(&k); v.Rule != 0 || v.Action != Accept {
		t.Errorf("Lookup(%s) = %+v, want rule 0", k.String(), v)
	}
	k.OutPort = 2
	keys = append(keys, k)
	if v := tab.Lookup(&k); v.Rule != 1 || v.Action != Drop {
		t.Errorf("Lookup(%s) = %+v, want rule 1", k.String(), v)
	}
	k.DstPort = 23
	keys = append(keys, k)
	if v := tab.Lookup(&k); v.Rule != -1 {
		t.Errorf("Lookup(%s) = %+v, want the policy", k.String(), v)
	}
	checkAgainstLinear(t, rs, tab, keys)
}

// TestRealisticLayout checks that the bulk of the realistic rule set is in
// narrow subtables, the premise of its memory use per rule.
func TestRealisticLayout(t *testing.T) {
	rs := realisticRuleset(newRand(5), 20000)
	tab, err := Compile(rs, Options{Ports: testPorts})
	if err != nil {
		t.Fatal(err)
	}
	narrow := 0
	for i := range tab.subs {
		st := &tab.subs[i]
		if st.narrow {
			narrow += st.entries
			if int(st.kbits)+bits.Len(uint(len(rs.Rules)))+metaHighBits > 64 {
				t.Errorf("subtable %d: %d key bits do not fit a narrow slot", i, st.kbits)
			}
		}
	}
	if narrow < len(rs.Rules)*3/4 {
		t.Errorf("%d of %d rules in narrow subtables, want at least 3/4:\n%s", narrow, len(rs.Rules), tab.Describe())
	}
}
