package dnsd

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// recordWriter is a dns.ResponseWriter that keeps what the handler writes.
type recordWriter struct {
	local, remote net.Addr
	written       [][]byte
	closed        bool
}

func (w *recordWriter) LocalAddr() net.Addr  { return w.local }
func (w *recordWriter) RemoteAddr() net.Addr { return w.remote }
func (w *recordWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *recordWriter) Write(b []byte) (int, error) {
	w.written = append(w.written, append([]byte(nil), b...))
	return len(b), nil
}
func (w *recordWriter) Close() error        { w.closed = true; return nil }
func (w *recordWriter) TsigStatus() error   { return nil }
func (w *recordWriter) TsigTimersOnly(bool) {}
func (w *recordWriter) Hijack()             {}

// fuzzSeeds are queries for every path: local names and zones, forwarded
// names (cached, negative, large, truncated upstream), refusals, EDNS and
// flag variants.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, b)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"example.test.", dns.TypeA}, {"big.test.", dns.TypeA}, {"missing.test.", dns.TypeAAAA}, {"nodata.test.", dns.TypeMX},
		{"laptop.lan.", dns.TypeA}, {"unknown.lan.", dns.TypeA}, {"lan.", dns.TypeSOA}, {"router.", dns.TypeA},
		{"10.77.168.192.in-addr.arpa.", dns.TypePTR}, {"77.168.192.in-addr.arpa.", dns.TypePTR}, {"d.f.ip6.arpa.", dns.TypeSOA},
		{"localhost.", dns.TypeAAAA}, {"x.onion.", dns.TypeA}, {"com.", dns.TypeNS}, {"example.test.", dns.TypeANY},
		{"example.test.", dns.TypeAXFR}, {"example.test.", dns.TypeOPT},
	} {
		add(query(q.name, q.qtype))
		m := query(q.name, q.qtype)
		m.SetEdns0(4096, true)
		m.CheckingDisabled = true
		add(m)
	}
	m := query("example.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	add(m)
	m = query("example.test.", dns.TypeA)
	m.Question = append(m.Question, m.Question[0])
	add(m)
	m = query("example.test.", dns.TypeA)
	m.Opcode = dns.OpcodeNotify
	add(m)
	m = query("example.test.", dns.TypeA)
	m.Response = true
	add(m)
	m = query("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	add(m)
	return seeds
}

// FuzzServeDNS feeds raw bytes as a query to the handler (what the dns
// library hands it once the bytes unpack) over UDP or TCP. The handler
// must not panic, and what it writes must be one well-formed response to
// the query: the query's ID and question, within the UDP size, and nothing
// for a message that is a response.
func FuzzServeDNS(f *testing.F) {
	big := make([]string, 100)
	for i := range big {
		big[i] = fmt.Sprintf("big.test. 300 IN A 10.0.0.%d", i)
	}
	up := startUpstream(f, func(req *dns.Msg) *dns.Msg {
		return answers(map[string][]string{
			"example.test.": {"example.test. 300 IN A 192.0.2.7", "example.test. 300 IN AAAA 2001:db8::7"},
			"big.test.":     big,
			"nodata.test.":  {"nodata.test. 300 IN A 192.0.2.8"},
		})(req)
	})
	s, _, _ := testServer(f, Config{Upstreams: []netip.AddrPort{up.addr}, Hostname: "router", Local: testHosts, CacheSize: 500}, nil)
	for _, seed := range fuzzSeeds() {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	client := netip.MustParseAddrPort("192.168.77.10:40000")
	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(raw); err != nil {
			return // answered FORMERR or dropped by the library, before the handler
		}
		w := &recordWriter{local: net.UDPAddrFromAddrPort(lan1), remote: net.UDPAddrFromAddrPort(client)}
		if tcp {
			w.local, w.remote = net.TCPAddrFromAddrPort(lan1), net.TCPAddrFromAddrPort(client)
		}
		s.serveDNS(w, req)
		if len(w.written) > 1 {
			t.Fatalf("%d responses written", len(w.written))
		}
		if len(w.written) == 0 {
			if !req.Response && !w.closed {
				t.Fatalf("no response to a query:\n%v", req)
			}
			return
		}
		if req.Response {
			t.Fatalf("answered a response:\n%v", req)
		}
		b := w.written[0]
		if !tcp {
			if limit := udpSize(s.st.Load(), req); len(b) > limit {
				t.Fatalf("UDP response of %d bytes, the client takes %d", len(b), limit)
			}
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(b); err != nil {
			t.Fatalf("response does not unpack: %v", err)
		}
		if !resp.Response || resp.Id != req.Id {
			t.Fatalf("response qr %t id %d to query id %d", resp.Response, resp.Id, req.Id)
		}
		if len(req.Question) > 0 && (len(resp.Question) != 1 || resp.Question[0] != req.Question[0]) {
			t.Fatalf("response question %v to %v", resp.Question, req.Question)
		}
	})
}
