package main

import (
	"fmt"
	"strings"
)

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
