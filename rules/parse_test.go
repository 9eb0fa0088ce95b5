package rules

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var cmpRules = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(Rule{}, "Line"),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *Ruleset
	}{
		{
			name: "empty and comments",
			src:  "\n# nothing here\n   \t\n",
			want: &Ruleset{},
		},
		{
			name: "ssh example",
			src:  `iif lan0 ip saddr 10.0.0.0/8 tcp dport 22 ct state new accept comment "ssh"`,
			want: &Ruleset{Rules: []Rule{{
				Match: Match{InPort: "lan0", SrcIP: netip.MustParsePrefix("10.0.0.0/8"), Proto: ProtoTCP,
					DstPort: &PortRange{22, 22}, CtState: CtNew},
				Action: Accept, Comment: "ssh",
			}}},
		},
		{
			name: "icmpv6 example",
			src:  `ip6 daddr 2001:db8::/32 meta l4proto icmpv6 icmpv6 type echo-request drop`,
			want: &Ruleset{Rules: []Rule{{
				Match:  Match{DstIP: netip.MustParsePrefix("2001:db8::/32"), Proto: ProtoICMPv6, ICMPType: ptr(uint8(128))},
				Action: Drop,
			}}},
		},
		{
			name: "range and counter",
			src:  `udp dport 1000-2000 counter drop`,
			want: &Ruleset{Rules: []Rule{{Match: Match{Proto: ProtoUDP, DstPort: &PortRange{1000, 2000}}, Action: Drop, Counter: true}}},
		},
		{
			name: "policy and chains",
			src:  "policy forward drop\npolicy input accept\nchain input\ntcp sport 53 log reject\nchain forward\naccept",
			want: &Ruleset{
				Policy: map[Chain]Action{Forward: Drop, Input: Accept},
				Rules: []Rule{
					{Chain: Input, Match: Match{Proto: ProtoTCP, SrcPort: &PortRange{53, 53}}, Action: Reject, Log: true},
					{Chain: Forward, Action: Accept},
				},
			},
		},
		{
			name: "l2 fields",
			src:  `iifname "lan1" oif wan0 ether saddr 02:00:5E:10:00:01 ether daddr ff:ff:ff:ff:ff:ff vlan id 4095 ether type arp drop`,
			want: &Ruleset{Rules: []Rule{{
				Match: Match{InPort: "lan1", OutPort: "wan0", SrcMAC: &MAC{2, 0, 0x5e, 0x10, 0, 1},
					DstMAC: &MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, VLAN: ptr(uint16(4095)), EtherType: EtherTypeARP},
				Action: Drop,
			}}},
		},
		{
			name: "tcp flags forms",
			src:  "tcp flags & (syn|ack) == syn accept\ntcp flags & syn == 0 drop\ntcp flags & (fin | rst) == (fin|rst) reject",
			want: &Ruleset{Rules: []Rule{
				{Match: Match{Proto: ProtoTCP, TCPFlags: TCPFlags{FlagSYN | FlagACK, FlagSYN}}, Action: Accept},
				{Match: Match{Proto: ProtoTCP, TCPFlags: TCPFlags{FlagSYN, 0}}, Action: Drop},
				{Match: Match{Proto: ProtoTCP, TCPFlags: TCPFlags{FlagFIN | FlagRST, FlagFIN | FlagRST}}, Action: Reject},
			}},
		},
		{
			name: "ct state forms",
			src:  "ct state established,related accept\nct state { invalid , untracked } drop",
			want: &Ruleset{Rules: []Rule{
				{Match: Match{CtState: CtEstablished | CtRelated}, Action: Accept},
				{Match: Match{CtState: CtInvalid | CtUntracked}, Action: Drop},
			}},
		},
		{
			name: "family spellings",
			src: "ip protocol udp accept\nip6 nexthdr 47 accept\nmeta nfproto ipv6 meta l4proto ipv6-icmp drop\n" +
				"ether type ip ip saddr 192.168.0.1 drop\nmeta protocol 0x88cc drop",
			want: &Ruleset{Rules: []Rule{
				{Match: Match{EtherType: EtherTypeIPv4, Proto: ProtoUDP}, Action: Accept},
				{Match: Match{EtherType: EtherTypeIPv6, Proto: 47}, Action: Accept},
				{Match: Match{EtherType: EtherTypeIPv6, Proto: ProtoICMPv6}, Action: Drop},
				// The ether type an address implies is dropped.
				{Match: Match{SrcIP: netip.MustParsePrefix("192.168.0.1/32")}, Action: Drop},
				{Match: Match{EtherType: 0x88cc}, Action: Drop},
			}},
		},
		{
			name: "icmp type number and code",
			src:  "icmp type 3 icmp code 4 accept\nicmp code 0 drop",
			want: &Ruleset{Rules: []Rule{
				{Match: Match{Proto: ProtoICMP, ICMPType: ptr(uint8(3)), ICMPCode: ptr(uint8(4))}, Action: Accept},
				{Match: Match{Proto: ProtoICMP, ICMPCode: ptr(uint8(0))}, Action: Drop},
			}},
		},
		{
			name: "comment with escapes and hash",
			src:  `drop comment "say \"hi\" \\ # not a comment" # a comment`,
			want: &Ruleset{Rules: []Rule{{Action: Drop, Comment: `say "hi" \ # not a comment`}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpRules...); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseLineNumbers(t *testing.T) {
	rs, err := Parse("# header\n\naccept\n\nchain input\ndrop\n")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range rs.Rules {
		got = append(got, r.Line)
	}
	if diff := cmp.Diff([]int{3, 6}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"tcp dport 22", "1:13: rule has no verdict: end it with accept, drop or reject"},
		{"foo drop", "1:1: unknown keyword 'foo': want a match (" + matchKeywords + "), counter, log or a verdict (accept, drop, reject)"},
		{"ip saddr 10.0.0.1/8 drop", "1:10: ip saddr has host bits set (did you mean 10.0.0.0/8?)"},
		{"ip saddr 10.0.0.0/8 icmpv6 type echo-request drop", "1:21: icmpv6 cannot match IPv4 traffic (ip saddr): use icmp"},
		{"ip6 saddr ::/0 icmp type echo-request drop", "1:16: icmp cannot match IPv6 traffic (ip6 saddr): use icmpv6"},
		{"ether type arp tcp dport 1 drop", "1:16: meta l4proto tcp needs IP traffic but the rule matches ether type arp"},
		{"ether type arp ip saddr 10.0.0.0/8 drop", "1:1: ether type arp conflicts with ip saddr"},
		{"ip saddr 10.0.0.0/8 ip6 daddr ::1 drop", "1:31: ip6 daddr conflicts with ip saddr: one rule matches one address family"},
		{"ip6 saddr 10.0.0.0/8 drop", "1:11: ip6 saddr: 10.0.0.0/8 is not an IPv6 prefix (use ip)"},
		{"ip saddr fe80::1%eth0 drop", `1:10: ip saddr: bad address "fe80::1%eth0"`},
		{"ip saddr 10.0.0.0/33 drop", `1:10: ip saddr: bad prefix "10.0.0.0/33" (want an address like 10.0.0.0/8 or 2001:db8::/32)`},
		{"udp dport 1 tcp flags & syn == syn accept", "1:13: tcp conflicts with udp at col 1: a rule matches one protocol"},
		{"meta l4proto icmp tcp dport 1 accept", "1:19: tcp conflicts with icmp at col 1: a rule matches one protocol"},
		{"tcp dport 2000-1000 drop", "1:11: tcp dport: range 2000-1000 is reversed (want 1000-2000)"},
		{"tcp dport 70000 drop", `1:11: tcp dport: bad port "70000" (want a number 0-65535 or a range like 1000-2000)`},
		{"tcp dport { 22, 80 } drop", "1:11: port sets are not supported: write one rule per port or use a range like 1000-2000"},
		{"tcp dport 22 tcp dport 23 drop", "1:14: tcp dport given twice (first at col 1)"},
		{"tcp flags syn drop", "1:11: want tcp flags & (syn|ack) == syn: found 'syn' where '&' belongs"},
		{"tcp flags & (syn|ack) == fin drop", "1:26: tcp flags & (syn|ack) == fin never matches: value has flags outside the mask"},
		{"tcp flags & (syn|bogus) == syn drop", `1:18: unknown tcp flag "bogus" (want fin, syn, rst, psh, ack, urg, ecn, cwr)`},
		{"tcp flags & (syn ack) == syn drop", "1:18: want tcp flags & (syn|ack) == syn: found 'ack' where '|' or ')' belongs"},
		{"tcp flags & 0 == 0 drop", "1:18: tcp flags mask is empty"},
		{"icmp type bogus drop", `1:11: unknown icmp type "bogus" (want a name like echo-request or a number 0-255)`},
		{"icmp code 256 drop", `1:11: bad icmp code "256" (want 0-255)`},
		{"vlan id 4096 drop", `1:9: bad vlan id "4096" (want 0-4095)`},
		{"vlan tag 1 drop", "1:6: unknown vlan field 'tag' (want id)"},
		{"ether saddr 1:2:3 drop", `1:13: bad MAC address "1:2:3" (want six hex bytes like 02:00:5e:10:00:01)`},
		{"ether type 0x0100 drop", "1:1: ether type 0x0100 is a length, not a type (want 0x0600 or more)"},
		{"ether type bogus drop", `1:12: unknown ether type "bogus" (want ip, ip6, arp or a number like 0x88cc)`},
		{"ct state new,bogus drop", `1:14: unknown ct state "bogus" (want invalid, established, related, new, untracked)`},
		{"ct state { new drop", "1:16: want '}' to close the ct state set, found 'drop'"},
		{"ct status new drop", "1:4: unknown ct field 'status' (want state)"},
		{"iif lan0 iif lan1 drop", "1:10: iif given twice (first at col 1)"},
		{"iif drop", ""}, // "drop" is a valid port name: the verdict is then missing
		{"iif averyveryverylongname drop", `1:5: iif: port name "averyveryverylongname" longer than 15 bytes`},
		{"oif", "1:4: missing port name after oif"},
		{"counter counter drop", "1:9: counter given twice"},
		{"drop accept", "1:6: unexpected 'accept' after the verdict (only comment \"...\" may follow)"},
		{`drop comment "x" extra`, "1:18: unexpected 'extra' after the comment"},
		{`drop comment x`, "1:14: want a quoted comment, found 'x'"},
		{`comment "x" drop`, `1:1: comment goes after the verdict: ... accept comment "text"`},
		{`"x" drop`, `1:1: unexpected string "x" (a comment goes after the verdict: drop comment "...")`},
		{`drop comment "x`, `1:14: unterminated string: add a closing '"'`},
		{`drop comment "\n"`, `1:15: unknown escape in string: only \" and \\ are allowed`},
		{"tcp dport != 22 drop", "1:11: negation ('!=') is not supported"},
		{"tcp flags & syn = syn drop", "1:17: want '==' here"},
		{"accept\naccept", "2:1: duplicate of line 1"},
		{"tcp dport 22 accept\ntcp dport 22 drop", "2:1: never matches: line 1 has the same match with verdict accept"},
		{"accept\nchain input\naccept", ""}, // different chains: no duplicate
		{"policy forward reject", `1:16: unknown policy "reject" (want accept or drop)`},
		{"policy sideways drop", `1:8: unknown chain "sideways" (want input, forward or output)`},
		{"policy forward drop\npolicy forward accept", "2:8: policy for chain forward given twice (first on line 1)"},
		{"policy forward drop now", "1:21: unexpected 'now' after the policy"},
		{"chain prerouting", `1:7: unknown chain "prerouting" (want input, forward or output)`},
		{"chain", "1:6: missing a chain (input, forward or output) at end of line"},
		// Columns count characters, not bytes.
		{`drop comment "héllo" x`, "1:22: unexpected 'x' after the comment"},
		// Several errors: one per line.
		{"bogus\naccept\ntcp dport x drop", "1:1: unknown keyword 'bogus': want a match (" + matchKeywords + "), counter, log or a verdict (accept, drop, reject)\n" +
			`3:11: tcp dport: bad port "x" (want a number 0-65535 or a range like 1000-2000)`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := Parse(tt.src)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.src == "iif drop" {
				// Documented quirk: port names are words.
				if !strings.Contains(got, "rule has no verdict") {
					t.Errorf("Parse(%q) = %q, want a missing-verdict error", tt.src, got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Parse(%q) error:\n got %q\nwant %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestParseErrorFields(t *testing.T) {
	_, err := Parse("accept\ntcp dport 5-1 drop")
	var list ErrorList
	if !asErrorList(err, &list) || len(list) != 1 {
		t.Fatalf("Parse error = %v, want an ErrorList of one", err)
	}
	want := &Error{Line: 2, Col: 11, Rule: 1, Msg: "tcp dport: range 5-1 is reversed (want 1-5)"}
	if diff := cmp.Diff(want, list[0]); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func asErrorList(err error, list *ErrorList) bool {
	l, ok := err.(ErrorList)
	*list = l
	return ok
}

// canonical pairs an input with its canonical form.
var canonical = []struct{ in, want string }{
	{"accept", "accept\n"},
	{"ct state new,invalid tcp dport 22 iif lan0 accept", "iif lan0 tcp dport 22 ct state invalid,new accept\n"},
	{"ether type ip6 ip6 saddr 2001:db8::1/128 drop", "ip6 saddr 2001:db8::1 drop\n"},
	{"meta l4proto tcp tcp dport 22-22 drop", "tcp dport 22 drop\n"},
	{"ip protocol icmp icmp type 8 accept", "ether type ip icmp type echo-request accept\n"},
	{"icmpv6 type 200 accept", "icmpv6 type 200 accept\n"},
	{"log counter drop comment \"\"", "counter log drop\n"},
	{"tcp flags & syn == syn accept", "tcp flags & (syn) == syn accept\n"},
	{"policy output drop\nchain output\naccept\npolicy input drop", "policy input drop\npolicy output drop\nchain output\naccept\n"},
	{"chain forward\naccept\nchain input\nchain forward\ntcp dport 1 drop comment \"x\"", "accept\ntcp dport 1 drop comment \"x\"\n"},
	{"tcp flags & (syn|ack|fin) == syn|ack drop", "tcp flags & (fin|syn|ack) == (syn|ack) drop\n"},
}

func TestFormatCanonical(t *testing.T) {
	for _, tt := range canonical {
		rs, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		got := Format(rs)
		if got != tt.want {
			t.Errorf("Format(Parse(%q)):\n got %q\nwant %q", tt.in, got, tt.want)
		}
		checkRoundTrip(t, tt.in)
	}
}

// checkRoundTrip checks that an accepted input formats to a fixed point,
// and that text → JSON → text keeps the rule set.
func checkRoundTrip(t *testing.T, src string) {
	t.Helper()
	rs, err := Parse(src)
	if err != nil {
		return
	}
	text := Format(rs)
	rs2, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(Format(Parse(%q))) = %v\nformatted:\n%s", src, err, text)
	}
	if diff := cmp.Diff(rs, rs2, cmpRules...); diff != "" {
		t.Fatalf("Parse(Format(rs)) != rs for %q (-want +got):\n%s", src, diff)
	}
	if text2 := Format(rs2); text2 != text {
		t.Fatalf("Format not stable for %q:\n%q\n%q", src, text, text2)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	var rs3 Ruleset
	if err := json.Unmarshal(b, &rs3); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", b, err)
	}
	if diff := cmp.Diff(rs, &rs3, cmpRules...); diff != "" {
		t.Fatalf("JSON round trip of %q (-want +got):\n%s", src, diff)
	}
	if err := Validate(&rs3); err != nil {
		t.Fatalf("Validate(from JSON) = %v", err)
	}
	if text3 := Format(&rs3); text3 != text {
		t.Fatalf("text → JSON → text for %q:\n%q\n%q", src, text, text3)
	}
}

func TestRoundTripRandom(t *testing.T) {
	r := newRand(99)
	for range 50 {
		rs := randRuleset(r, 30, genConfig{p: 0.4, maxChain: 3})
		checkRoundTrip(t, Format(rs))
		// Random rules may spell the ether type an address implies; the
		// canonical form must not depend on it.
		rs2, err := Parse(Format(rs))
		if err != nil {
			t.Fatalf("Parse(Format(random)): %v\n%s", err, Format(rs))
		}
		if got, want := Format(rs2), Format(rs); got != want {
			t.Fatalf("Format(Parse(Format(rs))) != Format(rs):\n%s\n%s", got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	src := `{
		"policy": {"forward": "drop"},
		"rules": [
			{"chain": "input", "iif": "lan0", "saddr": "10.0.0.0/8", "l4proto": "tcp", "dport": "22",
			 "ct_state": "new", "action": "accept", "comment": "ssh"},
			{"daddr": "2001:db8::/32", "l4proto": "icmpv6", "icmp_type": 128, "action": "drop"},
			{"l4proto": "tcp", "tcp_flags": {"mask": "syn|ack", "value": "syn"}, "action": "reject", "log": true},
			{"ether_saddr": "02:00:00:00:00:01", "vlan_id": 7, "ether_type": "ip", "sport": "1-2",
			 "l4proto": "udp", "action": "drop", "counter": true}
		]
	}`
	var rs Ruleset
	if err := json.Unmarshal([]byte(src), &rs); err != nil {
		t.Fatal(err)
	}
	want := "policy forward drop\n" +
		"chain input\n" +
		"iif lan0 ip saddr 10.0.0.0/8 tcp dport 22 ct state new accept comment \"ssh\"\n" +
		"chain forward\n" +
		"ip6 daddr 2001:db8::/32 icmpv6 type echo-request drop\n" +
		"tcp flags & (syn|ack) == syn log reject\n" +
		"ether saddr 02:00:00:00:00:01 vlan id 7 ether type ip udp sport 1-2 counter drop\n"
	if got := Format(&rs); got != want {
		t.Errorf("Format(JSON):\n got %q\nwant %q", got, want)
	}
	if err := Validate(&rs); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestValidateJSONErrors(t *testing.T) {
	tests := []struct {
		json string
		want string
	}{
		{`{"rules":[{"l4proto":"udp","action":"drop"},{"dport":"22","action":"drop"}]}`,
			"rules[1].dport: dport needs l4proto tcp or udp (have none); write tcp dport or udp dport"},
		{`{"rules":[{"l4proto":"udp","tcp_flags":{"mask":"syn","value":"syn"},"action":"drop"}]}`,
			"rules[0].tcp_flags: tcp flags need l4proto tcp (have udp)"},
		{`{"rules":[{"l4proto":"tcp","tcp_flags":{"mask":"0","value":"syn"},"action":"drop"}]}`,
			"rules[0].tcp_flags: tcp flags value syn without a mask"},
		{`{"rules":[{"saddr":"10.0.0.0/8","l4proto":"icmpv6","icmp_type":128,"action":"drop"}]}`,
			"rules[0].icmp_type: icmpv6 cannot match IPv4 traffic (ip saddr): use icmp"},
		{`{"rules":[{"icmp_code":1,"action":"drop"}]}`,
			"rules[0].icmp_code: icmp type/code needs l4proto icmp or icmpv6 (have none)"},
		{`{"rules":[{"l4proto":"tcp","sport":"9-1","action":"drop"}]}`,
			"rules[0].sport: sport range 9-1 is reversed (want 1-9)"},
		{`{"rules":[{"vlan_id":5000,"action":"drop"}]}`,
			"rules[0].vlan_id: vlan id 5000 out of range 0-4095"},
		{`{"rules":[{"iif":"a b","action":"drop"}]}`,
			`rules[0].iif: iif: port name "a b" has invalid character ' ' (want letters, digits, '_', '.', '-')`},
		{`{"rules":[{}]}`,
			"rules[0].action: missing or invalid verdict: want accept, drop or reject"},
		{`{"rules":[{"action":"drop","comment":"a\nb"}]}`,
			`rules[0].comment: comment: control character '\n' not allowed`},
		{`{"rules":[{"action":"drop"},{"action":"drop","comment":"again"}]}`,
			"rules[1]: duplicate of rule 0"},
		{`{"policy":{"input":"reject"},"rules":[]}`,
			"policy.input: policy input reject: a policy is accept or drop"},
		{`{"rules":[{"saddr":"10.0.0.0/8","daddr":"::/0","ether_type":"arp","action":"drop"}]}`,
			"rules[0].daddr: ip6 daddr conflicts with ip saddr: one rule matches one address family\n" +
				"rules[0].ether_type: ether type arp conflicts with ip saddr"},
	}
	for _, tt := range tests {
		var rs Ruleset
		if err := json.Unmarshal([]byte(tt.json), &rs); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", tt.json, err)
		}
		err := Validate(&rs)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Validate(%s):\n got %q\nwant %q", tt.json, got, tt.want)
		}
	}
}

func TestJSONDecodeErrors(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{`{"rules":[{"dport":"x"}]}`, `bad port "x"`},
		{`{"rules":[{"action":"allow"}]}`, `unknown action "allow"`},
		{`{"rules":[{"chain":"pre"}]}`, `unknown chain "pre"`},
		{`{"rules":[{"ct_state":"new,old"}]}`, `unknown ct state "old"`},
		{`{"rules":[{"l4proto":"bogus"}]}`, `unknown protocol "bogus"`},
		{`{"rules":[{"ether_saddr":"zz"}]}`, `bad MAC address "zz"`},
		{`{"rules":[{"tcp_flags":{"mask":"syn|bogus"}}]}`, `unknown tcp flag "bogus"`},
		{`{"rules":[{"ether_type":"ipx"}]}`, `unknown ether type "ipx"`},
	} {
		var rs Ruleset
		err := json.Unmarshal([]byte(tt.json), &rs)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("json.Unmarshal(%s) = %v, want an error containing %q", tt.json, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range canonical {
		f.Add(tt.in)
	}
	f.Add("iif lan0 ip saddr 10.0.0.0/8 tcp dport 22 ct state new accept comment \"ssh\"")
	f.Add("ip6 daddr 2001:db8::/32 meta l4proto icmpv6 icmpv6 type echo-request drop")
	f.Add("udp dport 1000-2000 counter drop\npolicy forward drop")
	f.Add("tcp flags & (syn|ack) == syn ct state { new, established } log reject")
	f.Add("ether saddr 02:00:00:00:00:01 vlan id 5 ether type arp drop # x")
	f.Add("chain input\nip saddr 10.0.0.1/8 drop")
	f.Fuzz(func(t *testing.T, src string) {
		checkRoundTrip(t, src)
		rs, err := Parse(src)
		if err != nil {
			return
		}
		// Accepted rules compile (given their ports) and the table agrees
		// with the linear walk.
		ports := map[string]uint16{}
		for _, r := range rs.Rules {
			for _, name := range []string{r.InPort, r.OutPort} {
				if _, ok := ports[name]; name != "" && !ok {
					ports[name] = uint16(len(ports))
				}
			}
		}
		tab, err := Compile(rs, Options{Ports: ports})
		if err != nil {
			t.Fatalf("Compile(Parse(%q)): %v", src, err)
		}
		lin, err := NewLinear(rs, Options{Ports: ports})
		if err != nil {
			t.Fatal(err)
		}
		r := newRand(uint64(len(src)))
		for i := range 2 * len(rs.Rules) {
			k := randKey(r, &rs.Rules[i%len(rs.Rules)])
			if ru := rs.Rules[i%len(rs.Rules)]; ru.InPort != "" || ru.OutPort != "" {
				k.InPort, k.OutPort = ports[ru.InPort], ports[ru.OutPort]
			}
			if got, want := tab.Lookup(&k), lin.Lookup(&k); got != want {
				t.Fatalf("rules %q: Lookup(%s) = %+v, linear %+v", src, k.String(), got, want)
			}
		}
	})
}
