package route6

import (
	"testing"

	"e1kbox/appliance/dataplane/frame"
)

// established sets up an outbound TCP connection and returns a packet of
// it from the LAN.
func established(b testing.TB, e *env) []byte {
	syn := fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))
	if res := e.handle(lanPort, syn); res.Action != Forward {
		b.Fatalf("SYN: %v/%v", res.Action, res.Reason)
	}
	if res := e.handle(wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0))); res.Action != Forward {
		b.Fatalf("SYN-ACK: %v/%v", res.Action, res.Reason)
	}
	return fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, 1400-40-20))
}

// BenchmarkForward: an established TCP packet LAN to WAN, parse included.
func BenchmarkForward(b *testing.B) {
	e := resolved(&testing.T{}, "")
	pkt := established(b, e)
	orig := append([]byte(nil), pkt...)
	var f frame.Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		copy(pkt, orig) // the hop limit goes down each time
		if err := frame.Parse(pkt, &f); err != nil {
			b.Fatal(err)
		}
		if res := e.w.Process(e.now, lanPort, pkt, &f); res.Action != Forward {
			b.Fatalf("%v/%v", res.Action, res.Reason)
		}
	}
}

// TestForwardAllocs: the established path allocates nothing, nor do a
// firewall drop and a generated error.
func TestForwardAllocs(t *testing.T) {
	e := resolved(t, "ip6 daddr 2001:db8:1::10 tcp dport 22 accept")
	pkt := established(t, e)
	orig := append([]byte(nil), pkt...)
	drop := fromWAN(tcp(server, host, 5555, 80, frame.TCPSyn, 0))
	ttl := fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, 0))
	ttl[14+7] = 1
	var f frame.Frame
	for name, p := range map[string][]byte{"forward": pkt, "firewall drop": drop, "time exceeded": ttl} {
		port := lanPort
		if name == "firewall drop" {
			port = wanPort
		}
		n := testing.AllocsPerRun(200, func() {
			copy(pkt, orig)
			frame.Parse(p, &f)
			e.w.Process(e.now, port, p, &f)
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", name, n)
		}
	}
}
