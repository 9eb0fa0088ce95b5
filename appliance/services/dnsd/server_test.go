package dnsd

import (
	"context"
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
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { stop() })
	ask(t, "udp", addr, query("localhost.", dns.TypeA))
	if err := s.Serve(ctx); err == nil {
		t.Error("a second Serve returned nil")
	}
	if err := stop(); err != nil {
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
