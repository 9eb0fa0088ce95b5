package dnsd

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

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
	u := &silentUpstream{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			u.n.Add(1)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
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
	releaseCh := make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseCh) })
	up := startUpstream(t, func(req *dns.Msg) *dns.Msg {
		<-releaseCh
		return answers(map[string][]string{"slow.test.": {"slow.test. 300 IN A 192.0.2.5"}})(req)
	})
	t.Cleanup(release) // before the upstream's shutdown, which waits for its handlers
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
	release()
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
