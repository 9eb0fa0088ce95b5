package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/router"
	"e1kbox/internal/netnstest"
	"e1kbox/webui"
)

// TestIPv6 is the routed IPv6 suite: the default config gets a /56 from
// kea, h1 autoconfigures in its first /64 and reaches the ISP's server
// with its own address, unsolicited inbound is dropped but the allow
// rule's service answers, packet too big comes through the 1400-byte WAN,
// TCP through it finds its path MTU both ways with a server on a 1500-byte
// link behind the ISP (pmtud), UDP crosses both ways (udp6), the ISP's
// renumbering moves h1, and the
// delegation survives a restart with the ISP's DHCPv6 server gone.
func TestIPv6(t *testing.T) {
	l := newV6Lab(t)
	srv := l.server(t)
	d := l.delegation(t, netip.Prefix{})
	if d.Bits() != 56 || !netip.MustParsePrefix("2001:db8:6600::/48").Contains(d.Addr()) {
		t.Fatalf("delegation %v, want a /56 of kea's pool", d)
	}
	h1 := l.slaac(t, d)
	l.reach(t, h1)
	l.dashboard6(t, d, h1)
	before, _ := os.ReadFile(filepath.Join(l.dir, "dhcp6-duid"))
	box := l.boxDNS6(t, d)

	// Inbound: only the allowed service.
	if out, err := l.isp.Output("curl", "-s", "--max-time", "2", "http://["+h1.String()+"]:9001/"); err == nil {
		t.Errorf("the ISP reached h1's unexposed port 9001: %q", out)
	}
	if out, err := l.isp.Output("curl", "-s", "--max-time", "5", "http://["+h1.String()+"]:9000/"); err != nil ||
		!strings.HasPrefix(out, "from [2001:db8:64::1]:") {
		t.Errorf("the ISP to h1's allowed port 9000: %v %q", err, out)
	}

	if st := l.stats(t).IPv6; st == nil || st.Drops["firewall"] == 0 || len(st.LAN) != 1 || st.LAN[0] != netip.PrefixFrom(d.Addr(), 64) || st.Gateway == "" {
		t.Errorf("the snapshot's ipv6 section %+v, want the LAN /64 of %v, a gateway and the firewall's drops", st, d)
	}

	// Packet too big from the box.
	l.hosts[0].Output("ping", "-6", "-c", "1", "-W", "2", "-s", "1452", "-M", "do", "2001:db8:64::1")
	if out := l.mustHost(t, 1, "ip", "-6", "route", "get", "2001:db8:64::1"); !strings.Contains(out, "mtu 1400") {
		t.Errorf("h1's route after a 1500-byte ping: %q, want mtu 1400", out)
	}
	l.pmtud(t, srv, h1)
	l.udp6(t, h1)

	// Renumbering: kea takes the prefix back at the next renewal (T1 3 s).
	l.kea.Reconfigure(ispKea("2001:db8:6700::/48"))
	d2 := l.delegation(t, d)
	h1b := l.slaac(t, d2)
	l.reach(t, h1b)
	if out := l.mustHost(t, 1, "ip", "-6", "addr", "show", "dev", "eth0"); !strings.Contains(out, h1.String()+"/64 scope global deprecated") {
		t.Errorf("h1's old address is not deprecated:\n%s", out)
	}
	// The box's DNS follows: the new /64's address is announced and
	// answers; the old one stays, deprecated, while its /64 is routed.
	box2 := l.boxDNS6(t, d2)
	if out := l.box.IP(t, "-6", "-o", "addr", "show", "dev", "e1khost0", "scope", "global"); !regexp.MustCompile(
		`inet6 `+regexp.QuoteMeta(box2.String())+`/64 scope global nodad *\\ *valid_lft forever preferred_lft forever\n`).MatchString(out) ||
		!regexp.MustCompile(`inet6 `+regexp.QuoteMeta(box.String())+`/64 scope global nodad deprecated`).MatchString(out) ||
		strings.Count(out, "inet6 ") != 2 {
		t.Errorf("the host port's addresses after renumbering, want only %v and %v deprecated:\n%s", box2, box, out)
	}
	if got := l.dig(t, 1, box, "www.isp.test"); got != ispName6 {
		t.Errorf("dig @%v (the old /64's box address) = %q, want %s", box, got, ispName6)
	}

	// Restart with the ISP's DHCPv6 server gone: the kept delegation is
	// announced and routed again.
	l.kea.Stop()
	l.stop()
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	l.reach(t, h1b)
	if after, _ := os.ReadFile(filepath.Join(l.dir, "dhcp6-duid")); string(after) != string(before) || len(before) == 0 {
		t.Errorf("DUID %q after restart, want the kept %q", after, before)
	}
}

// dashboard6 checks the dashboard's IPv6 parts after h1 (at h1) reached
// the ISP's server: /api/router has the delegation d, its first /64 on
// the LAN, the DHCPv6 state and the gateway; /api/conntrack lists h1's
// connections to the server (routed, untranslated); /api/neighbours has
// h1; /metrics the prefix's lifetime and the forwarded packets.
func (l *v6Lab) dashboard6(t *testing.T, d netip.Prefix, h1 netip.Addr) {
	t.Helper()
	lan := netip.PrefixFrom(d.Addr(), 64)
	var st webui.RouterStatus
	eventually(t, 10*time.Second, "/api/router's ipv6 with the delegation and the LAN /64", func() (bool, string) {
		code, body := l.boxGet("/api/router")
		st = webui.RouterStatus{}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.IPv6 == nil {
			return false, body
		}
		v6 := st.IPv6
		return v6.DHCPv6 == webui.DHCPv6Bound && len(v6.Delegated) == 1 && v6.Delegated[0].Prefix == d &&
			len(v6.LAN) >= 1 && v6.LAN[0].Prefix == lan && !v6.LAN[0].Deprecated && v6.Gateway.IsValid(), body
	})
	v6 := st.IPv6
	now := time.Now()
	if p := v6.Delegated[0]; !p.Valid.After(now) || p.Valid.After(now.Add(7200*time.Second)) || p.Preferred.After(p.Valid) {
		t.Errorf("delegated %v: preferred %v, valid %v; want kea's 3600 s / 7200 s from now", p.Prefix, p.Preferred, p.Valid)
	}
	if !slices.ContainsFunc(v6.WANAddresses, func(a webui.WANAddress) bool { return a.Address == l.wanLL }) || v6.ClientState == "" || !slices.Contains(v6.DNS, netip.MustParseAddr("2001:db8:64::53")) {
		t.Errorf("ipv6 %+v: want the WAN link-local %v, the client's state and kea's DNS server", v6, l.wanLL)
	}

	// h1's connections: the TCP one of curl (closing by now) and the
	// echo, both outbound, listed with their own addresses.
	q := "addr=" + h1.String() + "&kind=routed"
	code, body := l.boxGet("/api/conntrack?" + q)
	var page webui.ConnPage
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("/api/conntrack?%s: %d %s", q, code, body)
	}
	server := netip.MustParseAddr("2001:db8:64::1")
	var got []string
	for _, c := range page.Entries {
		if c.Src.Addr() != h1 || c.Dst.Addr() != server || c.Kind != webui.ConnKindRouted || c.NATSrc.IsValid() || c.Packets == 0 || !c.Expires.After(now) {
			t.Errorf("connection %+v: want h1 to the server, routed, untranslated, with packets and an expiry", c)
		}
		if c.Proto == "tcp" {
			got = append(got, "tcp "+c.Dst.String())
		} else {
			got = append(got, c.Proto)
		}
	}
	slices.Sort(got)
	got = slices.Compact(got) // reach may have pinged more than once
	if want := []string{"icmpv6", "tcp [2001:db8:64::1]:8080"}; !slices.Equal(got, want) || page.Total != len(page.Entries) {
		t.Errorf("/api/conntrack?%s: %v (total %d), want %v\n%s", q, got, page.Total, want, body)
	}
	// The address filter keeps IPv4 filters working: none of h1's by IPv4.
	if p := l.conntrack(t, "kind=masquerade&addr="+h1.String()); p.Total != 0 {
		t.Errorf("masquerade connections of h1's IPv6 address: %+v", p)
	}

	if n, ok := l.neighbour(t, h1.String()); !ok || n.Side != "lan" || n.Port != "lan" || n.MAC != "02:78:00:00:00:01" || !n.Resolved || n.State == "" {
		t.Errorf("h1 in /api/neighbours: %+v (found %v), want it on the lan port with its MAC", n, ok)
	}

	code, body = l.boxGet("/metrics")
	valid := regexp.MustCompile(`(?m)^e1kbox_ipv6_delegated_prefix_valid_seconds\{prefix="` + regexp.QuoteMeta(d.String()) + `"\} ([0-9.e+]+)$`).FindStringSubmatch(body)
	fwd := regexp.MustCompile(`(?m)^e1kbox_ipv6_forwarded_packets_total ([0-9.e+]+)$`).FindStringSubmatch(body)
	if code != 200 || valid == nil || fwd == nil {
		t.Fatalf("/metrics: %d, no valid seconds of %v or forwarded packets:\n%s", code, d, grepLines(body, "e1kbox_ipv6_"))
	}
	if v, _ := strconv.ParseFloat(valid[1], 64); v <= 0 || v > 7200 {
		t.Errorf("valid seconds of %v: %v, want (0, 7200]", d, v)
	}
	if v, _ := strconv.ParseFloat(fwd[1], 64); v < 4 {
		t.Errorf("IPv6 forwarded packets %v, want at least h1's ping and curl", v)
	}
}

// grepLines are the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestIPv6StaticPrefix runs the box with a static prefix and gateway
// (ipv6.prefix, ipv6.gateway) behind an ISP with neither a DHCPv6 server
// nor router advertisements: h1 autoconfigures from the box's RAs in the
// prefix's first /64 and reaches the ISP's server with its own address
// through the configured link-local next hop; no DHCPv6 client runs.
func TestIPv6StaticPrefix(t *testing.T) {
	requireNetns(t)
	static := netip.MustParsePrefix("2001:db8:7700::/48")
	v, cfg := newStaticV6Lab(t, "ip6s", static)
	l, isp, gw := v.lab, v.isp, staticGateway
	h1 := v.slaac(t, static)
	v.reach(t, h1)
	st := l.stats(t).IPv6
	want := &dataplane.IPv6Stats{LAN: []netip.Prefix{netip.PrefixFrom(static.Addr(), 64)}, Delegated: []netip.Prefix{static}, Gateway: gw.String()}
	if st == nil {
		t.Fatal("the snapshot has no ipv6 section")
	}
	got := &dataplane.IPv6Stats{LAN: st.LAN, Delegated: st.Delegated, Gateway: st.Gateway}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("the snapshot's ipv6 prefixes and gateway (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(l.dir, "dhcp6-lease.json")); !os.IsNotExist(err) {
		t.Errorf("a DHCPv6 lease file with a static prefix: %v", err)
	}

	// Live: another prefix and a global next hop. The IPv6 router keeps
	// its connections (no restart), h1 moves to the new /64 and its old
	// address is deprecated.
	static2 := netip.MustParsePrefix("2001:db8:7800::/48")
	gw2 := netip.MustParseAddr("2001:db8:64::1")
	isp.IP(t, "-6", "route", "replace", static2.String(), "via", v.wanLL.String(), "dev", "eth0")
	l.apply(t, strings.Replace(cfg, `"`+static.String()+`", "gateway": "`+gw.String()+`"`, `"`+static2.String()+`", "gateway": "`+gw2.String()+`"`, 1), true)
	eventually(t, 5*time.Second, "the new prefix and gateway in the snapshot", func() (bool, string) {
		st := l.stats(t).IPv6
		return st != nil && st.Gateway == gw2.String() && len(st.Delegated) == 1 && st.Delegated[0] == static2, fmt.Sprintf("%+v", st)
	})
	if st := l.stats(t).IPv6; st.Conns == 0 {
		t.Errorf("no IPv6 connections after the live change: the router restarted (%+v)", st)
	}
	h1b := v.slaac(t, static2)
	v.reach(t, h1b)
	if out := l.mustHost(t, 1, "ip", "-6", "addr", "show", "dev", "eth0"); !strings.Contains(out, h1.String()+"/64 scope global deprecated") {
		t.Errorf("h1's address in the old prefix is not deprecated:\n%s", out)
	}
}

// boxDNS6 checks the box's IPv6 DNS in the LAN /64 of the delegation d
// and returns the box's address there: h1's rdisc6 sees it as RDNSS, the
// local domain as DNSSL and the O flag; dig AAAA through it resolves the
// ISP's name over UDP and TCP; dhclient -6 -S is told the same server and
// domain; from the WAN it does not answer.
func (l *v6Lab) boxDNS6(t *testing.T, d netip.Prefix) netip.Addr {
	t.Helper()
	box := router.BoxLANAddr(netip.PrefixFrom(d.Addr(), 64)).Addr()
	var out string
	eventually(t, 15*time.Second, "h1's rdisc6 shows the box's DNS "+box.String(), func() (bool, string) {
		out, _ = l.host(1, "rdisc6", "-1", "-w", "2000", "eth0")
		return regexp.MustCompile(`Recursive DNS server\s*:\s*` + regexp.QuoteMeta(box.String()) + `\n`).MatchString(out), out
	})
	for _, want := range []string{`DNS search list\s*:\s*lan\.?\s*\n`, `Stateful other conf\.\s*:\s*Yes`, `Stateful address conf\.\s*:\s*No`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("rdisc6 output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "2001:db8:64::53") {
		t.Errorf("rdisc6 still shows the ISP's DNS server while the box's runs:\n%s", out)
	}
	eventually(t, 10*time.Second, "dig AAAA @"+box.String(), func() (bool, string) {
		got := l.dig(t, 1, box, "www.isp.test")
		return got == ispName6, got
	})
	if got := l.dig(t, 1, box, "www.isp.test", "+tcp"); got != ispName6 {
		t.Errorf("dig +tcp AAAA @%v = %q, want %s", box, got, ispName6)
	}
	if got := l.dhcp6Inform(t); got != "dns="+box.String()+"|search=lan." {
		t.Errorf("dhclient -6 -S was told %q, want the box %v and the domain lan", got, box)
	}
	if got := l.dig(t, 0, box, "www.isp.test"); got != "" {
		t.Errorf("from the WAN, dig @%v answered %q, want no answer", box, got)
	}
	return box
}

// dhcp6Inform runs dhclient -6 -S (an Information-request) in h1 until
// its script is called and returns the DNS servers and search list it was
// given.
func (l *v6Lab) dhcp6Inform(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	script := "#!/bin/sh\necho \"dns=$new_dhcp6_name_servers|search=$new_dhcp6_domain_search\" >>" + events + "\n"
	conf := filepath.Join(dir, "dhclient.conf")
	if err := os.WriteFile(filepath.Join(dir, "script"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("request dhcp6.name-servers, dhcp6.domain-search;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := l.hosts[0].Command("dhclient", "-6", "-S", "-d", "-v", "-cf", conf, "-sf", filepath.Join(dir, "script"),
		"-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), "eth0")
	out := &netnstest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var got string
	eventually(t, 20*time.Second, "dhclient -6 -S answered", func() (bool, string) {
		b, _ := os.ReadFile(events)
		got, _, _ = strings.Cut(string(b), "\n")
		return got != "", out.String()
	})
	return got
}

// TestIPv6FastPath: with the fast path on (the default), h1's pings to
// the ISP's server go through the kernel's fast path once their echo
// connection is established: /api/dataplane's fastPath counts them, and
// holds both directions as IPv6 flows.
func TestIPv6FastPath(t *testing.T) {
	l := newV6Lab(t)
	h1 := l.slaac(t, l.delegation(t, netip.Prefix{}))
	l.reach(t, h1)
	before := l.stats(t).FastPath
	if before == nil || before.Mode == "off" {
		t.Fatalf("the fast path is off: %+v", before)
	}
	const n = 300
	if out, err := l.host(1, "ping", "-6", "-c", fmt.Sprint(n), "-i", "0.005", "-s", "1000", "-I", h1.String(), "2001:db8:64::1"); err != nil ||
		!strings.Contains(out, fmt.Sprintf("%d received", n)) {
		t.Fatalf("h1's %d pings to the ISP's server: %v\n%s", n, err, out)
	}
	after := l.stats(t).FastPath
	if got := after.Packets - before.Packets; got < n {
		t.Errorf("the fast path forwarded %d frames during %d pings and their replies, want most of %d", got, n, 2*n)
	}
	if after.IPv6Flows < 2 {
		t.Errorf("%d IPv6 flows in the fast path after the pings, want the echo's two directions: %+v", after.IPv6Flows, after)
	}
	t.Logf("fast path: %d frames during the pings, %d IPv6 flows, punts %v", after.Packets-before.Packets, after.IPv6Flows, after.Punts)
}
