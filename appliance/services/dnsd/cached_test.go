package dnsd

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestCacheTTLCountsDown(t *testing.T) {
	clk := newClock()
	up := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, clk)

	for _, step := range []struct {
		advance time.Duration
		name    string
		want    string
		asked   int // upstream queries so far
	}{
		{0, "example.test.", "an example.test. 300 IN A 192.0.2.7", 1},
		{100 * time.Second, "example.test.", "an example.test. 200 IN A 192.0.2.7", 1},
		{0, "EXAMPLE.Test.", "an example.test. 200 IN A 192.0.2.7", 1},
		{199*time.Second + 500*time.Millisecond, "example.test.", "an example.test. 1 IN A 192.0.2.7", 1},
		{time.Second, "example.test.", "an example.test. 300 IN A 192.0.2.7", 2},
	} {
		clk.add(step.advance)
		r := ask(t, "udp", addr, query(step.name, dns.TypeA))
		if diff := cmp.Diff([]string{"NOERROR", step.want}, fmtMsg(r)); diff != "" {
			t.Errorf("+%s %s (-want +got):\n%s", clk.now().Sub(t0), step.name, diff)
		}
		if r.Question[0].Name != step.name || !r.RecursionAvailable || !r.RecursionDesired {
			t.Errorf("%s: question %q, ra %t rd %t; want the asked case echoed, ra and rd", step.name, r.Question[0].Name, r.RecursionAvailable, r.RecursionDesired)
		}
		if got := up.count(); got != step.asked {
			t.Errorf("+%s: upstream asked %d times, want %d", clk.now().Sub(t0), got, step.asked)
		}
	}
	st := s.Stats()
	got := []uint64{st.QueriesUDP, st.CacheHits, st.CacheMisses, st.UpstreamQueries, uint64(st.CacheEntries)}
	if diff := cmp.Diff([]uint64{5, 3, 2, 2, 1}, got); diff != "" {
		t.Errorf("queries, hits, misses, upstream queries, entries (-want +got):\n%s", diff)
	}
	if st.Latency.P99 == 0 || st.Latency.P50 > st.Latency.P99 {
		t.Errorf("latency p50 %s p99 %s: want observed", st.Latency.P50, st.Latency.P99)
	}
}

func TestNegativeCache(t *testing.T) {
	soa := func(ttl, minimum int) string {
		return fmt.Sprintf("test. %d IN SOA ns.test. host.test. 1 3600 600 86400 %d", ttl, minimum)
	}
	type step struct {
		advance time.Duration
		want    []string
		asked   int
	}
	for _, tc := range []struct {
		name   string
		rcode  int
		ns     []string
		qtype  uint16
		steps  []step
		config Config
	}{
		{
			name: "NXDOMAIN for the SOA minimum", rcode: dns.RcodeNameError, ns: []string{soa(3600, 60)},
			steps: []step{
				{0, []string{"NXDOMAIN", "ns test. 60 IN SOA ns.test. host.test. 1 3600 600 86400 60"}, 1},
				{30 * time.Second, []string{"NXDOMAIN", "ns test. 30 IN SOA ns.test. host.test. 1 3600 600 86400 60"}, 1},
				{30 * time.Second, []string{"NXDOMAIN", "ns test. 60 IN SOA ns.test. host.test. 1 3600 600 86400 60"}, 2},
			},
		},
		{
			name: "NODATA for the SOA TTL when lower", rcode: dns.RcodeSuccess, ns: []string{soa(50, 300)},
			steps: []step{
				{0, []string{"NOERROR", "ns test. 50 IN SOA ns.test. host.test. 1 3600 600 86400 300"}, 1},
				{49 * time.Second, []string{"NOERROR", "ns test. 1 IN SOA ns.test. host.test. 1 3600 600 86400 300"}, 1},
				{time.Second, []string{"NOERROR", "ns test. 50 IN SOA ns.test. host.test. 1 3600 600 86400 300"}, 2},
			},
		},
		{
			name: "no SOA: not cached", rcode: dns.RcodeNameError,
			steps: []step{{0, []string{"NXDOMAIN"}, 1}, {0, []string{"NXDOMAIN"}, 2}},
		},
		{
			name: "bounded by NegativeMaxTTL", rcode: dns.RcodeNameError, ns: []string{soa(86400, 86400)},
			steps: []step{
				{0, []string{"NXDOMAIN", "ns test. 3600 IN SOA ns.test. host.test. 1 3600 600 86400 86400"}, 1},
				{3599 * time.Second, []string{"NXDOMAIN", "ns test. 1 IN SOA ns.test. host.test. 1 3600 600 86400 86400"}, 1},
				{time.Second, []string{"NXDOMAIN", "ns test. 3600 IN SOA ns.test. host.test. 1 3600 600 86400 86400"}, 2},
			},
		},
		{
			name: "MinTTL does not lengthen it", rcode: dns.RcodeNameError, ns: []string{soa(3600, 10)}, config: Config{MinTTL: time.Hour},
			steps: []step{
				{0, []string{"NXDOMAIN", "ns test. 10 IN SOA ns.test. host.test. 1 3600 600 86400 10"}, 1},
				{10 * time.Second, []string{"NXDOMAIN", "ns test. 10 IN SOA ns.test. host.test. 1 3600 600 86400 10"}, 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			up := startUpstream(t, func(req *dns.Msg) *dns.Msg {
				resp := new(dns.Msg).SetRcode(req, tc.rcode)
				for _, s := range tc.ns {
					resp.Ns = append(resp.Ns, mustRR(s))
				}
				return resp
			})
			cfg := tc.config
			cfg.Upstreams = []netip.AddrPort{up.addr}
			_, addr, _ := testServer(t, cfg, clk)
			for i, st := range tc.steps {
				clk.add(st.advance)
				r := ask(t, "udp", addr, query("missing.test.", dns.TypeA))
				if diff := cmp.Diff(st.want, fmtMsg(r)); diff != "" {
					t.Errorf("step %d (-want +got):\n%s", i, diff)
				}
				if got := up.count(); got != st.asked {
					t.Errorf("step %d: upstream asked %d times, want %d", i, got, st.asked)
				}
			}
		})
	}
}

func TestTTLClamp(t *testing.T) {
	clk := newClock()
	up := startUpstream(t, answers(map[string][]string{
		"mixed.test.": {"mixed.test. 5 IN CNAME far.test.", "far.test. 86400 IN A 192.0.2.8"},
		"zero.test.":  {"zero.test. 0 IN A 192.0.2.9"},
	}))
	_, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}, MinTTL: time.Minute, MaxTTL: 10 * time.Minute}, clk)
	r := ask(t, "udp", addr, query("mixed.test.", dns.TypeA))
	want := []string{"NOERROR", "an mixed.test. 60 IN CNAME far.test.", "an far.test. 600 IN A 192.0.2.8"}
	if diff := cmp.Diff(want, fmtMsg(r)); diff != "" {
		t.Errorf("clamped (-want +got):\n%s", diff)
	}
	clk.add(59 * time.Second)
	r = ask(t, "udp", addr, query("mixed.test.", dns.TypeA))
	want = []string{"NOERROR", "an mixed.test. 1 IN CNAME far.test.", "an far.test. 541 IN A 192.0.2.8"}
	if diff := cmp.Diff(want, fmtMsg(r)); diff != "" {
		t.Errorf("after 59 s (-want +got):\n%s", diff)
	}
	clk.add(time.Second)
	ask(t, "udp", addr, query("mixed.test.", dns.TypeA))
	if got := up.count(); got != 2 {
		t.Errorf("after 60 s: upstream asked %d times, want 2", got)
	}

	// Without MinTTL a TTL of 0 is served as is and never cached.
	_, addr, _ = testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, clk)
	for range 2 {
		r := ask(t, "udp", addr, query("zero.test.", dns.TypeA))
		if diff := cmp.Diff([]string{"NOERROR", "an zero.test. 0 IN A 192.0.2.9"}, fmtMsg(r)); diff != "" {
			t.Errorf("zero TTL (-want +got):\n%s", diff)
		}
	}
	if got := up.count(); got != 4 {
		t.Errorf("zero TTL: upstream asked %d times in all, want 4", got)
	}
}
