package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// wanTaken is the first address of kea's IA_NA pool in TestIPv6WANAddress,
// which the ISP's own interface already holds.
const wanTaken = "2001:db8:64::100"

// TestIPv6WANAddress: the box's own WAN addresses behind an ISP whose RAs
// allow SLAAC on the WAN link and whose kea leases IA_NA addresses from
// 2001:db8:64::100-101, the first of which the ISP itself holds. The box
// forms a SLAAC address with an RFC 7217 identifier (not its MAC's), finds
// the leased ::100 duplicate by DAD and declines it (kea logs the
// Decline), never answers for it (not even once the ISP gave it up),
// keeps its delegation, and takes ::101 at the next renewal; the ISP pings
// and resolves the SLAAC and the ::101 address to the box's WAN MAC;
// /api/router and /metrics show the addresses with origin, state and
// lifetimes. ipv6.wanAddress is live: off leaves the link-local address
// only, without touching the dataplane or the delegation; auto again
// forms the same SLAAC address.
func TestIPv6WANAddress(t *testing.T) {
	testenv.Require(t, "ndisc6", "ping")
	l := newV6Lab(t, func(s *v6LabSetup) {
		s.kea.Addrs = wanTaken + "-2001:db8:64::101"
		s.radvd.Autonomous = true
		s.beforeStart = func(l *v6Lab) { l.isp.IP(t, "-6", "addr", "add", wanTaken+"/64", "dev", "eth0") }
	})
	start := time.Now()
	d := l.delegation(t, netip.Prefix{})
	link := netip.MustParsePrefix("2001:db8:64::/64")
	taken, leased := netip.MustParseAddr(wanTaken), netip.MustParseAddr("2001:db8:64::101")
	var addrs []webui.WANAddress
	eventually(t, 20*time.Second, "a SLAAC address, ::101 in use and ::100 a duplicate in /api/router", func() (bool, string) {
		var body string
		addrs, body = l.wanAddresses(t)
		return wanState(addrs, webui.WANAddrSLAAC, netip.Addr{}) == webui.WANAddrPreferred &&
			wanState(addrs, webui.WANAddrDHCPv6, leased) == webui.WANAddrPreferred &&
			wanState(addrs, webui.WANAddrDHCPv6, taken) == webui.WANAddrDuplicate, body
	})
	t.Logf("SLAAC and IA_NA addresses in use, the taken one declined, %v after the box started", time.Since(start).Round(100*time.Millisecond))
	mac, _ := net.ParseMAC(strings.Fields(l.box.IP(t, "-br", "link", "show", "p1"))[2])
	now := time.Now()
	var slaac netip.Addr
	for _, a := range addrs {
		switch {
		case a.Origin == webui.WANAddrLinkLocal:
			if a.Address != l.wanLL || a.State != webui.WANAddrPreferred || !a.Valid.IsZero() {
				t.Errorf("link-local %+v, want %v preferred without lifetimes", a, l.wanLL)
			}
		case a.Origin == webui.WANAddrSLAAC:
			slaac = a.Address
			// radvd's default lifetimes: valid 86400 s, preferred 14400 s.
			if !link.Contains(a.Address) || a.Prefix != link || a.Address == eui64(link, mac) ||
				!within(a.Valid, now.Add(86400*time.Second)) || !within(a.Preferred, now.Add(14400*time.Second)) {
				t.Errorf("SLAAC %+v, want an RFC 7217 address (not EUI-64) in %v, valid 86400 s, preferred 14400 s from now", a, link)
			}
		case a.Address == leased:
			// kea's lifetimes: preferred 3600 s, valid 7200 s.
			if !within(a.Valid, now.Add(7200*time.Second)) || !within(a.Preferred, now.Add(3600*time.Second)) {
				t.Errorf("IA_NA %+v, want kea's 3600 s / 7200 s from now", a)
			}
		case a.Address == taken:
			if a.Valid.IsZero() {
				t.Errorf("the declined %+v has no valid lifetime", a)
			}
		default:
			t.Errorf("an unexpected WAN address %+v", a)
		}
	}
	if !strings.Contains(l.kea.Log(), "DHCP6_DECLINE_LEASE") || !strings.Contains(l.kea.Log(), wanTaken) {
		t.Errorf("kea's log has no DHCP6_DECLINE_LEASE for %s:\n%s", wanTaken, grepLines(l.kea.Log(), "DHCP6_DECLINE"))
	}
	if b, err := os.ReadFile(filepath.Join(l.dir, "slaac-secret")); err != nil || len(strings.TrimSpace(string(b))) != 64 {
		t.Errorf("the kept SLAAC secret: %v %q, want 32 bytes in hex", err, b)
	} else if fi, _ := os.Stat(filepath.Join(l.dir, "slaac-secret")); fi.Mode().Perm() != 0o600 {
		t.Errorf("the SLAAC secret's mode %v, want 0600", fi.Mode().Perm())
	}

	// The ISP reaches both addresses, at the box's WAN MAC.
	for _, a := range []netip.Addr{slaac, leased} {
		if out, err := l.isp.Output("ping", "-6", "-c", "1", "-W", "2", a.String()); err != nil {
			t.Errorf("the ISP's ping to %v: %v\n%s", a, err, out)
		}
		if out, err := l.isp.Output("ndisc6", "-q", "-r", "3", "-w", "500", a.String(), "eth0"); err != nil ||
			!strings.EqualFold(strings.TrimSpace(out), mac.String()) {
			t.Errorf("the ISP's ndisc6 %v: %v %q, want %v", a, err, out, mac)
		}
	}
	// The declined address is never the box's, not even once the ISP
	// gave it up.
	l.isp.IP(t, "-6", "addr", "del", wanTaken+"/64", "dev", "eth0")
	if out, err := l.isp.Output("ndisc6", "-q", "-r", "2", "-w", "500", wanTaken, "eth0"); err == nil {
		t.Errorf("ndisc6 %s after the ISP gave it up: answered %q, want no answer", wanTaken, out)
	}
	if st := l.stats(t).IPv6; st == nil || st.DADFailures == 0 || !slices.Contains(st.WANAddrs, slaac) || !slices.Contains(st.WANAddrs, leased) ||
		slices.Contains(st.WANAddrs, taken) {
		t.Errorf("/api/dataplane's ipv6 %+v, want a DAD failure and %v and %v in use, not %v", st, slaac, leased, taken)
	}

	// The delegation stayed: the lease file, /api/router, the metrics.
	if got := l.delegation(t, netip.Prefix{}); got != d {
		t.Errorf("the delegation after the Decline: %v, want %v", got, d)
	}
	code, body := l.boxGet("/metrics")
	for series, want := range map[string]string{
		`e1kbox_ipv6_wan_addresses{origin="slaac",state="preferred"}`:      "1",
		`e1kbox_ipv6_wan_addresses{origin="dhcpv6",state="preferred"}`:     "1",
		`e1kbox_ipv6_wan_addresses{origin="dhcpv6",state="duplicate"}`:     "1",
		`e1kbox_ipv6_wan_addresses{origin="link-local",state="preferred"}`: "1",
		`e1kbox_ipv6_dad_failures_total`:                                   "1",
		`e1kbox_ipv6_dhcpv6_bound`:                                         "1",
	} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if code != 200 || m == nil || m[1] != want {
			t.Errorf("/metrics %s = %v, want %s\n%s", series, m, want, grepLines(body, "e1kbox_ipv6_"))
		}
	}

	// Live: off leaves the link-local address; the dataplane runs on and
	// the LAN keeps its /64.
	up := l.stats(t).Uptime
	off := strings.Replace(v6Config, `"time":`, `"ipv6": {"wanAddress": "off"},
  "time":`, 1)
	l.apply(t, off, true)
	eventually(t, 10*time.Second, "only the link-local WAN address after wanAddress off", func() (bool, string) {
		addrs, body := l.wanAddresses(t)
		return len(addrs) == 1 && addrs[0].Origin == webui.WANAddrLinkLocal, body
	})
	if out, err := l.isp.Output("ndisc6", "-q", "-r", "2", "-w", "500", slaac.String(), "eth0"); err == nil {
		t.Errorf("ndisc6 %v with wanAddress off: answered %q", slaac, out)
	}
	if st := l.stats(t); st.Uptime < up {
		t.Errorf("dataplane uptime %v after the change, %v before: it restarted", st.Uptime, up)
	}
	l.dashboard6Prefix(t, d)

	// auto again: the same SLAAC address (RFC 7217: the same prefix,
	// interface and secret), from the prefix the box already knows.
	l.apply(t, v6Config, true)
	eventually(t, 10*time.Second, "the same SLAAC address after wanAddress auto", func() (bool, string) {
		addrs, body := l.wanAddresses(t)
		for _, a := range addrs {
			if a.Origin == webui.WANAddrSLAAC && a.State == webui.WANAddrPreferred {
				return a.Address == slaac, body
			}
		}
		return false, body
	})
}

// wanAddresses are /api/router's ipv6.wan_addresses, and the body.
func (l *v6Lab) wanAddresses(t *testing.T) ([]webui.WANAddress, string) {
	t.Helper()
	code, body := l.boxGet("/api/router")
	var st webui.RouterStatus
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.IPv6 == nil {
		return nil, fmt.Sprintf("%d %s", code, body)
	}
	return st.IPv6.WANAddresses, body
}

// dashboard6Prefix checks that /api/router still has the delegation d
// bound and its first /64 announced on the LAN.
func (l *v6Lab) dashboard6Prefix(t *testing.T, d netip.Prefix) {
	t.Helper()
	code, body := l.boxGet("/api/router")
	var st webui.RouterStatus
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.IPv6 == nil {
		t.Fatalf("/api/router: %d %s", code, body)
	}
	v6 := st.IPv6
	if v6.DHCPv6 != webui.DHCPv6Bound || len(v6.Delegated) != 1 || v6.Delegated[0].Prefix != d || len(v6.LAN) != 1 ||
		v6.LAN[0].Prefix != netip.PrefixFrom(d.Addr(), 64) || v6.LAN[0].Deprecated {
		t.Errorf("/api/router's ipv6 after the change: %s, want %v bound and its first /64 announced", body, d)
	}
}

// wanState is the state of the WAN address of origin (and address a, if
// valid), "" if there is none.
func wanState(addrs []webui.WANAddress, origin string, a netip.Addr) string {
	for _, w := range addrs {
		if w.Origin == origin && (!a.IsValid() || w.Address == a) {
			return w.State
		}
	}
	return ""
}

// within says t is at want or up to a minute before it (lifetimes count
// down from when the box got them).
func within(t, want time.Time) bool {
	return !t.After(want.Add(time.Second)) && t.After(want.Add(-time.Minute))
}

// eui64 is the address in p a SLAAC host would form from mac by modified
// EUI-64.
func eui64(p netip.Prefix, mac net.HardwareAddr) netip.Addr {
	ll := dataplane.LinkLocal([6]byte(mac)).As16()
	a := p.Addr().As16()
	copy(a[8:], ll[8:])
	return netip.AddrFrom16(a)
}
