package diag

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// server answers box.example. A 192.0.2.7 and NXDOMAIN for the rest.
func server(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name == "box.example." && r.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR("box.example. 300 IN A 192.0.2.7")
			m.Answer = append(m.Answer, rr)
		} else {
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR("example. 60 IN SOA ns.example. admin.example. 1 7200 3600 1209600 60")
			m.Ns = append(m.Ns, soa)
		}
		w.WriteMsg(m)
	})
	s := &dns.Server{PacketConn: pc, Handler: mux}
	go s.ActivateAndServe()
	t.Cleanup(func() { s.Shutdown() })
	return pc.LocalAddr().String()
}

func TestLookup(t *testing.T) {
	addr := server(t)
	ctx := context.Background()
	r, err := Lookup(ctx, LookupOptions{Name: "box.example", Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	if r.RCode != "NOERROR" || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0], "192.0.2.7") || r.Server != addr || r.RTT <= 0 {
		t.Errorf("lookup %+v", r)
	}
	r, err = Lookup(ctx, LookupOptions{Name: "nope.example", Type: "aaaa", Server: addr})
	if err != nil || r.RCode != "NXDOMAIN" || len(r.Answer) != 0 || len(r.Authority) != 1 {
		t.Errorf("lookup of a missing name: %+v %v", r, err)
	}
	// The box's resolver: the first nameserver of resolv.conf.
	rc := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(rc, []byte("# gokrazy's dhcp\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), 0o644)
	if got, err := serverAddr("", rc); err != nil || got != "192.0.2.53:53" {
		t.Errorf("server from resolv.conf: %q %v", got, err)
	}
	if got, _ := serverAddr("fd00::53", rc); got != "[fd00::53]:53" {
		t.Errorf("bare IPv6 server: %q", got)
	}
	for _, o := range []LookupOptions{
		{Name: "box.example", Type: "BOGUS", Server: addr},
		{Name: "", Server: addr},
		{Name: "box.example", ResolvConf: filepath.Join(t.TempDir(), "missing")},
	} {
		if _, err := Lookup(ctx, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
