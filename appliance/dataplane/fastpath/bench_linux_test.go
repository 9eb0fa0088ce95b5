package fastpath

import (
	"strconv"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/testenv"
)

// BenchmarkPrograms is the kernel's own time per frame (BPF_PROG_TEST_RUN
// in the self-test's calls of SelfTestBatch repeats, each call's verdict
// checked: runFrames) of the socket filter and the tcx program for a
// frame of an installed flow, NAT (the self-test's 60 B UDP/IPv4 frame,
// between its flow and the flow back) against routed IPv6 (66 B UDP/IPv6,
// hop limit 255), and for a frame no flow matches. The kernel keeps what
// a repeat wrote, so the IPv6 flow gives its frames the MACs they came
// with: each repeat is a hit again, with the whole rewrite. The tcx runs
// see no filter decision in skb->cb, so they classify the frame
// themselves, as they do for a frame no ring's filter looked at.
func BenchmarkPrograms(b *testing.B) {
	p := load(b, ModeTCX)
	s := SampleTraffic()
	if err := s.putNAT(p, 1, 3, 5); err != nil {
		b.Fatal(err)
	}
	rk := IPv6Key{Ifindex: 1, Src: lanHost6, Dst: server6, SrcPort: 40000, DstPort: 53, Proto: frame.ProtoUDP}
	r6 := r6Flow()
	r6.DstMAC, r6.SrcMAC = r6.InDstMAC, r6.InSrcMAC
	if err := p.PutIPv6(rk, r6); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		hit   bool
	}{
		{"nat", s.NATFrame(), true},
		{"ipv6", r6UDP(func(h *frametest.IPv6) { h.HopLimit = 255 }, 4), true},
		{"miss", s.MissFrame(), false},
	} {
		for _, prog := range p.chain() {
			b.Run(tc.name+"/"+prog.name, func(b *testing.B) {
				want := prog.miss
				if tc.hit {
					want = prog.hit
				}
				var sum time.Duration
				n := 0
				for b.Loop() {
					d, err := runFrames(prog, tc.frame, want)
					if err != nil {
						b.Fatal(err)
					}
					sum += d
					n += SelfTestFrames
				}
				b.ReportMetric(float64(sum.Nanoseconds())/float64(n), "ns/frame")
			})
		}
	}
}

// BenchmarkStatsRead is one read of the counters of 8192 flows, each
// counted on every CPU, as the harvest reads them (docs/dataplane.md,
// Measured).
func BenchmarkStatsRead(b *testing.B) {
	p := load(b, ModeTCX)
	const flows = 8192
	for c := range p.ncpu {
		for s := range flows {
			p.stats.flow[c*p.slots+s] = fastpathFlowStats{Packets: 1, Bytes: 64, L3bytes: 46, Last: 1}
		}
	}
	r := p.NewStatsReader()
	dst := make([]Stats, flows)
	for b.Loop() {
		if err := r.Read(dst); err != nil {
			b.Fatal(err)
		}
	}
	if dst[flows-1].Packets != uint64(p.ncpu) {
		b.Fatalf("slot %d: %d packets, want %d", flows-1, dst[flows-1].Packets, p.ncpu)
	}
}

// BenchmarkFlowCount is the tcx program's time for a frame of an
// installed NAT flow (64 B UDP/IPv4) when the frames cycle through 1,
// 1024 or 8192 flows, one run per frame (BPF_PROG_TEST_RUN without
// repeat, so each run includes the test run's own ~100 ns): the growth
// with the flow count is what the flow lookup's cache and TLB misses
// cost, the cost a bench run's 8192 flows pay on every frame
// (docs/dataplane.md, Measured).
func BenchmarkFlowCount(b *testing.B) {
	testenv.Require(b, "root")
	p, err := Load(Options{Mode: ModeTCX}) // the default sizes, as the dataplane runs it
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	const most = 8192
	frames := make([][]byte, most)
	for i := range most {
		port := uint16(10000 + i)
		f := natFlow()
		f.Slot = uint32(i)
		if err := p.PutNAT(NATKey{Ifindex: 1, Src: lanHost, Dst: server, SrcPort: port, DstPort: 53, Proto: frame.ProtoUDP}, f); err != nil {
			b.Fatal(err)
		}
		frames[i] = natUDPFrom(port, nil, 18)
	}
	for _, flows := range []int{1, 1024, most} {
		b.Run(strconv.Itoa(flows), func(b *testing.B) {
			var sum time.Duration
			n := 0
			for b.Loop() {
				verdict, d, err := p.progs.TCX.Benchmark(frames[n%flows], 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				if verdict != retRedirect {
					b.Fatalf("verdict %d, want TC_ACT_REDIRECT (%d): the flow's frame was not forwarded", verdict, retRedirect)
				}
				sum += d
				n++
			}
			b.ReportMetric(float64(sum.Nanoseconds())/float64(n), "ns/frame")
		})
	}
}
