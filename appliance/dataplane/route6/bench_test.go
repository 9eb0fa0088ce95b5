package route6

import (
	"fmt"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

// established sets up an outbound TCP connection and returns a packet
// of it from the LAN and one from the WAN, each with n bytes of payload.
func established(b testing.TB, e *env, n int) (out, in []byte) {
	syn := fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))
	if res := e.handle(lanPort, syn); res.Action != routing.Forward {
		b.Fatalf("SYN: %v/%v", res.Action, res.Reason)
	}
	if res := e.handle(wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0))); res.Action != routing.Forward {
		b.Fatalf("SYN-ACK: %v/%v", res.Action, res.Reason)
	}
	return fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, n)), fromWAN(tcp(server, host, 443, 40000, frame.TCPAck, n))
}

// BenchmarkForward: an established TCP packet each way, parse included,
// in the frame sizes of nat's BenchmarkForward (64 and 512 bytes with the
// FCS), for a side-by-side with the IPv4 NAT path.
func BenchmarkForward(b *testing.B) {
	for _, size := range []int{64, 512} {
		e := resolved(&testing.T{}, "")
		payload := max(size-4-14-40-20, 0)
		out, in := established(b, e, payload)
		for _, dir := range []struct {
			name string
			port int
			tmpl []byte
		}{{"lan-wan", lanPort, out}, {"wan-lan", wanPort, in}} {
			b.Run(fmt.Sprintf("%dB/%s", size, dir.name), func(b *testing.B) {
				buf := make([]byte, len(dir.tmpl))
				var f frame.Frame
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					copy(buf, dir.tmpl) // the hop limit goes down each time
					if err := frame.Parse(buf, &f); err != nil {
						b.Fatal(err)
					}
					if res := e.w.Process(e.now, dir.port, buf, &f); res.Action != routing.Forward {
						b.Fatalf("%v/%v", res.Action, res.Reason)
					}
				}
			})
		}
	}
}

// TestForwardAllocs: the established path allocates nothing, nor do a
// firewall drop and a generated error.
func TestForwardAllocs(t *testing.T) {
	e := resolved(t, "ip6 daddr 2001:db8:1::10 tcp dport 22 accept")
	pkt, _ := established(t, e, 100)
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

// BenchmarkTick is a busy worker's housekeeping after each batch (10 µs
// apart), with no IPv6 connection (the NAT worker of a box without IPv6
// traffic) and with one, when every Tick sweeps its slice of the table.
func BenchmarkTick(b *testing.B) {
	for _, conns := range []int{0, 1} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			e := resolved(&testing.T{}, "")
			if conns > 0 {
				established(b, e, 0)
			}
			b.ReportAllocs()
			for b.Loop() {
				e.now += 10e3
				e.w.Tick(e.now)
			}
		})
	}
}
