package dnsd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// clock is a settable time source for a server: cache ages, rate buckets
// and upstream demotion follow it; socket timeouts stay on the real clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count is how many lines contain s.
func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

// fakeUpstream is an upstream DNS server on loopback (UDP and TCP on one
// port) that answers with its answer func and records what it was asked.
// Over UDP it truncates to the asker's buffer size, as real servers do.
type fakeUpstream struct {
	addr   netip.AddrPort
	answer func(req *dns.Msg) *dns.Msg // nil result: no answer
	mu     sync.Mutex
	seen   []seenQuery
}

type seenQuery struct {
	tcp bool
	msg *dns.Msg
}

func startUpstream(t testing.TB, answer func(req *dns.Msg) *dns.Msg) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{answer: answer}
	pc, ln := listenPair(t, "127.0.0.1")
	u.addr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(pc.LocalAddr().(*net.UDPAddr).Port))
	h := u.handler()
	serveOn(t, &dns.Server{PacketConn: pc, Handler: h})
	serveOn(t, &dns.Server{Listener: ln, Handler: h})
	return u
}

// handler records and answers queries.
func (u *fakeUpstream) handler() dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		_, tcp := w.LocalAddr().(*net.TCPAddr)
		u.mu.Lock()
		u.seen = append(u.seen, seenQuery{tcp: tcp, msg: req.Copy()})
		u.mu.Unlock()
		resp := u.answer(req)
		if resp == nil {
			return
		}
		if !tcp {
			size := dns.MinMsgSize
			if opt := req.IsEdns0(); opt != nil {
				size = int(opt.UDPSize())
			}
			resp.Truncate(size)
		}
		w.WriteMsg(resp)
	})
}

// queries lists what the upstream was asked, as "udp name TYPE".
func (u *fakeUpstream) queries() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, q := range u.seen {
		n := "udp"
		if q.tcp {
			n = "tcp"
		}
		out = append(out, n+" "+q.msg.Question[0].Name+" "+dns.TypeToString[q.msg.Question[0].Qtype])
	}
	return out
}

func (u *fakeUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

func (u *fakeUpstream) last() *dns.Msg {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[len(u.seen)-1].msg
}

// listenPair binds UDP and TCP on one free port of addr.
func listenPair(t testing.TB, addr string) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Fatal("no free port pair")
	return nil, nil
}

// serveOn runs a dns.Server until the test ends.
func serveOn(t testing.TB, srv *dns.Server) {
	t.Helper()
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	select {
	case <-started:
		t.Cleanup(func() {
			srv.Shutdown()
			<-done
		})
	case err := <-done:
		t.Fatalf("dns.Server did not start: %v", err)
	}
}

// answers returns an answer func: name (canonical) → records; other names
// get NXDOMAIN with an SOA.
func answers(zone map[string][]string) func(req *dns.Msg) *dns.Msg {
	return func(req *dns.Msg) *dns.Msg {
		resp := new(dns.Msg).SetReply(req)
		resp.RecursionAvailable = true
		q := req.Question[0]
		rrs, ok := zone[dns.CanonicalName(q.Name)]
		if !ok {
			resp.Rcode = dns.RcodeNameError
			resp.Ns = []dns.RR{mustRR("test. 3600 IN SOA ns.test. host.test. 1 3600 600 86400 30")}
			return resp
		}
		for _, s := range rrs {
			rr := mustRR(s)
			if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
				resp.Answer = append(resp.Answer, rr)
			}
		}
		if len(resp.Answer) == 0 {
			resp.Ns = []dns.RR{mustRR("test. 3600 IN SOA ns.test. host.test. 1 3600 600 86400 30")}
		}
		return resp
	}
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return rr
}

// testServer starts a server for cfg on 127.0.0.1 (unless cfg says where),
// without a rate limit (unless cfg sets one), on clk when not nil. It
// stops when the test ends; the log is dumped if the test failed.
func testServer(t testing.TB, cfg Config, clk *clock) (*Server, netip.AddrPort, *logBuffer) {
	t.Helper()
	if cfg.Listen == nil {
		cfg.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1
	}
	logs := &logBuffer{}
	s, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		s.now = clk.now
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs)
		}
	})
	return s, s.Addrs()[0], logs
}

// query is a recursive query for name and type.
func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// exchange sends m over network ("udp" or "tcp") from an ephemeral port of
// the loopback address from ("" for any).
func exchange(network string, server netip.AddrPort, m *dns.Msg, from string, timeout time.Duration) (*dns.Msg, error) {
	c := dns.Client{Net: network, Timeout: timeout, UDPSize: 65535}
	if from != "" {
		var la net.Addr = &net.UDPAddr{IP: net.ParseIP(from)}
		if network == "tcp" {
			la = &net.TCPAddr{IP: net.ParseIP(from)}
		}
		c.Dialer = &net.Dialer{LocalAddr: la, Timeout: timeout}
	}
	r, _, err := c.Exchange(m, server.String())
	return r, err
}

// ask sends m over UDP (or TCP) and fails the test without an answer.
func ask(t testing.TB, network string, server netip.AddrPort, m *dns.Msg) *dns.Msg {
	t.Helper()
	r, err := exchange(network, server, m, "", 3*time.Second)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	return r
}

// fmtMsg renders a response as lines: rcode and flags, then records with
// single spaces, prefixed by section ("an", "ns", "ar"); OPT is left out.
func fmtMsg(m *dns.Msg) []string {
	head := dns.RcodeToString[m.Rcode]
	if m.Rcode == dns.RcodeBadVers {
		head = "BADVERS" // the table names 16 BADSIG, its TSIG meaning
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.AuthenticatedData, "ad"}} {
		if f.on {
			head += " " + f.name
		}
	}
	out := []string{head}
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"an", m.Answer}, {"ns", m.Ns}, {"ar", m.Extra}} {
		for _, rr := range sec.rrs {
			if rr.Header().Rrtype != dns.TypeOPT {
				out = append(out, sec.name+" "+strings.Join(strings.Fields(rr.String()), " "))
			}
		}
	}
	return out
}
