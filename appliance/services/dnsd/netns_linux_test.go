package dnsd

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// newNetns creates a namespace with lo up, deleted when the test ends.
func newNetns(t *testing.T, role string) *netnstest.Namespace {
	t.Helper()
	ns := netnstest.New(t, "dnsd-"+role)
	ns.IP(t, "link", "set", "lo", "up")
	return ns
}

// veth links two namespaces with one address on each end.
func veth(t *testing.T, ns1 *netnstest.Namespace, if1, addr1 string, ns2 *netnstest.Namespace, if2, addr2 string) {
	t.Helper()
	netnstest.Veth(t, netnstest.End{NS: ns1, Name: if1, Addrs: []string{addr1}, Up: true},
		netnstest.End{NS: ns2, Name: if2, Addrs: []string{addr2}, Up: true})
}

// digResult is what dig printed: the status, the header flags and the
// answer records (fields joined by single spaces).
type digResult struct {
	Status  string
	Flags   []string
	Answers []string
}

func dig(t *testing.T, ns *netnstest.Namespace, args ...string) digResult {
	t.Helper()
	full := append([]string{"dig", "@192.168.77.1", "+time=3", "+tries=1", "+noall", "+comments", "+answer"}, args...)
	out := ns.Run(t, full...)
	var r digResult
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, ";; ->>HEADER<<-"):
			if i := strings.Index(line, "status: "); i >= 0 {
				r.Status = strings.TrimSuffix(strings.Fields(line[i+len("status: "):])[0], ",")
			}
		case strings.HasPrefix(line, ";; flags: "):
			flags := strings.TrimPrefix(line, ";; flags: ")
			r.Flags = strings.Fields(flags[:strings.Index(flags, ";")])
		case line == "" || strings.HasPrefix(line, ";"):
		default:
			r.Answers = append(r.Answers, strings.Join(strings.Fields(line), " "))
		}
	}
	if r.Status == "" {
		t.Fatalf("%s: no status in\n%s", strings.Join(full, " "), out)
	}
	return r
}

// TestNetnsDnsmasqDig runs the server in a "box" namespace between an
// "isp" namespace, where Debian's dnsmasq is the upstream, and a "lan"
// namespace, where dig asks. The box does not forward packets: every
// answer dig gets comes from the server.
func TestNetnsDnsmasqDig(t *testing.T) {
	testenv.Require(t, "root", "ip", "dig", "dnsmasq")
	isp, box, lan := newNetns(t, "isp"), newNetns(t, "box"), newNetns(t, "lan")
	veth(t, box, "wan0", "198.51.100.2/24", isp, "up0", "198.51.100.1/24")
	veth(t, box, "lan0", "192.168.77.1/24", lan, "eth0", "192.168.77.10/24")

	big := make([]string, 6)
	for i := range big {
		big[i] = `"` + strings.Repeat(string(rune('a'+i)), 250) + `"`
	}
	upLog := &logBuffer{}
	cmd := isp.Command("dnsmasq", "--no-daemon", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=198.51.100.1", "--pid-file=",
		"--log-queries", "--log-facility=-", "--local-ttl=300",
		"--address=/example.test/192.0.2.7", "--host-record=www.example.test,192.0.2.8",
		"--address=/nx.test/", "--txt-record=big.example.test,"+strings.Join(big, ","))
	cmd.Stdout, cmd.Stderr = upLog, upLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq log:\n%s", upLog)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for isp.Command("dig", "@198.51.100.1", "+time=1", "+tries=1", "ready.example.test").Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq does not answer:\n%s", upLog)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// upstream counts the queries dnsmasq logged from the box's WAN address.
	upstream := func(what string) int { return upLog.count("query[" + what + " from 198.51.100.2") }

	logs := &logBuffer{}
	var s *Server
	box.Do(t, func() {
		var err error
		s, err = New(Config{
			Listen:    []netip.AddrPort{netip.MustParseAddrPort("192.168.77.1:53")},
			Upstreams: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:53")},
			Hostname:  "router",
			Local:     LocalFunc(func() []Host { return []Host{{Name: "laptop", Addr: netip.MustParseAddr("192.168.77.10")}} }),
		}, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Errorf("New: %v", err)
		}
	})
	if s == nil {
		t.FailNow()
	}
	if s.ns == nil {
		// Its upstream sockets would be opened outside the test's namespaces.
		t.Fatal("New inside the box namespace did not see that namespace")
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }() // any thread: the sockets are the box's
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs)
		}
	})

	ttlOf := func(r digResult) int {
		if len(r.Answers) != 1 {
			t.Fatalf("answers %q, want one", r.Answers)
		}
		ttl, err := strconv.Atoi(strings.Fields(r.Answers[0])[1])
		if err != nil {
			t.Fatal(err)
		}
		return ttl
	}

	// Forwarded over UDP, then from the cache over TCP with its TTL run down.
	r := dig(t, lan, "example.test", "A")
	if diff := cmp.Diff(digResult{Status: "NOERROR", Flags: []string{"qr", "rd", "ra"}, Answers: []string{"example.test. 300 IN A 192.0.2.7"}}, r); diff != "" {
		t.Errorf("example.test over UDP (-want +got):\n%s", diff)
	}
	time.Sleep(2100 * time.Millisecond)
	r = dig(t, lan, "+tcp", "example.test", "A")
	if ttl := ttlOf(r); ttl < 290 || ttl > 298 {
		t.Errorf("cached TTL %d after 2.1 s, want 290..298 (%q)", ttl, r.Answers)
	}
	st := s.Stats()
	if got := []uint64{st.QueriesUDP, st.QueriesTCP, st.CacheHits, st.CacheMisses, st.UpstreamQueries}; !slices.Equal(got, []uint64{1, 1, 1, 1, 1}) {
		t.Errorf("udp, tcp, hits, misses, upstream = %v; want one each", got)
	}
	if n := upstream("A] example.test"); n != 1 {
		t.Errorf("dnsmasq was asked for example.test %d times, want once", n)
	}

	// Local names and their PTRs, never sent upstream.
	for _, tc := range []struct {
		args []string
		want digResult
	}{
		{[]string{"laptop.lan", "A"}, digResult{Status: "NOERROR", Flags: []string{"qr", "aa", "rd", "ra"}, Answers: []string{"laptop.lan. 60 IN A 192.168.77.10"}}},
		{[]string{"laptop", "A"}, digResult{Status: "NOERROR", Flags: []string{"qr", "aa", "rd", "ra"}, Answers: []string{"laptop. 60 IN A 192.168.77.10"}}},
		{[]string{"router.lan", "A"}, digResult{Status: "NOERROR", Flags: []string{"qr", "aa", "rd", "ra"}, Answers: []string{"router.lan. 60 IN A 192.168.77.1"}}},
		{[]string{"-x", "192.168.77.10"}, digResult{Status: "NOERROR", Flags: []string{"qr", "aa", "rd", "ra"}, Answers: []string{"10.77.168.192.in-addr.arpa. 60 IN PTR laptop.lan."}}},
		{[]string{"-x", "192.168.77.1"}, digResult{Status: "NOERROR", Flags: []string{"qr", "aa", "rd", "ra"}, Answers: []string{"1.77.168.192.in-addr.arpa. 60 IN PTR router.lan."}}},
		{[]string{"unknown.lan", "A"}, digResult{Status: "NXDOMAIN", Flags: []string{"qr", "aa", "rd", "ra"}}},
		{[]string{"-x", "192.168.77.99"}, digResult{Status: "NXDOMAIN", Flags: []string{"qr", "aa", "rd", "ra"}}},
		{[]string{"-x", "10.1.2.3"}, digResult{Status: "NXDOMAIN", Flags: []string{"qr", "aa", "rd", "ra"}}},
	} {
		if diff := cmp.Diff(tc.want, dig(t, lan, tc.args...)); diff != "" {
			t.Errorf("dig %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
	}
	for _, leak := range []string{"lan", "laptop", "in-addr.arpa"} {
		if strings.Contains(upLog.String(), leak) {
			t.Errorf("dnsmasq saw a query with %q", leak)
		}
	}
	if st := s.Stats(); st.Local != 8 || st.UpstreamQueries != 1 {
		t.Errorf("local %d, upstream %d; want 8 local answers and still 1 upstream query", st.Local, st.UpstreamQueries)
	}

	// Forwarded names dnsmasq answers from its records, NXDOMAIN included.
	if diff := cmp.Diff(digResult{Status: "NOERROR", Flags: []string{"qr", "rd", "ra"}, Answers: []string{"www.example.test. 300 IN A 192.0.2.8"}}, dig(t, lan, "www.example.test")); diff != "" {
		t.Errorf("www.example.test (-want +got):\n%s", diff)
	}
	if r := dig(t, lan, "nx.test"); r.Status != "NXDOMAIN" || len(r.Answers) != 0 {
		t.Errorf("nx.test: %+v, want NXDOMAIN", r)
	}

	// Larger than a UDP response may be: TC over UDP (dig +ignore shows
	// it), the full answer over TCP (dig retries by itself).
	r = dig(t, lan, "+ignore", "big.example.test", "TXT")
	if !slices.Contains(r.Flags, "tc") || len(r.Answers) != 0 {
		t.Errorf("big TXT over UDP: %+v, want tc and no answers", r)
	}
	r = dig(t, lan, "big.example.test", "TXT")
	if r.Status != "NOERROR" || len(r.Answers) != 1 || !strings.Contains(r.Answers[0], strings.Repeat("f", 250)) {
		t.Errorf("big TXT: %+v, want the six strings", r)
	}
	if st := s.Stats(); st.Truncated != 2 || st.QueriesTCP != 2 {
		t.Errorf("truncated %d, tcp queries %d; want 2 (both digs asked over UDP first) and 2", st.Truncated, st.QueriesTCP)
	}
	if n := upstream("TXT] big.example.test"); n != 2 {
		t.Errorf("dnsmasq was asked for big.example.test %d times, want 2 (UDP, then TCP after its TC)", n)
	}
	if strings.Contains(upLog.String(), "from 192.168.77.") {
		t.Error("dnsmasq heard from the LAN directly")
	}
}

// TestNetnsSockets checks that a server made inside a namespace opens its
// upstream sockets and its later listeners there, whichever thread serves
// it: a decoy upstream on the same loopback address and port outside must
// never be asked.
func TestNetnsSockets(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := newNetns(t, "sock")
	decoy := startUpstream(t, answers(map[string][]string{"x.test.": {"x.test. 300 IN A 192.0.2.66"}}))
	var inside *fakeUpstream
	var s *Server
	ns.Do(t, func() {
		pc, err := net.ListenPacket("udp", decoy.addr.String())
		if err != nil {
			t.Errorf("the namespace's loopback: %v", err)
			return
		}
		ln, err := net.Listen("tcp", decoy.addr.String())
		if err != nil {
			t.Errorf("the namespace's loopback: %v", err)
			return
		}
		inside = &fakeUpstream{addr: decoy.addr, answer: answers(map[string][]string{
			"x.test.": {"x.test. 300 IN A 192.0.2.1"}, "y.test.": {"y.test. 300 IN A 192.0.2.2"},
		})}
		h := inside.handler()
		serveOn(t, &dns.Server{PacketConn: pc, Handler: h})
		serveOn(t, &dns.Server{Listener: ln, Handler: h})
		s, err = New(Config{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, Upstreams: []netip.AddrPort{decoy.addr}, RateLimit: -1},
			slog.New(slog.DiscardHandler))
		if err != nil {
			t.Errorf("New: %v", err)
		}
	})
	if s == nil || inside == nil {
		t.FailNow()
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// Update from this (unlocked) goroutine: the new listener is the namespace's too.
	if err := s.Update(Config{Listen: []netip.AddrPort{s.Addrs()[0], netip.MustParseAddrPort("127.0.0.2:0")}, Upstreams: []netip.AddrPort{decoy.addr}, RateLimit: -1}); err != nil {
		t.Fatal(err)
	}
	addrs := s.Addrs()
	var got []string
	ns.Do(t, func() {
		for i, name := range []string{"x.test.", "y.test."} {
			for _, network := range []string{"udp", "tcp"} {
				r, err := exchange(network, addrs[i], query(name, dns.TypeA), "", 3*time.Second)
				if err != nil {
					got = append(got, err.Error())
					continue
				}
				got = append(got, strings.Join(fmtMsg(r), " "))
			}
		}
	})
	want := []string{
		"NOERROR an x.test. 300 IN A 192.0.2.1", "NOERROR an x.test. 300 IN A 192.0.2.1",
		"NOERROR an y.test. 300 IN A 192.0.2.2", "NOERROR an y.test. 300 IN A 192.0.2.2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers inside the namespace (-want +got):\n%s", diff)
	}
	if decoy.count() != 0 || inside.count() != 2 {
		t.Errorf("decoy asked %d times, the namespace's upstream %d; want 0 and 2", decoy.count(), inside.count())
	}
}
