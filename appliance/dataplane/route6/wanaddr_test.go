package route6

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
)

var (
	secret   = []byte("0123456789abcdef0123456789abcdef")
	ispNet   = [8]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x64, 0, 0} // 2001:db8:64::/64, the WAN link's
	leased   = a6("2001:db8:64::100")                         // an IA_NA address
	ispHost  = a6("2001:db8:64::1")                           // the ISP router's global address
	addrCmp  = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})
	allNodes = a6("ff02::1")
)

// pio is a prefix information option.
func pio(prefix string, bits, flags uint8, valid, pref uint32) []byte {
	o := []byte{optPrefix, 4, bits, flags}
	o = binary.BigEndian.AppendUint32(o, valid)
	o = binary.BigEndian.AppendUint32(o, pref)
	o = append(o, 0, 0, 0, 0)
	p := a6(prefix)
	return append(o, p[:]...)
}

// raFrame is the ISP router's advertisement (router lifetime 1800 s, its
// link-layer address) with the options opts.
func raFrame(opts ...[]byte) []byte {
	body := append(make([]byte, 8), append([]byte{optSLLA, 1}, gwMAC[:]...)...)
	for _, o := range opts {
		body = append(body, o...)
	}
	return eth(allNodesMAC, gwMAC, icmp(gwLL, allNodes, 255, icmpRA, 0, 64<<24|1800, body))
}

// dadNS is another node's DAD probe for target.
func dadNS(target [16]byte) []byte {
	dst, mac := solicitedNode(&target)
	return eth(mac, gwMAC, icmp([16]byte{}, dst, 255, icmpNS, 0, 0, target[:]))
}

// nsFrom is a neighbour solicitation for target from the ISP router.
func nsFrom(target [16]byte) []byte {
	dst, mac := solicitedNode(&target)
	body := append(append([]byte(nil), target[:]...), optSLLA, 1)
	return eth(mac, gwMAC, icmp(gwLL, dst, 255, icmpNS, 0, 0, append(body, gwMAC[:]...)))
}

// naFor is another node's unsolicited advertisement of target to all
// nodes (what a node that has the address answers a DAD probe with).
func naFor(target [16]byte) []byte {
	body := append(append([]byte(nil), target[:]...), optTLLA, 1)
	return eth(allNodesMAC, gwMAC, icmp(gwLL, allNodes, 255, icmpNA, 0, 0x20000000, append(body, gwMAC[:]...)))
}

// wanEnv is an env whose WAN addressing is set, with the events it
// reported.
type wanEnv struct {
	*env
	events []WANEvent
}

func newWANEnv(t *testing.T, slaac bool, leases ...Leased) *wanEnv {
	t.Helper()
	e := &wanEnv{env: resolved(t, "")}
	e.set(slaac, leases...)
	return e
}

func (e *wanEnv) set(slaac bool, leases ...Leased) {
	e.t.Helper()
	a := WANAddressing{SLAAC: slaac, Secret: secret, NetIface: "wan0", DHCPv6: true, Leased: leases,
		OnEvent: func(ev WANEvent) { e.events = append(e.events, ev) }}
	if err := e.r.SetWANAddressing(a, e.now); err != nil {
		e.t.Fatal(err)
	}
}

// tick runs Maintain and the worker's Tick at the env's time and returns
// the frames the worker sent.
func (e *wanEnv) tick() []outFrame {
	e.r.Maintain(e.now)
	e.w.Tick(e.now)
	return e.outputs()
}

// after moves the clock on by d nanoseconds, ticking every 250 ms as the
// engine does, and returns the frames sent meanwhile.
func (e *wanEnv) after(d int64) []outFrame {
	var out []outFrame
	for end := e.now + d; e.now < end; {
		e.now = min(e.now+250e6, end)
		out = append(out, e.tick()...)
	}
	return out
}

// addr is the WAN address a's listing, if it is listed.
func (e *wanEnv) addr(a [16]byte) (WANAddr, bool) {
	for _, w := range e.r.WANAddrs() {
		if w.Addr.As16() == a {
			return w, true
		}
	}
	return WANAddr{}, false
}

func (e *wanEnv) sec() uint32 { return uint32(e.now / 1e9) }

// TestDADProbe: a new address is probed with one NS from the unspecified
// address to its solicited-node group, target the address, hop limit
// 255, no options, valid checksum; no second probe follows.
func TestDADProbe(t *testing.T) {
	e := newWANEnv(t, false, Leased{netip.AddrFrom16(leased), Forever, Forever})
	before := e.r.Stats().NS // the link-local address's probe
	out := e.tick()
	if len(out) != 1 || out[0].port != wanPort {
		t.Fatalf("after the address came: %d frames %v, want one probe on the WAN", len(out), out)
	}
	b := out[0].b
	f := parse(t, b)
	wantDst := a6("ff02::1:ff00:100")
	if f.Dst != [6]byte{0x33, 0x33, 0xff, 0, 0x01, 0} || f.Src != wanMAC || f.IPv6.Src != ([16]byte{}) ||
		f.IPv6.Dst != wantDst || f.IPv6.HopLimit != 255 || f.ICMP.Type != icmpNS || f.ICMP.Code != 0 {
		t.Errorf("probe %x > %x, %x > %x hop %d type %d: want the WAN MAC to 33:33:ff:00:01:00, :: to %x, hop 255, an NS",
			f.Src, f.Dst, f.IPv6.Src, f.IPv6.Dst, f.IPv6.HopLimit, f.ICMP.Type, wantDst)
	}
	if msg := b[f.L4Off:f.L3End]; len(msg) != 24 || !bytes.Equal(msg[4:8], []byte{0, 0, 0, 0}) || !bytes.Equal(msg[8:24], leased[:]) {
		t.Errorf("probe message %x, want 24 bytes: reserved 0, target %x, no option", msg, leased)
	}
	if len(b) != dadFrameLen {
		t.Errorf("probe frame of %d bytes, want %d", len(b), dadFrameLen)
	}
	if out := e.after(3e9); len(out) != 0 {
		t.Errorf("%d more frames after the probe, want none (DupAddrDetectTransmits 1)", len(out))
	}
	if st := e.r.Stats(); st.NS != before+1 {
		t.Errorf("Stats().NS = %d, want %d and the probe", st.NS, before)
	}
}

// TestDAD: a tentative address is neither answered for nor accepted; one
// second after its probe without a conflict it is in use; an NA for it,
// or another node's probe, during that second makes it a duplicate that
// is never used.
func TestDAD(t *testing.T) {
	ns, echo := nsFrom(leased), fromWAN(icmp(ispHost, leased, 64, frame.ICMPv6EchoRequest, 0, 0x00010001, []byte("ping")))
	for _, tc := range []struct {
		name     string
		during   []byte // received while tentative
		want     AddrState
		failures uint64
	}{
		{"no conflict", nil, AddrPreferred, 0},
		{"an NA for it", naFor(leased), AddrDuplicate, 1},
		{"another node's probe", dadNS(leased), AddrDuplicate, 1},
		{"an NS from a node resolving it", ns, AddrPreferred, 0},
		{"an NA for another address", naFor(a6("2001:db8:64::101")), AddrPreferred, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWANEnv(t, false, Leased{netip.AddrFrom16(leased), e0 + 3600, e0 + 7200})
			e.tick() // the probe
			for name, pkt := range map[string][]byte{"NS": ns, "echo request": echo} {
				if res := e.handle(wanPort, pkt); res.Action == routing.Reply {
					t.Errorf("tentative: %s answered", name)
				}
			}
			if slices.Contains(e.r.Addrs(WAN), netip.AddrFrom16(leased)) {
				t.Errorf("tentative: in Addrs(WAN) %v", e.r.Addrs(WAN))
			}
			if tc.during != nil {
				if res := e.handle(wanPort, tc.during); res.Action == routing.Reply || res.Action == routing.Drop {
					t.Errorf("%s: %v/%v, want it taken in silence", tc.name, res.Action, res.Reason)
				}
			}
			e.after(900e6)
			if a, _ := e.addr(leased); a.State != AddrTentative && tc.want != AddrDuplicate {
				t.Errorf("0.9 s after the probe: %v, want still tentative", a.State)
			}
			e.after(200e6)
			a, ok := e.addr(leased)
			if !ok || a.State != tc.want || a.Origin != OriginDHCPv6 || a.Preferred != e0+3600 || a.Valid != e0+7200 {
				t.Fatalf("1.1 s after the probe: %+v (listed %v), want %v from DHCPv6 with its lifetimes", a, ok, tc.want)
			}
			if got := e.r.Stats().DADFailures; got != tc.failures {
				t.Errorf("DADFailures = %d, want %d", got, tc.failures)
			}
			res := e.handle(wanPort, ns)
			inUse := slices.Contains(e.r.Addrs(WAN), netip.AddrFrom16(leased))
			if tc.want == AddrDuplicate {
				if res.Action == routing.Reply || inUse {
					t.Errorf("duplicate: NS %v, in Addrs(WAN) %v; want never answered or used", res.Action, inUse)
				}
				if n := len(e.events); n == 0 || e.events[n-1].State != AddrDuplicate || e.events[n-1].Retry {
					t.Errorf("events %+v, want the duplicate reported last (no retry for DHCPv6)", e.events)
				}
				return
			}
			if res.Action != routing.Reply || !inUse {
				t.Fatalf("preferred: NS %v/%v, in Addrs(WAN) %v; want an NA", res.Action, res.Reason, inUse)
			}
			f := parse(t, res.Frame)
			if body := res.Frame[f.L4Off:f.L3End]; f.IPv6.Src != leased || !bytes.Equal(body[8:24], leased[:]) || !bytes.Equal(body[26:32], wanMAC[:]) {
				t.Errorf("NA %x, want one for %x with the WAN MAC", body, leased)
			}
			if res := e.handle(wanPort, echo); res.Action != routing.Reply || parse(t, res.Frame).IPv6.Src != leased {
				t.Errorf("echo request: %v/%v, want a reply from %x", res.Action, res.Reason, leased)
			}
			if res := e.handle(wanPort, naFor(leased)); res.Action == routing.Reply {
				t.Errorf("an NA for the preferred address: %v", res.Action)
			}
			if a, _ := e.addr(leased); a.State != AddrPreferred {
				t.Errorf("an NA after DAD made it %v; want it kept", a.State)
			}
		})
	}
}

// e0 is newEnv's clock in seconds.
const e0 = 1_000_000

// TestDADWaitsForTheProbe: DAD does not pass before its probe went out.
func TestDADWaitsForTheProbe(t *testing.T) {
	e := newWANEnv(t, false, Leased{netip.AddrFrom16(leased), Forever, Forever})
	e.now += 5e9
	e.r.Maintain(e.now)
	if a, _ := e.addr(leased); a.State != AddrTentative {
		t.Fatalf("5 s without a worker's tick: %v, want tentative", a.State)
	}
	e.tick()
	e.after(1e9)
	if a, _ := e.addr(leased); a.State != AddrPreferred {
		t.Errorf("1 s after the probe: %v, want preferred", a.State)
	}
}

// TestLeased: leased addresses follow the lease: lifetimes, deprecated
// past the preferred one, removed when the lease drops them or their
// valid lifetime ends; a duplicate stays listed until then, or until
// DHCPv6 is turned off.
func TestLeased(t *testing.T) {
	other := a6("2001:db8:64::101")
	e := newWANEnv(t, false, Leased{netip.AddrFrom16(leased), e0 + 10, e0 + 20}, Leased{netip.AddrFrom16(other), e0 + 100, e0 + 200})
	e.tick()
	e.handle(wanPort, naFor(other))
	e.after(2e9)
	if a, _ := e.addr(other); a.State != AddrDuplicate {
		t.Fatalf("%x after an NA: %v, want duplicate", other, a.State)
	}
	if got := e.r.Addrs(WAN); !slices.Equal(got, []netip.Addr{netip.AddrFrom16(wanLL), netip.AddrFrom16(leased)}) {
		t.Errorf("Addrs(WAN) = %v, want the link-local and %x", got, leased)
	}
	e.after(9e9)
	if a, _ := e.addr(leased); a.State != AddrDeprecated || !slices.Contains(e.r.Addrs(WAN), netip.AddrFrom16(leased)) {
		t.Errorf("past its preferred lifetime: %v, want deprecated and still in use", a.State)
	}
	// The client renews it, and declined the duplicate: it is gone from
	// the lease but still listed.
	e.set(false, Leased{netip.AddrFrom16(leased), e.sec() + 100, e.sec() + 200})
	if a, _ := e.addr(leased); a.State != AddrPreferred {
		t.Errorf("renewed: %v, want preferred again", a.State)
	}
	if a, ok := e.addr(other); !ok || a.State != AddrDuplicate {
		t.Errorf("the declined duplicate: %+v (listed %v), want it listed as a duplicate", a, ok)
	}
	e.set(false)
	if _, ok := e.addr(leased); ok || slices.Contains(e.r.Addrs(WAN), netip.AddrFrom16(leased)) {
		t.Errorf("dropped by the lease: still listed or in use")
	}
	// The server leases the duplicate again: probed again.
	e.set(false, Leased{netip.AddrFrom16(other), e.sec() + 100, e.sec() + 200})
	if a, _ := e.addr(other); a.State != AddrTentative {
		t.Errorf("leased again: %v, want tentative (probed again)", a.State)
	}
	e.after(2e9)
	if a, _ := e.addr(other); a.State != AddrPreferred {
		t.Errorf("leased again, no conflict: %v, want preferred", a.State)
	}
	e.after(201e9)
	if _, ok := e.addr(other); ok {
		t.Errorf("past its valid lifetime: still listed")
	}
	var states []string
	for _, ev := range e.events {
		states = append(states, netip.AddrFrom16(ev.Addr.As16()).String()+" "+ev.State.String())
	}
	want := []string{"2001:db8:64::100 tentative", "2001:db8:64::101 tentative", "2001:db8:64::101 duplicate",
		"2001:db8:64::100 preferred", "2001:db8:64::100 deprecated", "2001:db8:64::100 preferred", "2001:db8:64::100 removed",
		"2001:db8:64::101 tentative", "2001:db8:64::101 preferred", "2001:db8:64::101 deprecated", "2001:db8:64::101 removed"}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// DHCPv6 turned off: every leased address goes, a declined one too.
	e.set(false, Leased{netip.AddrFrom16(leased), e.sec() + 100, e.sec() + 200})
	e.handle(wanPort, naFor(leased))
	e.after(2e9)
	if a, _ := e.addr(leased); a.State != AddrDuplicate {
		t.Fatalf("%x after an NA: %v, want duplicate", leased, a.State)
	}
	if err := e.r.SetWANAddressing(WANAddressing{Leased: []Leased{{netip.AddrFrom16(leased), Forever, Forever}}}, e.now); err != nil {
		t.Fatal(err)
	}
	if n := len(e.r.WANAddrs()); n != 1 {
		t.Errorf("DHCPv6 off: %d addresses, want the link-local one only", n)
	}
}

// TestRouterSolicitation: once the link-local address passed DAD the WAN
// solicits routers: an RS from it to all routers with its link-layer
// address, at most 3, 4 s apart, none after an RA.
func TestRouterSolicitation(t *testing.T) {
	count := func(out []outFrame) (rs []outFrame) {
		for _, o := range out {
			if f := parse(t, o.b); f.IsICMP() && f.ICMP.Type == icmpRS {
				rs = append(rs, o)
			}
		}
		return rs
	}
	r, err := New(testConfig(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := &wanEnv{env: &env{t: t, r: r, w: r.NewWorker(nil), now: 5000 * 1e9}}
	if rs := count(e.tick()); len(rs) != 0 {
		t.Fatalf("while the link-local address is tentative: %d RS", len(rs))
	}
	rs := count(e.after(1e9 + 250e6))
	if len(rs) != 1 || rs[0].port != wanPort {
		t.Fatalf("after DAD: %d RS, want one on the WAN", len(rs))
	}
	f := parse(t, rs[0].b)
	msg := rs[0].b[f.L4Off:f.L3End]
	if f.IPv6.Src != wanLL || f.IPv6.Dst != a6("ff02::2") || f.Dst != [6]byte{0x33, 0x33, 0, 0, 0, 2} || f.IPv6.HopLimit != 255 ||
		len(msg) != 16 || msg[8] != optSLLA || !bytes.Equal(msg[10:16], wanMAC[:]) {
		t.Errorf("RS %x from %x to %x, want from the WAN link-local to ff02::2 with the WAN MAC", msg, f.IPv6.Src, f.IPv6.Dst)
	}
	if rs := count(e.after(30e9)); len(rs) != 2 {
		t.Errorf("30 s without an RA: %d more RS, want 2 (3 in all)", len(rs))
	}
	e2 := newWANEnv(t, false) // settled: its first RS went out
	e2.handle(wanPort, raFrame())
	if rs := count(e2.after(30e9)); len(rs) != 0 || e2.r.Stats().RS != 1 {
		t.Errorf("after an RA: %d more RS (%d in all), want none", len(rs), e2.r.Stats().RS)
	}
}

// TestWANAllocs: an RA refreshing a prefix, a probe's NA and the Tick
// that sends probes allocate nothing.
func TestWANAllocs(t *testing.T) {
	e := newWANEnv(t, true)
	ra := raFrame(pio("2001:db8:64::", 64, 0xc0, 7200, 3600))
	e.handle(wanPort, ra)
	e.r.Maintain(e.now)
	var f frame.Frame
	if n := testing.AllocsPerRun(100, func() {
		frame.Parse(ra, &f)
		e.w.Process(e.now, wanPort, ra, &f)
	}); n != 0 {
		t.Errorf("an RA: %v allocations, want 0", n)
	}
	addr := e.r.WANAddrs()[1].Addr.As16()
	na := naFor(a6("2001:db8:64::77"))
	if n := testing.AllocsPerRun(100, func() {
		frame.Parse(na, &f)
		e.w.Process(e.now, wanPort, na, &f)
		e.r.wan.mu.Lock()
		for i := range e.r.wan.e {
			if e.r.wan.e[i].addr == addr {
				e.r.wan.e[i].sendNS = true
			}
		}
		e.r.wan.due.Store(true)
		e.r.wan.mu.Unlock()
		e.w.Tick(e.now)
	}); n != 0 {
		t.Errorf("an NA while tentative and a Tick with a probe: %v allocations, want 0", n)
	}
	if a, _ := e.addr(addr); a.State != AddrTentative {
		t.Errorf("the address is %v, want still tentative (the NA was for another)", a.State)
	}
}
