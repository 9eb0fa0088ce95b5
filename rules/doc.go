// Package rules is e1kbox's packet filter: rule syntax, validation, a hashed rule table and per-rule counters.
//
// # Model
//
// A Ruleset is an ordered list of Rules plus a default policy per chain.
// A rule's priority is its position; the first matching rule decides
// (iptables/nftables semantics). Chains:
//
//   - forward: transit frames. In bridge mode the dataplane looks up every
//     frame it forwards between data ports; in NAT mode every new
//     connection (conntrack remembers the answer).
//   - input: frames the dataplane delivers to the box itself (its host port).
//   - output: frames the box itself sends (arriving from its host port).
//
// Chains without a policy accept. A policy is accept or drop.
//
// # Lookup
//
// The dataplane fills a Key (fixed size, no pointers) from the parsed
// frame and asks for a Verdict: the action and the index of the deciding
// rule (-1 for the policy). Three implementations answer alike:
//
//   - Table (Compile): tuple space search. Rules are expanded into entries
//     (one per connection state of their set and per prefix of a port
//     range that splits into few prefixes) and grouped by mask (which
//     fields, which prefix lengths) into open-addressing hash subtables.
//     Subtables are probed in the order of their best rule, and a lookup
//     stops when the best match so far beats the next subtable's best rule,
//     so the cost depends on the number of masks, not of rules. A lookup
//     only visits the subtables that can match its class (chain, connection
//     state, family, L4 protocol), and each subtable has a prefilter, two
//     cache lines of which the first rejects most keys, that checks the
//     mask bits on which all its entries agree (constant bits: the /8 of an
//     address list, the interface of a per-interface list) and 64-bit
//     filters of the other bits before any hashing. Only those varying
//     bits are stored: gathered into a compact key (usually one word), they
//     are hashed into groups of eight slots whose one-byte tags share a
//     word, so that most misses cost one load from a small array, and a
//     narrow slot holds key and verdict in one word. A subtable of a single
//     key is decided by its prefilter alone. Port ranges with many
//     prefixes are not expanded but checked after the hash hit, and masks
//     with few entries and odd prefix lengths share the subtable of shorter
//     prefixes, their exact bits checked after the hit, so that random
//     prefix lengths do not make one subtable each. Tables are immutable.
//   - Cache: an exact-match flow cache in front of a Table, one per worker,
//     invalidated by the table's generation number.
//   - Linear: the reference walk, the oracle of the differential tests.
//
// Set holds the current Table behind an atomic pointer; Swap replaces it
// without stopping lookups. A Worker (one per dataplane worker) combines
// the current table, its flow cache, its shard of the per-rule counters
// (packets, bytes, last hit; kept across swaps for rules with the same
// chain, match and verdict) and its ring of log records. Rejects and log
// records are rate-limited by Limiters; an over-limit reject becomes a
// drop. Nothing on the lookup path allocates.
//
// # Text syntax
//
// One rule per line, close to nftables; '#' starts a comment outside
// quotes. A rule is a list of matches (all must hold), optional statements
// "counter" and "log", a verdict and an optional comment:
//
//	policy forward drop                    # policy CHAIN accept|drop
//	chain input                            # following rules go to input (default: forward)
//	iif lan0 ip saddr 10.0.0.0/8 tcp dport 22 ct state new accept comment "ssh"
//	ip6 daddr 2001:db8::/32 meta l4proto icmpv6 icmpv6 type echo-request drop
//	udp dport 1000-2000 counter drop
//	tcp flags & (syn|ack) == syn log reject
//
// Matches:
//
//	iif NAME, oif NAME                     port names (also iifname/oifname, quoted or not)
//	ether saddr MAC, ether daddr MAC
//	ether type ip|ip6|arp|0xNNNN           also meta protocol, meta nfproto ipv4|ipv6
//	vlan id 0-4095
//	ip saddr|daddr PREFIX                  IPv4 address or prefix; implies ether type ip
//	ip6 saddr|daddr PREFIX                 IPv6; implies ether type ip6
//	ip protocol P, ip6 nexthdr P           the family and L4 protocol
//	meta l4proto P                         tcp, udp, icmp, icmpv6, gre, ... or 1-255
//	tcp|udp sport|dport PORT|LO-HI         implies the protocol
//	tcp flags & (F|F...) == F|(F|F...)|0   flags fin syn rst psh ack urg ecn cwr
//	icmp|icmpv6 type NAME|N, code N        implies icmp or icmpv6
//	ct state S[,S...]                      invalid established related new untracked; { } allowed
//
// There is no negation and there are no sets except for ct state. Format
// prints the canonical form: fields in a fixed order, implied words left
// out (ether type next to an address, meta l4proto next to a port), host
// prefixes without /32 or /128, policies first. Format(Parse(x)) is a fixed
// point of Parse+Format.
//
// Errors name the place ("3:17: tcp dport: range 2000-1000 is reversed
// (want 1000-2000)"); rules from JSON are named by index and field
// ("rules[3].dport: ..."). Validation rejects matches that can never hold
// (an IPv4 prefix with an ICMPv6 type, tcp flags with udp, ports without
// tcp/udp, mixed address families), prefixes with host bits set, reversed
// ranges and rules whose match repeats an earlier rule of the same chain;
// Compile rejects unknown port names.
//
// # JSON
//
// The same rule sets as JSON, for the runtime configuration; both forms
// convert into each other through Ruleset:
//
//	{"policy": {"forward": "drop"},
//	 "rules": [{"chain": "input", "iif": "lan0", "saddr": "10.0.0.0/8", "l4proto": "tcp",
//	            "dport": "22", "ct_state": "new", "action": "accept", "comment": "ssh"}]}
package rules
