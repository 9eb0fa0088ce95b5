package dataplane

import (
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/services/pppoe"
	"e1kbox/internal/ispvm"
	"e1kbox/internal/netnstest"
)

// hostileWAN is a pppoeBox whose WAN reaches the ISP VM through a bridge
// in the ISP's namespace: the box's WAN p2 is a veth whose other end
// "wan0" is a port of br0 there, next to the VM's tap. A raw socket on
// wan0 puts frames on the box's WAN as if the ISP's network sent them.
//
//	h1 ─ p1 [engine] p2 ═ wan0 ─ br0 ─ isp0 (tap) ISP VM
type hostileWAN struct {
	*pppoeBox
	isp    *netnstest.Namespace
	inject *netnstest.Packets // sends on wan0
}

// newHostileWAN boots the VM (vmc) in the ISP's namespace and starts the
// engine and a client (cc adjusts its config) as newPPPoEBox does.
func newHostileWAN(t *testing.T, vmc ispvm.Config, cc func(*pppoe.Config)) *hostileWAN {
	tp := newTopo(t, 1)
	isp := netnstest.New(t, "dpisp")
	isp.IP(t, "link", "add", "br0", "type", "bridge")
	isp.Sysctl(t, "net.ipv6.conf.br0.disable_ipv6=1")
	isp.IP(t, "link", "set", "br0", "up")
	isp.IP(t, "tuntap", "add", "dev", "isp0", "mode", "tap")
	isp.IP(t, "link", "set", "isp0", "master", "br0", "up")
	netnstest.Veth(t, netnstest.End{NS: tp.box, Name: "p2", Off: netnstest.FrameOffloads},
		netnstest.End{NS: isp, Name: "wan0", Off: netnstest.FrameOffloads})
	isp.IP(t, "link", "set", "wan0", "master", "br0", "up")
	tp.box.Sysctl(t, "net.ipv6.conf.p2.disable_ipv6=1")
	tp.box.IP(t, "link", "set", "p2", "up")
	vmc.Netns, vmc.Tap = isp.Name(), "isp0"
	vm := ispvm.Start(t, vmc)
	tp.hosts[0].IP(t, "route", "add", "default", "via", "10.42.0.254")
	b := &pppoeBox{t: t, tp: tp, vm: vm, events: make(chan pppoe.Event, 64)}
	b.cfg = Config{
		Mode:  ModeNAT,
		Ports: []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		NAT:   &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANPPPoE: true},
	}
	b.e = tp.engine(&b.cfg)
	b.runClient(slog.LevelWarn, cc)
	return &hostileWAN{pppoeBox: b, isp: isp, inject: isp.OpenPackets(t, "wan0", false)}
}

// pppoeFrame is an Ethernet frame of EtherType et: a PPPoE header of
// version/type vt, code, session and the length field n (-1: the
// payload's), then the payload.
func pppoeFrame(dst, src [6]byte, et uint16, vt, code byte, sid uint16, n int, payload []byte) []byte {
	f := append(append(append(make([]byte, 0, 22+len(payload)), dst[:]...), src[:]...), byte(et>>8), byte(et))
	if n < 0 {
		n = len(payload)
	}
	f = append(f, vt, code)
	f = binary.BigEndian.AppendUint16(f, sid)
	f = binary.BigEndian.AppendUint16(f, uint16(n))
	return append(f, payload...)
}

// discoveryTags are PPPoE tags (type, value pairs) as a payload.
func discoveryTags(tags ...any) []byte {
	var b []byte
	for i := 0; i+1 < len(tags); i += 2 {
		v := tags[i+1].([]byte)
		b = binary.BigEndian.AppendUint16(b, tags[i].(uint16))
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	return b
}

// Discovery codes and tags the hostile frames use.
const (
	codePADI, codePADO, codePADR, codePADS, codePADT = 0x09, 0x07, 0x19, 0x65, 0xa7
	tagServiceName, tagACName, tagHostUniq           = uint16(0x0101), uint16(0x0102), uint16(0x0103)
)

// malformedKind is one kind of bad frame on the WAN, and where the box
// counts it: dp, the engine's drops (dpPPPoE: as wan_pppoe; dpAny: by
// any reason, the frame parser's first); client, the client's Ignored.
type malformedKind struct {
	name   string
	dp     dpCount
	client bool
	make   func(r *rand.Rand) []byte
}

type dpCount int

const (
	dpNone dpCount = iota
	dpPPPoE
	dpAny
)

// malformedKinds are the bad frames for a session sid from the AC ac to
// the box's WAN MAC box: none of them may end the session.
func malformedKinds(box, ac [6]byte, sid uint16) []malformedKind {
	other := [6]byte{0x02, 0xba, 0xd0, 0, 0, 1}
	ip := func(r *rand.Rand) []byte { // an IPv4 packet's start
		p := make([]byte, 20+r.IntN(40))
		p[0] = 0x45
		return p
	}
	ppp := func(proto uint16, p []byte) []byte { return append(binary.BigEndian.AppendUint16(nil, proto), p...) }
	return []malformedKind{
		{"truncated discovery", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8863, 0x11, codePADO, 0, 0, nil)[:14+r.IntN(6)]
		}},
		{"discovery length beyond the frame", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8863, 0x11, codePADS, sid, 1400+r.IntN(60000), discoveryTags(tagHostUniq, []byte("x")))
		}},
		{"discovery tag beyond the payload", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8863, 0x11, codePADO, 0, -1, []byte{0x01, 0x02, 0xff, 0xf0, 'i', 's', 'p'})
		}},
		{"discovery of version 2", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8863, 0x21, codePADT, sid, -1, nil)
		}},
		{"unknown discovery code", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8863, 0x11, byte(0x30+r.IntN(0x30)), sid, -1, discoveryTags(tagACName, []byte("isp")))
		}},
		{"unsolicited PADO and PADS", dpNone, true, func(r *rand.Rand) []byte {
			code := []byte{codePADO, codePADS}[r.IntN(2)]
			return pppoeFrame(box, other, 0x8863, 0x11, code, uint16(r.IntN(65536)), -1,
				discoveryTags(tagACName, []byte("rogue"), tagHostUniq, []byte{1, 2, 3, 4, 5, 6, 7, 8}))
		}},
		{"session of version 2", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x21, 0, sid, -1, ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"session code not 0", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0x07, sid, -1, ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"session length beyond the frame", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid, 1500+r.IntN(64000), ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"session length under the protocol", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid, r.IntN(2), ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"IPv4 of another session", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid^uint16(1+r.IntN(0xfffe)), -1, ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"IPv4 of the session from another MAC", dpPPPoE, false, func(r *rand.Rand) []byte {
			return pppoeFrame(box, other, 0x8864, 0x11, 0, sid, -1, ppp(pppoe.ProtoIPv4, ip(r)))
		}},
		{"LCP of another session", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid^uint16(1+r.IntN(0xfffe)), -1, ppp(0xc021, []byte{1, 1, 0, 4}))
		}},
		{"LCP Terminate-Request from another MAC", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, other, 0x8864, 0x11, 0, sid, -1, ppp(0xc021, []byte{5, byte(r.IntN(256)), 0, 4}))
		}},
		{"LCP Configure-Request with garbage options", dpNone, true, func(r *rand.Rand) []byte {
			// Options that do not walk: a length of 0 or 1, or beyond the packet.
			opts := []byte{byte(r.IntN(256)), byte(r.IntN(2)), 1, 2}
			if r.IntN(2) == 0 {
				opts = []byte{1, byte(10 + r.IntN(200)), 5, 0xdc}
			}
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid, -1, ppp(0xc021, append([]byte{1, byte(r.IntN(256)), 0, byte(4 + len(opts))}, opts...)))
		}},
		{"LCP with a length beyond the packet", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid, -1, ppp(0xc021, []byte{byte(1 + r.IntN(11)), 1, 0x05, 0xdc}))
		}},
		{"PAP and CHAP from another MAC", dpNone, true, func(r *rand.Rand) []byte {
			return pppoeFrame(box, other, 0x8864, 0x11, 0, sid, -1, ppp([]uint16{0xc023, 0xc223}[r.IntN(2)], []byte{byte(r.IntN(5)), 1, 0, 4}))
		}},
		{"the largest frame with a garbage payload", dpPPPoE, false, func(r *rand.Rand) []byte {
			p := make([]byte, 1500-6)
			for i := range p {
				p[i] = byte(r.IntN(256))
			}
			p[0], p[1] = 0x00, 0x21
			return pppoeFrame(box, ac, 0x8864, 0x11, 0, sid^0x8000, -1, p)
		}},
		{"random bytes", dpNone, false, func(r *rand.Rand) []byte {
			f := make([]byte, 14+r.IntN(1500))
			for i := range f {
				f[i] = byte(r.IntN(256))
			}
			copy(f, box[:])
			copy(f[12:], []byte{0x88, []byte{0x63, 0x64}[r.IntN(2)]})
			return f
		}},
		{"other EtherTypes on a PPPoE WAN", dpAny, false, func(r *rand.Rand) []byte {
			f := make([]byte, 60)
			copy(f, box[:])
			copy(f[6:], ac[:])
			binary.BigEndian.PutUint16(f[12:], []uint16{0x0800, 0x0806, 0x86dd, 0x88cc, 0x1234}[r.IntN(5)])
			return f
		}},
	}
}

// macOf is a hardware address as an array.
func macOf(m net.HardwareAddr) [6]byte { return [6]byte(m) }

// memStats is the process's goroutines and live heap after a GC.
func memStats() (goroutines int, heap uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}

// blast sends n frames of the kinds, in a random order, paced in bursts
// of 50 so that the WAN's ring keeps up; it returns how many of each kind
// went out.
func (h *hostileWAN) blast(r *rand.Rand, kinds []malformedKind, n int) []int {
	sent := make([]int, len(kinds))
	for i := range n {
		k := r.IntN(len(kinds))
		h.inject.Send(h.t, kinds[k].make(r))
		sent[k]++
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return sent
}

// stillUp fails the test unless the session st is up as it was and no
// event said otherwise.
func (h *hostileWAN) stillUp(what string, st pppoe.Status) {
	h.t.Helper()
	for {
		select {
		case ev := <-h.events:
			if !ev.Up || ev.Status.SessionID != st.SessionID {
				h.t.Fatalf("%s: the session changed: %+v", what, ev.Status)
			}
			continue
		default:
		}
		break
	}
	if now := h.client.Status(); now.Phase != pppoe.PhaseUp || now.SessionID != st.SessionID {
		h.t.Fatalf("%s: session %#x phase %v (%s), want %#x up", what, now.SessionID, now.Phase, now.LastDownReason, st.SessionID)
	}
	if err := h.tp.ping(1, h.vm.Config.Upstream4.String()); err != nil {
		h.t.Fatalf("%s: LAN traffic: %v", what, err)
	}
}

// TestEnginePPPoEMalformed: with a session up, thousands of malformed
// PPPoE discovery and session frames (truncated, bad lengths, wrong
// version, unknown codes, other sessions, LCP with garbage options,
// full-size garbage, random bytes) arrive on the WAN: the session stays
// up, the LAN reaches the ISP during and after, the engine counts the
// session frames it drops (wan_pppoe) and the client the control frames
// it ignores, and a second round leaves the goroutines and the heap
// where the first one did (no leak).
func TestEnginePPPoEMalformed(t *testing.T) {
	h := newHostileWAN(t, ispvm.Config{ACName: "isp-hostile"}, nil)
	st := h.waitUp(60 * time.Second)
	kinds := malformedKinds(macOf(h.e.PPPoE().MAC()), macOf(st.ACMAC), st.SessionID)
	r := rand.New(rand.NewPCG(42, 7))
	h.blast(r, kinds, 300) // warm up: whatever the path allocates once
	h.stillUp("after the first 300 frames", st)

	const n = 3000
	var goroutines [3]int
	var heap [3]uint64
	goroutines[0], heap[0] = memStats()
	for round := 1; round <= 2; round++ {
		drops, ignored := h.e.Snapshot().Drops, h.client.Status().Ignored
		ping := h.tp.hosts[0].Command("ping", "-c", "20", "-i", "0.1", "-W", "1", h.vm.Config.Upstream4.String())
		out := &netnstest.Buffer{}
		ping.Stdout, ping.Stderr = out, out
		if err := ping.Start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sent := h.blast(r, kinds, n)
		took := time.Since(start)
		pingErr := ping.Wait()
		time.Sleep(200 * time.Millisecond) // the client's queue drains
		after, ignoredAfter := h.e.Snapshot().Drops, h.client.Status().Ignored
		wantDP, wantAny, wantClient := 0, 0, 0
		for i, k := range kinds {
			switch k.dp {
			case dpPPPoE:
				wantDP += sent[i]
				wantAny += sent[i]
			case dpAny:
				wantAny += sent[i]
			}
			if k.client {
				wantClient += sent[i]
			}
		}
		delta, all := map[string]uint64{}, uint64(0)
		for d, v := range after {
			if v != drops[d] {
				delta[Drop(d).String()] = v - drops[d]
				all += v - drops[d]
			}
		}
		t.Logf("round %d: %d frames in %v; engine drops %v (want wan_pppoe >= %d, all >= %d); client ignored %d (want >= %d); ping: %v",
			round, n, took.Round(time.Millisecond), delta, wantDP, wantAny, ignoredAfter-ignored, wantClient, lastLine(out.String()))
		if got := after[DropPPPoE] - drops[DropPPPoE]; got < uint64(wantDP) {
			t.Errorf("round %d: the engine counted %d wan_pppoe drops, want at least the %d bad session frames", round, got, wantDP)
		}
		if all < uint64(wantAny) {
			t.Errorf("round %d: the engine counted %d drops, want at least the %d frames it must drop", round, all, wantAny)
		}
		if got := ignoredAfter - ignored; got < uint64(wantClient) {
			t.Errorf("round %d: the client ignored %d frames, want at least the %d bad control frames", round, got, wantClient)
		}
		if pingErr != nil {
			t.Errorf("round %d: h1's pings during the frames: %v\n%s", round, pingErr, out)
		}
		h.stillUp("after the malformed frames", st)
		goroutines[round], heap[round] = memStats()
	}
	t.Logf("goroutines %v, heap %v bytes (before, after round 1, after round 2)", goroutines, heap)
	if goroutines[2] > goroutines[0]+2 {
		t.Errorf("goroutines grew from %d to %d over two rounds of %d frames", goroutines[0], goroutines[2], n)
	}
	if heap[2] > heap[1]+1<<20 {
		t.Errorf("the heap grew by %d bytes in the second round of %d frames", heap[2]-heap[1], n)
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
