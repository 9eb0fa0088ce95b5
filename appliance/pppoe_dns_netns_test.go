package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/internal/ispvm"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// TestPPPoEDNS: the ISP VM's pppd names two DNS servers in IPCP (ms-dns:
// dnsmasq in the VM, answering from its hosts file only); the box's
// forwarder takes them as its upstreams, which /api/router shows, and a
// LAN host's dig at the box gets the VM's answers for its names (A, and
// AAAA for the upstream's name) over UDP and TCP.
func TestPPPoEDNS(t *testing.T) {
	testenv.Require(t, "dig")
	dns := []netip.Addr{netip.MustParseAddr("198.51.100.53"), netip.MustParseAddr("198.51.100.54")}
	www := netip.MustParseAddr("203.0.113.80")
	l := newPPPoELab(t, ispvm.Config{DNS: dns, Hosts: map[string][]netip.Addr{"www.isp.test": {www}}},
		strings.Replace(pppoeLabConfig(0), `"time":`, `"dns": {"domain": "lan"}, "time":`, 1))

	var st webui.RouterStatus
	eventually(t, 15*time.Second, "/api/router shows IPCP's DNS servers as the WAN's and the forwarder's upstreams", func() (bool, string) {
		code, body := l.boxGet("/api/router")
		st = webui.RouterStatus{}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			return false, fmt.Sprintf("HTTP %d %s", code, body)
		}
		return st.WAN.State == webui.WANBound && len(st.DNS.Upstreams) == len(dns), body
	})
	var ups []netip.Addr
	for _, u := range st.DNS.Upstreams {
		if u.Port() != 53 {
			t.Errorf("upstream %v: want port 53", u)
		}
		ups = append(ups, u.Addr())
	}
	if diff := cmp.Diff(dns, ups, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("/api/router dns.upstreams (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dns, st.WAN.DNS, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("/api/router wan.dns (-want +got):\n%s", diff)
	}
	if !st.DNS.Enabled || st.DNS.UpstreamsFrom != "wan" {
		t.Errorf("/api/router dns: enabled %v, upstreams from %q; want enabled, from the wan", st.DNS.Enabled, st.DNS.UpstreamsFrom)
	}

	for _, tc := range []struct {
		name, qtype string
		args        []string
		want        netip.Addr
	}{
		{"www.isp.test", "A", nil, www},
		{"www.isp.test", "A", []string{"+tcp"}, www},
		{ispvm.UpstreamName, "A", nil, l.vm.Config.Upstream4},
		{ispvm.UpstreamName, "AAAA", nil, l.vm.Config.Upstream6},
	} {
		args := append([]string{"dig", "+short", "+time=2", "+tries=2", "@" + svcRouter, tc.name, tc.qtype}, tc.args...)
		out, err := l.host(1, args...)
		got, perr := netip.ParseAddr(strings.TrimSpace(out))
		if err != nil || perr != nil || got != tc.want {
			t.Errorf("%s: %v %q, want %v", strings.Join(args, " "), err, out, tc.want)
		}
	}
	code, body := l.boxGet("/api/router")
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.DNS.Queries < 4 || st.DNS.UpstreamFailures != 0 {
		t.Errorf("/api/router dns after the queries: HTTP %d, %d queries, %d upstream failures (%v); want >= 4, 0",
			code, st.DNS.Queries, st.DNS.UpstreamFailures, err)
	}
	// A name the VM does not hold is not made up by the box.
	if out, err := l.host(1, "dig", "+short", "+time=2", "+tries=1", "@"+svcRouter, "nowhere.isp.test", "A"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("dig nowhere.isp.test: %v %q, want no address", err, out)
	}
}
