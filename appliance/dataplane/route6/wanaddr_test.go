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

// TestSLAAC: a prefix information option with the A flag and a /64 forms
// an address with an RFC 7217 identifier and the advertised lifetimes;
// the other options are ignored.
func TestSLAAC(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  []byte
		want bool
	}{
		{"A flag, /64", pio("2001:db8:64::", 64, 0xc0, 7200, 3600), true},
		{"A flag only (off-link)", pio("2001:db8:64::", 64, 0x40, 7200, 3600), true},
		{"A flag off", pio("2001:db8:64::", 64, 0x80, 7200, 3600), false},
		{"a /56", pio("2001:db8:64::", 56, 0xc0, 7200, 3600), false},
		{"a /80", pio("2001:db8:64::", 80, 0xc0, 7200, 3600), false},
		{"link-local", pio("fe80::", 64, 0xc0, 7200, 3600), false},
		{"preferred above valid", pio("2001:db8:64::", 64, 0xc0, 3600, 7200), false},
		{"valid 0", pio("2001:db8:64::", 64, 0xc0, 0, 0), false},
		{"multicast", pio("ff02::", 64, 0xc0, 7200, 3600), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWANEnv(t, true)
			if res := e.handle(wanPort, raFrame(tc.opt)); res.Action != routing.ToHost {
				t.Fatalf("RA: %v/%v", res.Action, res.Reason)
			}
			out := e.tick()
			a, ok := e.addr(func() [16]byte { x, _ := stableAddr(secret, "wan0", ispNet, 0); return x }())
			if !tc.want {
				if len(e.r.WANAddrs()) != 1 || len(out) != 0 {
					t.Errorf("addresses %+v, frames %d; want only the link-local one, no probe", e.r.WANAddrs(), len(out))
				}
				return
			}
			want := WANAddr{Addr: a.Addr, Origin: OriginSLAAC, State: AddrTentative, Preferred: e0 + 3600, Valid: e0 + 7200,
				Prefix: netip.MustParsePrefix("2001:db8:64::/64")}
			if diff := cmp.Diff(want, a, addrCmp); !ok || diff != "" {
				t.Fatalf("SLAAC address (listed %v) (-want +got):\n%s", ok, diff)
			}
			if len(out) != 1 || !bytes.Equal(out[0].b[len(out[0].b)-16:], a.Addr.AsSlice()) {
				t.Errorf("frames %v, want its probe", out)
			}
			e.after(1e9)
			if a, _ := e.addr(a.Addr.As16()); a.State != AddrPreferred || !slices.Contains(e.r.Addrs(WAN), a.Addr) {
				t.Errorf("after DAD: %v, want preferred and in use", a.State)
			}
		})
	}
}

// TestSLAACLifetimes: later RAs refresh the lifetimes, the valid one by
// RFC 4862 5.5.3 e's two-hour rule; preferred lifetime 0 deprecates,
// valid lifetime over removes; infinite lifetimes never end.
func TestSLAACLifetimes(t *testing.T) {
	e := newWANEnv(t, true)
	ra := func(valid, pref uint32) { e.handle(wanPort, raFrame(pio("2001:db8:64::", 64, 0xc0, valid, pref))) }
	ra(3*3600, 3600)
	e.after(2e9)
	addr, _ := stableAddr(secret, "wan0", ispNet, 0)
	for _, tc := range []struct {
		name         string
		valid, pref  uint32
		wantV, wantP uint32 // from now
		wantState    AddrState
		wantForever  bool
	}{
		{"valid 1 h, 3 h left: cut to 2 h", 3600, 1800, 7200, 1800, AddrPreferred, false},
		{"valid 30 min, under 2 h left: kept", 1800, 1800, 7190, 1800, AddrPreferred, false},
		{"valid 10 h: taken", 36000, 3600, 36000, 3600, AddrPreferred, false},
		{"valid 3 h, 10 h left: taken (above 2 h)", 3 * 3600, 3600, 3 * 3600, 3600, AddrPreferred, false},
		{"valid 0, 10 h left: cut to 2 h", 0, 0, 7200, 0, AddrDeprecated, false},
		{"valid 3 h, preferred 1 h: preferred again", 3 * 3600, 3600, 3 * 3600, 3600, AddrPreferred, false},
		{"infinite", Forever, Forever, 0, 0, AddrPreferred, true},
		{"valid 1 h while infinite: cut to 2 h", 3600, 3600, 7200, 3600, AddrPreferred, false},
	} {
		e.now += 10e9
		ra(tc.valid, tc.pref)
		e.tick()
		a, ok := e.addr(addr)
		wantV, wantP := e.sec()+tc.wantV, e.sec()+tc.wantP
		if tc.wantForever {
			wantV, wantP = Forever, Forever
		}
		if !ok || a.Valid != wantV || a.Preferred != wantP || a.State != tc.wantState {
			t.Errorf("%s: valid %+d preferred %+d %v (listed %v), want %+d %+d %v", tc.name, int64(a.Valid)-int64(e.sec()),
				int64(a.Preferred)-int64(e.sec()), a.State, ok, tc.wantV, tc.wantP, tc.wantState)
		}
	}
	e.after(7201e9)
	if _, ok := e.addr(addr); ok || len(e.r.Addrs(WAN)) != 1 {
		t.Errorf("past its valid lifetime: listed %v, in use %v; want gone", ok, e.r.Addrs(WAN))
	}
	if n := len(e.events); n == 0 || e.events[n-1].State != AddrRemoved || e.events[n-1].Origin != OriginSLAAC {
		t.Errorf("events %+v, want the SLAAC address removed last", e.events)
	}
}

// TestSLAACDuplicate: a SLAAC address found duplicate is replaced by the
// next DAD counter's; after IDGEN_RETRIES (3) more the prefix is given up.
func TestSLAACDuplicate(t *testing.T) {
	e := newWANEnv(t, true)
	e.handle(wanPort, raFrame(pio("2001:db8:64::", 64, 0xc0, 7200, 3600)))
	var seen []netip.Addr
	for counter := range 4 {
		e.tick()
		want, _ := stableAddr(secret, "wan0", ispNet, uint8(counter))
		a, ok := e.addr(want)
		if !ok || a.State != AddrTentative || a.DADCounter != counter {
			t.Fatalf("try %d: %+v (listed %v), want %x tentative with DAD counter %d", counter, a, ok, want, counter)
		}
		if slices.Contains(seen, a.Addr) {
			t.Fatalf("try %d: %v again", counter, a.Addr)
		}
		seen = append(seen, a.Addr)
		if res := e.handle(wanPort, naFor(want)); res.Action != routing.Consumed {
			t.Fatalf("try %d: the NA %v/%v", counter, res.Action, res.Reason)
		}
		e.r.Maintain(e.now)
	}
	e.after(5e9)
	all := e.r.WANAddrs()
	if len(all) != 2 || all[1].State != AddrDuplicate || all[1].DADCounter != 3 || len(e.r.Addrs(WAN)) != 1 {
		t.Errorf("after 4 conflicts: %+v, in use %v; want the prefix given up (duplicate, counter 3)", all, e.r.Addrs(WAN))
	}
	var retries, final int
	for _, ev := range e.events {
		if ev.State == AddrDuplicate && ev.Retry {
			retries++
		} else if ev.State == AddrDuplicate {
			final++
		}
	}
	if retries != 3 || final != 1 || e.r.Stats().DADFailures != 4 {
		t.Errorf("%d retries, %d final duplicates, %d DAD failures; want 3, 1, 4", retries, final, e.r.Stats().DADFailures)
	}
}

// TestSLAACOff: prefixes are learnt with SLAAC off and form addresses when
// it is turned on; turned off again, the addresses go.
func TestSLAACOff(t *testing.T) {
	e := newWANEnv(t, false)
	e.handle(wanPort, raFrame(pio("2001:db8:64::", 64, 0xc0, 7200, 3600)))
	e.after(2e9)
	if n := len(e.r.WANAddrs()); n != 1 {
		t.Fatalf("SLAAC off: %d addresses, want the link-local one", n)
	}
	e.set(true)
	e.tick()
	e.after(1e9)
	addr, _ := stableAddr(secret, "wan0", ispNet, 0)
	if a, ok := e.addr(addr); !ok || a.State != AddrPreferred || a.Valid != e0+7200 {
		t.Fatalf("SLAAC on: %+v (listed %v), want %x preferred with the RA's lifetime", a, ok, addr)
	}
	e.set(false)
	if _, ok := e.addr(addr); ok || len(e.r.Addrs(WAN)) != 1 {
		t.Errorf("SLAAC off again: still listed or used")
	}
}

// TestStableAddr: RFC 7217 identifiers are the same for the same inputs
// (across restarts: a new router with the same secret forms the same
// address) and differ with the DAD counter, the prefix, the interface and
// the secret; reserved identifiers are skipped.
func TestStableAddr(t *testing.T) {
	base, c := stableAddr(secret, "wan0", ispNet, 0)
	if c != 0 || [8]byte(base[:8]) != ispNet || base == [16]byte(append(ispNet[:], make([]byte, 8)...)) {
		t.Fatalf("stableAddr = %x counter %d, want an address in the prefix with counter 0", base, c)
	}
	other := ispNet
	other[7] = 1
	for name, got := range map[string][16]byte{
		"counter 1": func() [16]byte { a, _ := stableAddr(secret, "wan0", ispNet, 1); return a }(),
		"counter 2": func() [16]byte { a, _ := stableAddr(secret, "wan0", ispNet, 2); return a }(),
		"prefix":    func() [16]byte { a, _ := stableAddr(secret, "wan0", other, 0); return a }(),
		"interface": func() [16]byte { a, _ := stableAddr(secret, "wan1", ispNet, 0); return a }(),
		"secret": func() [16]byte {
			a, _ := stableAddr([]byte("another secret of 16+ bytes"), "wan0", ispNet, 0)
			return a
		}(),
	} {
		if [8]byte(got[8:]) == [8]byte(base[8:]) {
			t.Errorf("%s: the same identifier %x", name, got[8:])
		}
	}
	// A restart: another router, the same secret, the same address.
	for range 2 {
		e := newWANEnv(t, true)
		e.handle(wanPort, raFrame(pio("2001:db8:64::", 64, 0xc0, 7200, 3600)))
		e.tick()
		if _, ok := e.addr(base); !ok {
			t.Errorf("a new router formed %+v, want %x", e.r.WANAddrs(), base)
		}
	}
	for _, tc := range []struct {
		iid  uint64
		want bool
	}{
		{0, true}, {1, false}, {0x02005efffe000000, true}, {0x02005efffe005213, true}, {0x02005efffeffffff, true},
		{0x02005eff00000000, false}, {0xfdffffffffffff7f, false}, {0xfdffffffffffff80, true}, {0xffffffffffffffff, true},
	} {
		if got := reservedIID(tc.iid); got != tc.want {
			t.Errorf("reservedIID(%016x) = %v, want %v", tc.iid, got, tc.want)
		}
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
