package dataplane

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

// benchRules makes n forward rules of a few shapes (source prefix and
// destination port, destination host, port range), none of which match
// the benchmark's traffic (10.0.0.0/24 to 10.0.0.2), so every lookup
// walks the table to the policy, as for most transit traffic.
func benchRules(n int) string {
	r := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	seen := map[string]bool{}
	for i := 0; len(seen) < n; i++ {
		var line strings.Builder
		a := netip.AddrFrom4([4]byte{172, byte(16 + r.IntN(16)), byte(r.IntN(256)), byte(r.IntN(256))})
		switch i % 3 {
		case 0:
			fmt.Fprintf(&line, "ip saddr %s tcp dport %d drop\n", netip.PrefixFrom(a, 24).Masked(), 1+r.IntN(60000))
		case 1:
			fmt.Fprintf(&line, "ip daddr %s drop\n", a)
		default:
			fmt.Fprintf(&line, "iif p2 ip saddr %s udp dport %d-%d counter drop\n", netip.PrefixFrom(a, 16).Masked(), 1000+r.IntN(1000), 2000+r.IntN(1000))
		}
		if !seen[line.String()] {
			seen[line.String()] = true
			b.WriteString(line.String())
		}
	}
	return b.String()
}

// BenchmarkBridgePath measures the per-frame cost of the bridge path:
// parse, FDB learn and lookup, rule lookup (with the per-worker flow
// cache), and the copy into the out port's TX ring (an in-memory ring; the
// kernel's send is per batch and not included). "flows" cycles through
// 64Ki distinct flows so that the flow cache mostly misses.
func BenchmarkBridgePath(b *testing.B) {
	for _, nrules := range []int{0, 10000} {
		for _, flows := range []int{1, 1 << 16} {
			b.Run(fmt.Sprintf("rules=%d/flows=%d", nrules, flows), func(b *testing.B) {
				text := ""
				if nrules > 0 {
					text = benchRules(nrules)
				}
				tb := newTestBridge(b, 3, false, text, false, nil)
				if nrules > 0 && len(tb.set.Table().Rules()) != nrules {
					b.Fatalf("table has %d rules", len(tb.set.Table().Rules()))
				}
				tb.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
				frames := make([][]byte, min(flows, 4096))
				for i := range frames {
					frames[i] = frametest.Frame(macB, macA, frame.EtherTypeIPv4,
						frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: uint16(1024 + i), DstPort: 80, Flags: frame.TCPAck, Seq: 1, Ack: 1}, make([]byte, 64)))
				}
				w := tb.fwds[1]
				out := tb.tx[1][2]
				w.begin(time.Now().UnixNano(), 1)
				b.SetBytes(int64(len(frames[0])))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					fr := frames[i%len(frames)]
					if flows > len(frames) {
						// vary the destination port too: 64Ki flows
						fr[14+20+2] = byte(i >> 12)
					}
					w.handle(fr, len(fr), false, frame.VLANTag{})
					if out.n == len(out.slots) {
						out.n = 0
					}
				}
				b.StopTimer()
				if w.c.txPackets[2] != uint64(b.N) {
					b.Fatalf("forwarded %d of %d frames; drops %v", w.c.txPackets[2], b.N, w.c.drops)
				}
				h, m := w.rw.CacheStats()
				b.ReportMetric(float64(h)/float64(h+m+1), "cache-hit-ratio")
			})
		}
	}
}

// BenchmarkPathBySize compares the engine's per-frame cost of the bridge
// path with the NAT path for an established TCP connection, at 64 and 512
// bytes per frame: parse, (bridge) FDB learn and lookup and rule lookup,
// or (nat) conntrack lookup, rewrite with incremental checksums and the
// ARP cache, then the copy into the out port's TX ring (in memory; the
// kernel's send is per batch and not included). Each iteration first
// restores the frame from a template (the router rewrites in place), in
// both modes.
func BenchmarkPathBySize(b *testing.B) {
	for _, size := range []int{64, 512} {
		payload := size - 14 - 20 - 20
		for _, mode := range []string{"bridge", "nat-lan-to-wan", "nat-wan-to-lan"} {
			b.Run(fmt.Sprintf("mode=%s/size=%d", mode, size), func(b *testing.B) {
				var (
					w    *fwd
					tmpl []byte
					out  *fakeTx
					outN func() uint64
				)
				switch mode {
				case "bridge":
					tb := newTestBridge(b, 3, false, "", false, nil)
					tb.rx(2, arpFrame(bcast, macB), false, frame.VLANTag{})
					w, out = tb.fwds[1], tb.tx[1][2]
					tmpl = frametest.Frame(macB, macA, frame.EtherTypeIPv4,
						frametest.IPv4{Src: ipA, Dst: ipB}.TCPPacket(frametest.TCP{SrcPort: 1024, DstPort: 80, Flags: frame.TCPAck, Seq: 1, Ack: 1}, make([]byte, payload)))
					outN = func() uint64 { return w.c.txPackets[2] }
				default:
					tr := newTestRouter(b, 1024, "")
					tr.resolve(b)
					syn := tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPSyn, 0))
					var f frame.Frame
					if err := frame.Parse(syn[idWAN][0], &f); err != nil {
						b.Fatal(err)
					}
					natPort := f.TCP.SrcPort
					tr.rx(idWAN, tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPSyn|frame.TCPAck, 0))
					tr.rx(idLAN1, tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, 0))
					if mode == "nat-lan-to-wan" {
						w, out = tr.fwds[idLAN1], tr.tx[idLAN1][idWAN]
						tmpl = tcp4(rLAN, macA, hAIP, remIP, 40000, 80, frame.TCPAck, payload)
						outN = func() uint64 { return w.c.txPackets[idWAN] }
					} else {
						w, out = tr.fwds[idWAN], tr.tx[idWAN][idLAN1]
						tmpl = tcp4(rWAN, macGW, remIP, wanIP, 80, natPort, frame.TCPAck, payload)
						outN = func() uint64 { return w.c.txPackets[idLAN1] }
					}
					w.begin(tr.now, tr.clock)
				}
				if len(tmpl) != size {
					b.Fatalf("frame of %d bytes, want %d", len(tmpl), size)
				}
				buf := make([]byte, len(tmpl))
				start := outN()
				if mode == "bridge" {
					w.begin(time.Now().UnixNano(), 1)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					copy(buf, tmpl)
					w.handle(buf, len(buf), false, frame.VLANTag{})
					if out.n == len(out.slots) {
						out.n = 0
					}
				}
				b.StopTimer()
				if got := outN() - start; got != uint64(b.N) {
					b.Fatalf("forwarded %d of %d frames; drops %v", got, b.N, w.c.drops)
				}
			})
		}
	}
}
