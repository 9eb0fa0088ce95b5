package dnsd

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkCacheHitUDP measures answers from the cache over UDP on
// loopback, with real clients (miekg/dns connections, one socket each)
// asking in lockstep: queries/s over all clients and the latency
// percentiles of single queries. The rate limit is off. target=floor is
// the same clients against a bare miekg/dns server that answers every
// query with one fixed record: what the sockets and the library cost.
func BenchmarkCacheHitUDP(b *testing.B) {
	fixed := answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}})
	up := startUpstream(b, fixed)
	_, addr, _ := testServer(b, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	ask(b, "udp", addr, query("example.test.", dns.TypeA)) // into the cache
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	serveOn(b, &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) { w.WriteMsg(fixed(req)) })})
	floor := pc.LocalAddr().(*net.UDPAddr).AddrPort()

	for _, target := range []struct {
		name string
		addr netip.AddrPort
	}{{"dnsd", addr}, {"floor", floor}} {
		for _, clients := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("target=%s/clients=%d", target.name, clients), func(b *testing.B) {
				benchUDP(b, target.addr, clients)
			})
		}
	}
}

func benchUDP(b *testing.B, addr netip.AddrPort, clients int) {
	conns := make([]*dns.Conn, clients)
	for i := range conns {
		c, err := net.Dial("udp", addr.String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = &dns.Conn{Conn: c}
	}
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, co := range conns {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := query("example.test.", dns.TypeA)
			lat[i] = make([]time.Duration, 0, n)
			for range n {
				m.Id = dns.Id()
				t := time.Now()
				co.SetDeadline(t.Add(2 * time.Second))
				if err := co.WriteMsg(m); err != nil {
					b.Error(err)
					return
				}
				r, err := co.ReadMsg()
				if err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t))
				if r.Id != m.Id || len(r.Answer) != 1 {
					b.Errorf("answer %v", r)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "queries/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkHandlerCacheHit measures the handler alone for a cache hit: no
// sockets, the response packed into memory.
func BenchmarkHandlerCacheHit(b *testing.B) {
	up := startUpstream(b, answers(map[string][]string{"example.test.": {"example.test. 300 IN A 192.0.2.7"}}))
	s, addr, _ := testServer(b, Config{Upstreams: []netip.AddrPort{up.addr}}, nil)
	ask(b, "udp", addr, query("example.test.", dns.TypeA))
	req := query("example.test.", dns.TypeA)
	req.SetEdns0(1232, false)
	w := &recordWriter{local: net.UDPAddrFromAddrPort(lan1), remote: net.UDPAddrFromAddrPort(netip.MustParseAddrPort("192.168.77.10:40000"))}
	b.ReportAllocs()
	for b.Loop() {
		w.written = w.written[:0]
		s.serveDNS(w, req)
	}
	if len(w.written) != 1 {
		b.Fatalf("%d responses", len(w.written))
	}
}
