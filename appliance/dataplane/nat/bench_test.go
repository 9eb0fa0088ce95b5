package nat

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// BenchmarkForward is the per-packet cost of an established TCP flow
// (parse included), LAN to WAN and WAN to LAN, for 64- and 512-byte
// frames (FCS included in the size).
func BenchmarkForward(b *testing.B) {
	for _, size := range []int{64, 512} {
		e := newEnv(b, nil)
		payload := make([]byte, size-4-14-20-20)
		e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPSyn}, nil)), wanPort)
		e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
		out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, payload))
		in := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPAck}, payload))
		if len(out) != size-4 {
			b.Fatalf("frame is %d bytes, want %d", len(out), size-4)
		}
		for _, dir := range []struct {
			name string
			w    *Worker
			port int
			tmpl []byte
		}{{"lan-wan", e.lan, lanPort, out}, {"wan-lan", e.wan, wanPort, in}} {
			b.Run(fmt.Sprintf("%dB/%s", size, dir.name), func(b *testing.B) {
				buf := make([]byte, len(dir.tmpl))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					copy(buf, dir.tmpl)
					if dir.w.Handle(e.now, dir.port, buf).Action != routing.Forward {
						b.Fatal("not forwarded")
					}
				}
			})
		}
	}
}

// BenchmarkNewConns is the cost of a new masqueraded UDP connection:
// rules-free, a fresh source port and destination each time, in a table
// big enough not to fill.
func BenchmarkNewConns(b *testing.B) {
	e := newEnv(b, func(c *Config) { c.MaxConns = 1 << 22; c.PortMin, c.PortMax = 1024, 65535 })
	tmpl := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 53, []byte("q")))
	buf := make([]byte, len(tmpl))
	var f frame.Frame
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, tmpl)
		frame.Parse(buf, &f)
		frame.SetSrcPort(buf, &f, uint16(1024+i%60000))
		frame.SetIPv4Dst(buf, &f, [4]byte{198, 51, byte(i >> 16 / 60000), byte(i / 60000)})
		i++
		if res := e.lan.Process(e.now, lanPort, buf, &f); res.Action != routing.Forward {
			b.Fatalf("conn %d: %v %v", i, res.Action, res.Reason)
		}
	}
	b.ReportMetric(float64(e.r.CountConns(Filter{})), "conns")
}

// filledRouter is a router with a table of max connections, n of them
// established UDP ones (fillTable), and their original keys.
func filledRouter(tb testing.TB, max, n int) (*Router, []key) {
	tb.Helper()
	cfg := testConfig()
	cfg.MaxConns = max
	r, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r, fillTable(tb, r, n)
}

// connIDOf is the ConnID of the connection with key k in r's table.
func connIDOf(tb testing.TB, r *Router, k key) ConnID {
	tb.Helper()
	t := r.ct
	h := t.hash(k)
	idx, _, _, ok := t.find(&t.stripes[t.stripeOf(h)], k, h)
	if !ok {
		tb.Fatalf("key %v not in the table", k)
	}
	return ConnID(uint64(idx)<<32 | uint64(t.cold[idx].gen.Load()))
}

// noLimits lets fillTable fill a table with one host's connections.
var noLimits = limits{inbound: 1 << 40, perHost: 1 << 40, perRemote: 1 << 40}

// fillTable inserts n established UDP connections straight into r's
// table and returns their original keys.
func fillTable(b testing.TB, r *Router, n int) []key {
	keys := make([]key, n)
	sec := uint32(t0 / 1e9)
	for i := range n {
		src := uint32(0xc0a80100) + uint32(i%250) + 2
		dst := uint32(0xc6336400) + uint32(i/60000)
		sp, dp := uint16(1024+i%60000), uint16(53)
		k := mkKey(src, dst, sp, dp, frame.ProtoUDP, LAN)
		rk := mkKey(dst, 0xcb007102, dp, uint16(i), frame.ProtoUDP, WAN)
		if _, err := r.ct.insert([2]key{k, rk}, kindDNAT, flagReplied|flagAssured, sec, sec+1000, 100, &noLimits); err != insOK {
			b.Fatalf("insert %d: %v", i, err)
		}
		keys[i] = k
	}
	return keys
}

// BenchmarkLookup is the conntrack lookup (hash, stripe lock, probe,
// key compare, unlock) at 1k and 1M entries: "hot" cycles through 1024
// flows of the table (a busy link's working set), "uniform" through all
// of them in random order (every lookup a cache miss at 1M). The
// ".../prefetch" variants model the engine working a block of frames:
// before the lookup of key i they prefetch key i+prefetchAhead (what
// Worker.Prefetch does after parsing), so the cache misses of several
// lookups overlap.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 20} {
		cfg := testConfig()
		cfg.MaxConns = n
		r, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		keys := fillTable(b, r, n)
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for _, mode := range []string{"hot", "uniform", "hot/prefetch", "uniform/prefetch"} {
			set := keys
			if strings.HasPrefix(mode, "hot") {
				set = keys[:1024]
			}
			ahead := 0
			if strings.HasSuffix(mode, "/prefetch") {
				ahead = prefetchAhead
			}
			b.Run(fmt.Sprintf("%dk/%s", n>>10, mode), func(b *testing.B) {
				t := r.ct
				mask := len(set) - 1
				var pf prefetcher
				for j := range ahead {
					pf.push(t, t.hash(set[j&mask]))
				}
				i := 0
				for b.Loop() {
					if ahead != 0 {
						pf.push(t, t.hash(set[(i+ahead)&mask]))
					}
					k := set[i&mask]
					i++
					h := t.hash(k)
					st := &t.stripes[t.stripeOf(h)]
					st.mu.Lock()
					idx, _, _, ok := t.find(st, k, h)
					if ok {
						t.entries[idx].count(&t.cold[idx], 0, 64)
					}
					st.mu.Unlock()
					if !ok {
						b.Fatal("miss")
					}
				}
			})
		}
	}
}

// prefetchAhead is how many frames ahead the benchmarks prefetch: the
// distance the package documentation recommends to the engine.
const prefetchAhead = 8

// BenchmarkForwardBlock is the per-frame cost of established UDP flows
// LAN to WAN through Worker.Process (parse included) at 1k and 1M
// connections, the frames in random flow order, worked a block of
// blockFrames frames at a time as the engine does: "plain" processes the
// frames one after the other, "prefetch" calls Worker.Prefetch for frame
// i+prefetchAhead of the block before processing frame i.
func BenchmarkForwardBlock(b *testing.B) {
	const blockFrames, stride = 64, 64
	for _, n := range []int{1 << 10, 1 << 20} {
		e := newEnv(b, func(c *Config) { c.MaxConns = n })
		keys := fillTable(b, e.r, n)
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		// One frame per connection, each in a stride-byte cell.
		tmpl := make([]byte, n*stride)
		var flen int
		for i, k := range keys {
			src, dst := put32(k.src()), put32(k.dst())
			fr := fromLAN(hostA, frametest.IPv4{Src: a4(netip.AddrFrom4(src)), Dst: a4(netip.AddrFrom4(dst))}.UDPPacket(k.sport(), k.dport(), []byte("payload")))
			flen = copy(tmpl[i*stride:(i+1)*stride], fr)
		}
		block := make([]byte, blockFrames*stride)
		var f frame.Frame
		for _, mode := range []string{"plain", "prefetch"} {
			b.Run(fmt.Sprintf("%dk/%s", n>>10, mode), func(b *testing.B) {
				w := e.lan
				next := 0
				b.ReportAllocs()
				for b.Loop() {
					i := next % blockFrames
					if i == 0 { // a new block arrives
						start := next * stride % len(tmpl)
						copy(block, tmpl[start:start+len(block)])
						if mode == "prefetch" {
							for j := range prefetchAhead {
								w.Prefetch(lanPort, block[j*stride:j*stride+flen])
							}
						}
					}
					next++
					if j := i + prefetchAhead; mode == "prefetch" && j < blockFrames {
						w.Prefetch(lanPort, block[j*stride:j*stride+flen])
					}
					buf := block[i*stride : i*stride+flen]
					if err := frame.Parse(buf, &f); err != nil {
						b.Fatal(err)
					}
					if res := w.Process(e.now, lanPort, buf, &f); res.Action != routing.Forward {
						b.Fatalf("frame %d: %v %v", next, res.Action, res.Reason)
					}
				}
			})
		}
	}
}

// BenchmarkTableMemory reports the heap bytes a Router's tables take per
// connection at 1M connections (entries, index, mappings).
func BenchmarkTableMemory(b *testing.B) {
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		cfg := testConfig()
		cfg.MaxConns = 1 << 20
		r, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(cfg.MaxConns), "bytes/conn")
		runtime.KeepAlive(r)
	}
}

// BenchmarkSYNPastInboundCap is the cost of a spoofed SYN to a port
// forward once the flood filled the inbound cap of the default table
// (65536): each one replaces the oldest unassured inbound connection.
func BenchmarkSYNPastInboundCap(b *testing.B) {
	e := newEnv(b, func(c *Config) { c.MaxConns = 0 })
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range DefaultMaxConns / 4 {
		spoofedSYN(b, e, rng, randomRemote(rng))
		if i%1000 == 0 {
			e.now += sec / 20
		}
	}
	syns := make([][]byte, 1<<17)
	for i := range syns {
		syns[i] = fromWAN(frametest.IPv4{Src: randomRemote(rng), Dst: a4(wanAddr)}.TCPPacket(
			frametest.TCP{SrcPort: uint16(1024 + rng.IntN(60000)), DstPort: 8080, Seq: rng.Uint32(), Flags: frame.TCPSyn}, nil))
	}
	buf := make([]byte, len(syns[0]))
	ev0, lim0 := e.r.Stats().Evicted, e.r.Stats().SourceLimited
	i := 0
	for b.Loop() {
		copy(buf, syns[i%len(syns)])
		e.wan.Handle(e.now, wanPort, buf)
		if i++; i%1000 == 0 {
			e.now += sec / 20 // 20k SYN/s
		}
	}
	st := e.r.Stats()
	b.ReportMetric(float64(st.Evicted-ev0)/float64(i), "evicted/op")
	b.ReportMetric(float64(st.SourceLimited-lim0)/float64(i), "refused/op")
}

// BenchmarkNewConnsFullTable is the cost of a new masqueraded UDP
// connection once unreplied connections from the LAN (what a burst of new
// flows leaves behind) fill the table: each insert evicts one.
func BenchmarkNewConnsFullTable(b *testing.B) {
	const n = 1 << 18
	e := newEnv(b, func(c *Config) { c.MaxConns = n; c.PortMin, c.PortMax = 1024, 65535; c.MaxPerHost = n })
	tmpl := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 53, []byte("q")))
	buf := make([]byte, len(tmpl))
	var f frame.Frame
	i := 0
	next := func() Result {
		copy(buf, tmpl)
		frame.Parse(buf, &f)
		frame.SetSrcPort(buf, &f, uint16(1024+i%60000))
		frame.SetIPv4Dst(buf, &f, [4]byte{198, byte(i >> 24), byte(i >> 16), byte(i >> 8)})
		frame.SetIPv4Src(buf, &f, [4]byte{192, 168, 1, byte(2 + i%200)})
		i++
		return e.lan.Process(e.now, lanPort, buf, &f)
	}
	for e.r.CountConns(Filter{}) < n {
		if res := next(); res.Action != routing.Forward {
			b.Fatalf("filling, conn %d: %v %v", i, res.Action, res.Reason)
		}
	}
	ev0 := e.r.Stats().Evicted
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := next(); res.Action != routing.Forward {
			b.Fatalf("conn %d: %v %v", i, res.Action, res.Reason)
		}
	}
	b.ReportMetric(float64(e.r.Stats().Evicted-ev0)/float64(b.N), "evicted/op")
}

// BenchmarkOffloaded is the fast path harvest's conntrack update of one
// connection direction (Router.Offloaded) at 1M connections, visiting
// them in random order as the harvest's turns find them: cold in the
// cache. "prefetch" calls PrefetchOffloaded prefetchAhead connections
// ahead, as the harvest does.
func BenchmarkOffloaded(b *testing.B) {
	r, keys := filledRouter(b, 1<<20, 1<<20)
	ids := make([]ConnID, len(keys))
	for i, k := range keys {
		ids[i] = connIDOf(b, r, k)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	u := OffloadUse{Packets: 1, Bytes: 64, Last: t0}
	for _, ahead := range []int{0, prefetchAhead} {
		name := "plain"
		if ahead > 0 {
			name = "prefetch"
		}
		b.Run(name, func(b *testing.B) {
			mask := len(ids) - 1
			i := 0
			for b.Loop() {
				if ahead > 0 {
					r.PrefetchOffloaded(ids[(i+ahead)&mask])
				}
				if !r.Offloaded(ids[i&mask], 0, u) {
					b.Fatalf("connection %d not offloadable", i&mask)
				}
				i++
			}
		})
	}
}
