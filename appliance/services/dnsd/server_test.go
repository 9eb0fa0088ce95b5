package dnsd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
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

// silentUpstream is a UDP socket that reads queries and never answers.
type silentUpstream struct {
	addr netip.AddrPort
	n    atomic.Int64
}

func startSilent(t *testing.T) *silentUpstream {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	u := &silentUpstream{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			u.n.Add(1)
		}
	}()
	return u
}

func TestFailoverAfterTimeout(t *testing.T) {
	clk := newClock()
	silent := startSilent(t)
	good := startUpstream(t, answers(map[string][]string{
		"a.test.": {"a.test. 300 IN A 192.0.2.1"}, "b.test.": {"b.test. 300 IN A 192.0.2.2"}, "c.test.": {"c.test. 300 IN A 192.0.2.3"},
	}))
	const timeout = 300 * time.Millisecond
	s, addr, logs := testServer(t, Config{Upstreams: []netip.AddrPort{silent.addr, good.addr}, Timeout: timeout}, clk)

	start := time.Now()
	r := ask(t, "udp", addr, query("a.test.", dns.TypeA))
	if took := time.Since(start); took < timeout || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("a.test: %s after %s; want an answer after the %s timeout", dns.RcodeToString[r.Rcode], took, timeout)
	}
	st := s.Stats()
	if st.UpstreamTimeouts != 1 || !st.Upstreams[0].Demoted || st.Upstreams[1].Demoted || st.Upstreams[0].Timeouts != 1 {
		t.Errorf("after the timeout: timeouts %d, upstreams %+v; want the silent one demoted", st.UpstreamTimeouts, st.Upstreams)
	}

	// Demoted: the next question goes to the good upstream first.
	start = time.Now()
	ask(t, "udp", addr, query("b.test.", dns.TypeA))
	if took := time.Since(start); took >= timeout {
		t.Errorf("b.test took %s: the demoted upstream was tried first", took)
	}
	if n := silent.n.Load(); n != 1 {
		t.Errorf("silent upstream got %d queries, want 1", n)
	}

	// Once the demotion is over it is first again (and fails again).
	clk.add(demoteFor + time.Second)
	ask(t, "udp", addr, query("c.test.", dns.TypeA))
	if n := silent.n.Load(); n != 2 {
		t.Errorf("after the demotion: silent upstream got %d queries, want 2", n)
	}
	if n := logs.count("upstream failing"); n != 2 {
		t.Errorf("logged %d demotions, want 2:\n%s", n, logs)
	}
}

func TestUpstreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bad       func(req *dns.Msg) *dns.Msg
		badAsked  int
		demoted   bool
		answerBad bool // the first upstream's answer is served
	}{
		{"SERVFAIL: next, not demoted", func(req *dns.Msg) *dns.Msg { return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure) }, 1, false, false},
		{"REFUSED: next, demoted", func(req *dns.Msg) *dns.Msg { return new(dns.Msg).SetRcode(req, dns.RcodeRefused) }, 1, true, false},
		{"other question: next, demoted", func(req *dns.Msg) *dns.Msg {
			resp := new(dns.Msg).SetReply(req)
			resp.Question[0].Name = "other.test."
			resp.Answer = []dns.RR{mustRR("other.test. 300 IN A 192.0.2.66")}
			return resp
		}, 1, true, false},
		{"FORMERR to EDNS: asked again without", func(req *dns.Msg) *dns.Msg {
			if req.IsEdns0() != nil {
				return new(dns.Msg).SetRcode(req, dns.RcodeFormatError)
			}
			resp := new(dns.Msg).SetReply(req)
			resp.Answer = []dns.RR{mustRR("x.test. 300 IN A 192.0.2.99")}
			return resp
		}, 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := startUpstream(t, tc.bad)
			good := startUpstream(t, answers(map[string][]string{"x.test.": {"x.test. 300 IN A 192.0.2.1"}}))
			s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{bad.addr, good.addr}}, nil)
			r := ask(t, "udp", addr, query("x.test.", dns.TypeA))
			want := []string{"NOERROR", "an x.test. 300 IN A 192.0.2.1"}
			wantGood := 1
			if tc.answerBad {
				want, wantGood = []string{"NOERROR", "an x.test. 300 IN A 192.0.2.99"}, 0
			}
			if diff := cmp.Diff(want, fmtMsg(r)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if bad.count() != tc.badAsked || good.count() != wantGood {
				t.Errorf("asked first %d, second %d times; want %d, %d", bad.count(), good.count(), tc.badAsked, wantGood)
			}
			if got := s.Stats().Upstreams[0].Demoted; got != tc.demoted {
				t.Errorf("first upstream demoted %t, want %t", got, tc.demoted)
			}
		})
	}
}

func TestAllUpstreamsFail(t *testing.T) {
	bad := startUpstream(t, func(req *dns.Msg) *dns.Msg { return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure) })
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{bad.addr}}, nil)
	for range 2 {
		if r := ask(t, "udp", addr, query("x.test.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
	}
	if st := s.Stats(); st.ServFail != 2 || bad.count() != 2 {
		t.Errorf("servfail %d, upstream asked %d; want 2 and 2 (SERVFAIL is not cached)", st.ServFail, bad.count())
	}
}

func TestNoUpstreams(t *testing.T) {
	s, addr, logs := testServer(t, Config{}, nil)
	for range 3 {
		start := time.Now()
		r := ask(t, "udp", addr, query("example.test.", dns.TypeA))
		if r.Rcode != dns.RcodeServerFailure || time.Since(start) > 500*time.Millisecond {
			t.Errorf("no upstreams: %s after %s, want SERVFAIL at once", dns.RcodeToString[r.Rcode], time.Since(start))
		}
	}
	if n := logs.count("no upstream servers"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs)
	}
	// Local names still answer.
	if r := ask(t, "udp", addr, query("localhost.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("localhost: %s", dns.RcodeToString[r.Rcode])
	}
	// Upstreams come and go: said again once they are gone again.
	up := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	cfg := Config{Listen: []netip.AddrPort{addr}, RateLimit: -1, Upstreams: []netip.AddrPort{up.addr}}
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, "udp", addr, query("example.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("with an upstream: %s", dns.RcodeToString[r.Rcode])
	}
	cfg.Upstreams = nil
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	ask(t, "udp", addr, query("other.test.", dns.TypeA))
	ask(t, "udp", addr, query("other.test.", dns.TypeA))
	if n := logs.count("no upstream servers"); n != 2 {
		t.Errorf("logged %d times, want twice:\n%s", n, logs)
	}
}

func TestCoalescing(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, func(req *dns.Msg) *dns.Msg {
		<-release
		return answers(map[string][]string{"slow.test.": {"slow.test. 300 IN A 192.0.2.5"}})(req)
	})
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	const n = 20
	var wg sync.WaitGroup
	results := make([][]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "slow.test."
			if i%2 == 1 {
				name = "SLOW.test."
			}
			r, err := exchange("udp", addr, query(name, dns.TypeA), "", 5*time.Second)
			if err != nil {
				results[i] = []string{err.Error()}
				return
			}
			results[i] = fmtMsg(r)
		}()
	}
	// Wait until every query is in: one leader upstream, the rest waiting.
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Coalesced < n-1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, r := range results {
		if diff := cmp.Diff([]string{"NOERROR", "an slow.test. 300 IN A 192.0.2.5"}, r); diff != "" {
			t.Errorf("query %d (-want +got):\n%s", i, diff)
		}
	}
	st := s.Stats()
	if up.count() != 1 || st.Coalesced != n-1 || st.CacheMisses != n {
		t.Errorf("upstream asked %d, coalesced %d, misses %d; want 1, %d, %d", up.count(), st.Coalesced, st.CacheMisses, n-1, n)
	}
}

func TestTruncation(t *testing.T) {
	many := func(name string, n int) []string {
		var rrs []string
		for i := range n {
			rrs = append(rrs, fmt.Sprintf("%s 300 IN A 10.0.%d.%d", name, i/256, i%256))
		}
		return rrs
	}
	up := startUpstream(t, func(req *dns.Msg) *dns.Msg {
		resp := answers(map[string][]string{"big.test.": many("big.test.", 100), "mid.test.": many("mid.test.", 40), "extra.test.": {"extra.test. 300 IN A 192.0.2.1"}})(req)
		if req.Question[0].Name == "extra.test." {
			for _, s := range many("glue.test.", 60) {
				resp.Extra = append(resp.Extra, mustRR(s))
			}
		}
		return resp
	})
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	for _, tc := range []struct {
		network  string
		edns     uint16 // 0: none
		name     string
		tc       bool
		an, ar   int
		maxBytes int
	}{
		{"udp", 0, "big.test.", true, 0, 0, 512},
		{"udp", 4096, "big.test.", true, 0, 0, 1232},
		{"tcp", 0, "big.test.", false, 100, 0, 65535},
		{"udp", 1232, "mid.test.", false, 40, 0, 1232},
		{"udp", 0, "mid.test.", true, 0, 0, 512},
		{"udp", 100, "mid.test.", true, 0, 0, 512},
		{"udp", 0, "extra.test.", false, 1, 0, 512},
		{"tcp", 0, "extra.test.", false, 1, 60, 65535},
	} {
		m := query(tc.name, dns.TypeA)
		if tc.edns != 0 {
			m.SetEdns0(tc.edns, false)
		}
		r := ask(t, tc.network, addr, m)
		ar := 0
		for _, rr := range r.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				ar++
			}
		}
		size := r.Len()
		if r.Truncated != tc.tc || len(r.Answer) != tc.an || ar != tc.ar || size > tc.maxBytes {
			t.Errorf("%s edns %d %s: tc %t, %d answers, %d additional, %d bytes; want tc %t, %d, %d, at most %d",
				tc.network, tc.edns, tc.name, r.Truncated, len(r.Answer), ar, size, tc.tc, tc.an, tc.ar, tc.maxBytes)
		}
		if (tc.edns != 0) != (r.IsEdns0() != nil) {
			t.Errorf("%s edns %d %s: response OPT %v", tc.network, tc.edns, tc.name, r.IsEdns0())
		}
	}
	if got := s.Stats().Truncated; got != 4 {
		t.Errorf("truncated %d, want 4", got)
	}
	// The upstream truncated big.test over UDP: asked again over TCP.
	// extra.test fit the upstream's UDP answer; over TCP it came from the cache.
	want := []string{"udp big.test. A", "tcp big.test. A", "udp mid.test. A", "udp extra.test. A"}
	if diff := cmp.Diff(want, up.queries()); diff != "" {
		t.Errorf("upstream queries (-want +got):\n%s", diff)
	}
}

func TestLocalOverTheWire(t *testing.T) {
	up := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}, Hostname: "router", Local: testHosts}, nil)
	for _, tc := range []struct {
		network, name string
		qtype         uint16
		want          []string
	}{
		{"udp", "laptop.lan.", dns.TypeA, []string{"NOERROR aa", "an laptop.lan. 60 IN A 192.168.77.10"}},
		{"tcp", "laptop.lan.", dns.TypeA, []string{"NOERROR aa", "an laptop.lan. 60 IN A 192.168.77.10"}},
		{"udp", "phone.", dns.TypeAAAA, []string{"NOERROR aa", "an phone. 60 IN AAAA fd77::11"}},
		{"udp", "router.lan.", dns.TypeA, []string{"NOERROR aa", "an router.lan. 60 IN A 127.0.0.1"}},
		{"udp", "1.0.0.127.in-addr.arpa.", dns.TypePTR, []string{"NOERROR aa", "an 1.0.0.127.in-addr.arpa. 60 IN PTR router.lan."}},
		{"udp", "10.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NOERROR aa", "an 10.77.168.192.in-addr.arpa. 60 IN PTR laptop.lan."}},
		{"udp", "unknown.lan.", dns.TypeA, []string{"NXDOMAIN aa", "ns lan. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"udp", "99.77.168.192.in-addr.arpa.", dns.TypePTR, []string{"NXDOMAIN aa", "ns 168.192.in-addr.arpa. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60"}},
		{"udp", "wpad.", dns.TypeA, []string{"NXDOMAIN aa"}},
	} {
		r := ask(t, tc.network, addr, query(tc.name, tc.qtype))
		if diff := cmp.Diff(tc.want, fmtMsg(r)); diff != "" {
			t.Errorf("%s %s %s (-want +got):\n%s", tc.network, tc.name, dns.TypeToString[tc.qtype], diff)
		}
	}
	if n := up.count(); n != 0 {
		t.Errorf("local queries leaked upstream: %q", up.queries())
	}
	ask(t, "udp", addr, query("example.test.", dns.TypeA))
	if st := s.Stats(); up.count() != 1 || st.Local != 9 || st.CacheMisses != 1 {
		t.Errorf("upstream asked %d, local %d, misses %d; want 1, 9, 1", up.count(), st.Local, st.CacheMisses)
	}
}

func TestRefusalsAndMalformed(t *testing.T) {
	up := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	s, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	withOpt := func(m *dns.Msg, version uint8) *dns.Msg {
		m.SetEdns0(1232, false)
		m.IsEdns0().SetVersion(version)
		return m
	}
	twoQ := query("example.test.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, dns.Question{Name: "example.test.", Qtype: dns.TypeAAAA, Qclass: dns.ClassINET})
	notify := query("example.test.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := query("example.test.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	resp := query("example.test.", dns.TypeA)
	resp.Response = true
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	twoOpt := withOpt(query("example.test.", dns.TypeA), 0)
	twoOpt.Extra = append(twoOpt.Extra, twoOpt.Extra[0])
	short := pack(query("example.test.", dns.TypeA))
	short = short[:len(short)-3]

	for _, tc := range []struct {
		name string
		raw  []byte
		want string // rcode, or "none"
	}{
		{"garbage", []byte{1, 2, 3}, "none"},
		{"cut short", short, "FORMERR"},
		{"two questions", pack(twoQ), "FORMERR"},
		{"two OPT", pack(twoOpt), "FORMERR"},
		{"NOTIFY", pack(notify), "NOTIMP"},
		{"UPDATE", pack(update), "NOTIMP"},
		{"a response", pack(resp), "none"},
		{"EDNS version 1", pack(withOpt(query("example.test.", dns.TypeA), 1)), "BADVERS"},
		{"CHAOS", pack(chaos), "REFUSED"},
		{"AXFR", pack(query("example.test.", dns.TypeAXFR)), "REFUSED"},
		{"OPT as type", pack(query("example.test.", dns.TypeOPT)), "FORMERR"},
		{"ANY", pack(query("example.test.", dns.TypeANY)), "NOERROR an example.test. 3600 IN HINFO \"RFC8482\" \"\""},
	} {
		c, err := net.Dial("udp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(tc.raw)
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		c.Close()
		got := "none"
		if err == nil {
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				got = "unpack: " + err.Error()
			} else {
				got = strings.Join(fmtMsg(r), " ")
				if r.Id != uint16(tc.raw[0])<<8|uint16(tc.raw[1]) {
					got += " (wrong ID)"
				}
			}
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if r := ask(t, "udp", addr, query("example.test.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("after the bad queries: %v", fmtMsg(r))
	}
	if st := s.Stats(); st.Invalid != 10 || st.Any != 1 || up.count() != 1 {
		t.Errorf("invalid %d, any %d, upstream asked %d; want 10, 1, 1", st.Invalid, st.Any, up.count())
	}
}

func TestEDNSAndFlags(t *testing.T) {
	up := startUpstream(t, func(req *dns.Msg) *dns.Msg {
		resp := answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}})(req)
		resp.AuthenticatedData = true
		return resp
	})
	_, addr, _ := testServer(t, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	type seen struct {
		Size      uint16
		DO, CD    bool
		Asked     int
		RespOPT   bool
		RespSize  uint16
		RespDO    bool
		RespAD    bool
		RespCD    bool
		RespRcode string
	}
	for _, tc := range []struct {
		name string
		msg  func() *dns.Msg
		want seen
	}{
		{"plain", func() *dns.Msg { return query("example.test.", dns.TypeA) },
			seen{Size: 1232, Asked: 1, RespRcode: "NOERROR"}},
		{"plain again: cached", func() *dns.Msg { return query("example.test.", dns.TypeA) },
			seen{Size: 1232, Asked: 1, RespRcode: "NOERROR"}},
		{"AD asked", func() *dns.Msg { m := query("example.test.", dns.TypeA); m.AuthenticatedData = true; return m },
			seen{Size: 1232, Asked: 1, RespAD: true, RespRcode: "NOERROR"}},
		{"EDNS 4096 DO: its own cache entry", func() *dns.Msg { m := query("example.test.", dns.TypeA); m.SetEdns0(4096, true); return m },
			seen{Size: 1232, DO: true, Asked: 2, RespOPT: true, RespSize: 1232, RespDO: true, RespAD: true, RespRcode: "NOERROR"}},
		{"EDNS 512", func() *dns.Msg { m := query("example.test.", dns.TypeA); m.SetEdns0(512, false); return m },
			seen{Size: 1232, DO: true, Asked: 2, RespOPT: true, RespSize: 1232, RespRcode: "NOERROR"}},
		{"CD: its own cache entry", func() *dns.Msg { m := query("example.test.", dns.TypeA); m.CheckingDisabled = true; return m },
			seen{Size: 1232, CD: true, Asked: 3, RespCD: true, RespRcode: "NOERROR"}},
	} {
		r := ask(t, "udp", addr, tc.msg())
		last := up.last()
		got := seen{Size: last.IsEdns0().UDPSize(), DO: last.IsEdns0().Do(), CD: last.CheckingDisabled, Asked: up.count(),
			RespAD: r.AuthenticatedData, RespCD: r.CheckingDisabled, RespRcode: dns.RcodeToString[r.Rcode]}
		if opt := r.IsEdns0(); opt != nil {
			got.RespOPT, got.RespSize, got.RespDO = true, opt.UDPSize(), opt.Do()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if !last.RecursionDesired || !last.AuthenticatedData {
			t.Errorf("%s: upstream query rd %t ad %t, want both", tc.name, last.RecursionDesired, last.AuthenticatedData)
		}
	}
}

func TestRateLimit(t *testing.T) {
	clk := newClock()
	_, addr, logs := testServer(t, Config{RateLimit: 5, RateBurst: 5}, clk)
	answered := func(from string, n int) int {
		ok := 0
		for range n {
			if _, err := exchange("udp", addr, query("localhost.", dns.TypeA), from, 150*time.Millisecond); err == nil {
				ok++
			}
		}
		return ok
	}
	got := []int{answered("127.0.0.1", 8), answered("127.0.0.2", 3)}
	clk.add(time.Second)
	got = append(got, answered("127.0.0.1", 6))
	if diff := cmp.Diff([]int{5, 3, 5}, got); diff != "" {
		t.Errorf("answered: flooder, other client, flooder a second later (-want +got):\n%s", diff)
	}
	if n := logs.count("client over its query rate"); n != 1 {
		t.Errorf("logged the flooder %d times, want once:\n%s", n, logs)
	}
}

func TestUpdate(t *testing.T) {
	clk := newClock()
	up1 := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	up2 := startUpstream(t, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.8"}}))
	var hosts atomic.Pointer[[]Host]
	hosts.Store(&[]Host{{Name: "laptop", Addr: netip.MustParseAddr("192.168.77.10")}})
	cfg := Config{
		Upstreams: []netip.AddrPort{up1.addr}, Hostname: "router", RateLimit: -1,
		Local: LocalFunc(func() []Host { return *hosts.Load() }),
	}
	s, addr, _ := testServer(t, cfg, clk)
	cfg.Listen = []netip.AddrPort{addr}
	get := func(at netip.AddrPort, name string, qtype uint16) string {
		r, err := exchange("udp", at, query(name, qtype), "", 500*time.Millisecond)
		if err != nil {
			return "error"
		}
		return strings.Join(fmtMsg(r), " ")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}
	check("cached", get(addr, "example.test.", dns.TypeA), "NOERROR an example.test. 300 IN A 192.0.2.7")

	// Local names are read live: no Update needed.
	hosts.Store(&[]Host{{Name: "tablet", Addr: netip.MustParseAddr("192.168.77.20")}})
	check("new lease", get(addr, "tablet.lan.", dns.TypeA), "NOERROR aa an tablet.lan. 60 IN A 192.168.77.20")
	check("gone lease", get(addr, "laptop.lan.", dns.TypeA), "NXDOMAIN aa ns lan. 60 IN SOA router.lan. nobody.invalid. 1 3600 1200 604800 60")

	// Hostname, domain and TTLs change; the cache stays.
	cfg.Hostname, cfg.Domain, cfg.LocalTTL = "gw", "home.arpa", 10*time.Second
	must(s.Update(cfg))
	check("new hostname", get(addr, "gw.home.arpa.", dns.TypeA), "NOERROR aa an gw.home.arpa. 10 IN A 127.0.0.1")
	check("still cached", get(addr, "example.test.", dns.TypeA), "NOERROR an example.test. 300 IN A 192.0.2.7")
	if up1.count() != 1 || s.Stats().CacheEntries != 1 {
		t.Errorf("after a local change: upstream asked %d, %d entries; want 1, 1", up1.count(), s.Stats().CacheEntries)
	}

	// Another set of upstreams flushes the cache; another order does not.
	cfg.Upstreams = []netip.AddrPort{up2.addr, up1.addr}
	must(s.Update(cfg))
	if n := s.Stats().CacheEntries; n != 0 {
		t.Errorf("%d entries after the upstreams changed, want 0", n)
	}
	check("flushed, asked the new first upstream", get(addr, "example.test.", dns.TypeA), "NOERROR an example.test. 300 IN A 192.0.2.8")
	cfg.Upstreams = []netip.AddrPort{up1.addr, up2.addr}
	must(s.Update(cfg))
	check("reordered: cache kept", get(addr, "example.test.", dns.TypeA), "NOERROR an example.test. 300 IN A 192.0.2.8")
	if up1.count() != 1 || up2.count() != 1 {
		t.Errorf("upstreams asked %d and %d times, want 1 and 1", up1.count(), up2.count())
	}
	if st := s.Stats(); len(st.Upstreams) != 2 || st.Upstreams[0].Addr != up1.addr {
		t.Errorf("upstream stats %+v: want up1 first", st.Upstreams)
	}

	// Listen addresses: a new one answers, a dropped one stops.
	other := netip.MustParseAddrPort("127.0.0.2:0")
	cfg.Listen = []netip.AddrPort{addr, other}
	must(s.Update(cfg))
	addrs := s.Addrs()
	if len(addrs) != 2 || addrs[0] != addr || addrs[1].Addr() != other.Addr() || addrs[1].Port() == 0 {
		t.Fatalf("Addrs = %v", addrs)
	}
	second := addrs[1]
	check("new address, first in the answer", get(second, "gw.home.arpa.", dns.TypeA), "NOERROR aa an gw.home.arpa. 10 IN A 127.0.0.2 an gw.home.arpa. 10 IN A 127.0.0.1")
	r, err := exchange("tcp", second, query("gw.home.arpa.", dns.TypeA), "", time.Second)
	if err != nil || len(r.Answer) != 2 {
		t.Errorf("new address over TCP: %v %v", r, err)
	}
	cfg.Listen = []netip.AddrPort{other}
	must(s.Update(cfg))
	check("dropped address", get(addr, "gw.home.arpa.", dns.TypeA), "error")
	check("kept address", get(second, "example.test.", dns.TypeA), "NOERROR an example.test. 300 IN A 192.0.2.8")

	// A refused config or an address that cannot be bound changes nothing.
	bad := cfg
	bad.Listen = []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:53")}
	if err := s.Update(bad); err == nil {
		t.Error("Update took a wildcard listen address")
	}
	taken, err := net.ListenPacket("udp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	bad = cfg
	bad.Listen = []netip.AddrPort{other, taken.LocalAddr().(*net.UDPAddr).AddrPort()}
	bad.Hostname = "changed"
	if err := s.Update(bad); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Update with a taken address: %v", err)
	}
	check("unchanged after the failed update", get(second, "gw.home.arpa.", dns.TypeA), "NOERROR aa an gw.home.arpa. 10 IN A 127.0.0.2")
}

func TestServeLifecycle(t *testing.T) {
	s, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addrs()[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	ask(t, "udp", addr, query("localhost.", dns.TypeA))
	if err := s.Serve(ctx); err == nil {
		t.Error("a second Serve returned nil")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := s.Update(Config{Listen: []netip.AddrPort{addr}}); err == nil {
		t.Error("Update after Serve returned nil")
	}
	// Its sockets are closed: the port can be bound again.
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		t.Errorf("UDP port still held: %v", err)
	} else {
		pc.Close()
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Errorf("TCP port still held: %v", err)
	} else {
		ln.Close()
	}
	s.Flush()
	_ = s.Stats()
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{}, nil); err == nil || !strings.Contains(err.Error(), "no addresses") {
		t.Errorf("New without listen addresses: %v", err)
	}
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ap := taken.LocalAddr().(*net.UDPAddr).AddrPort()
	if _, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), ap}}, nil); err == nil {
		t.Error("New bound a taken address")
	}
	// Freebind: an address not (yet) on any interface binds.
	s, err := New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.250:0")}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New on an address not configured: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Serve(ctx); err != nil {
		t.Errorf("Serve with a cancelled context: %v", err)
	}
}

func TestConnLimit(t *testing.T) {
	c := &connLimit{per: make(map[netip.Addr]int)}
	a, b := netip.MustParseAddr("192.168.77.10"), netip.MustParseAddr("192.168.77.11")
	n := 0
	for c.take(a) {
		n++
	}
	if n != maxTCPConnsPerClient || !c.take(b) {
		t.Errorf("one client got %d connections (want %d), another none", n, maxTCPConnsPerClient)
	}
	c.give(a)
	if !c.take(a) {
		t.Error("a released connection was not taken again")
	}
	for i := range maxTCPConns {
		c.take(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
	}
	if c.total != maxTCPConns || c.take(netip.MustParseAddr("10.9.9.9")) {
		t.Errorf("total %d: want the bound %d held", c.total, maxTCPConns)
	}
}
