package route6

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/routing"
)

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
