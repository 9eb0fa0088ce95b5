package dataplane

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/internal/netnstest"
	"e1kbox/rules"
)

// The differential test of the fast path: the same traffic through an
// engine with the fast path and one without, compared byte for byte at
// both ends, with the counters, the connection table and the rules'
// counters.

// fpRun is what one engine made of the traffic.
type fpRun struct {
	at1, at2 []string // hex frames received by h1 and h2, sorted
	ports    []PortStats
	conns    []Conn
	counters []rules.RuleCounter
	policy   uint64
	fast     *FastPathStats
	// IPv6 runs (fastpath6_netns_linux_test.go).
	v6conns []v6Conn
	v6stats route6.Stats
	v6flows int
}

// sortedHex returns the frames as sorted hex strings (the fast path may
// overtake a frame it leaves to the rings: the test compares multisets).
func sortedHex(frames [][]byte) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = hex.EncodeToString(f)
	}
	slices.Sort(out)
	return out
}

// quietTopo is newTopo with the hosts' kernels silent on IPv6 (no
// router solicitations or MLD reports in the captures).
func quietTopo(t *testing.T) *topo {
	tp := newTopo(t, 2)
	for _, h := range tp.hosts {
		h.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv6.conf.eth0.disable_ipv6=1")
	}
	// The router's MACs are the ports': the same in every run.
	tp.box.IP(t, "link", "set", "p1", "address", "02:fa:00:00:01:01")
	tp.box.IP(t, "link", "set", "p2", "address", "02:fa:00:00:01:02")
	return tp
}

// linkMAC returns the MAC of interface name in ns.
func linkMAC(t *testing.T, ns *netnstest.Namespace, name string) [6]byte {
	t.Helper()
	var m [6]byte
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		copy(m[:], ifi.HardwareAddr)
	})
	return m
}

// waitFast waits until the fast path holds n flows (pairs plus NAT flows,
// IPv6 flows and microflows), when it runs.
func waitFast(t *testing.T, e *Engine, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d flows in the fast path", n), func() (bool, string) {
		fs := e.Snapshot().FastPath
		return fs == nil || fs.Mode == "off" || fs.Pairs+fs.NATFlows+fs.IPv6Flows+fs.Microflows >= n, fmt.Sprintf("%+v", fs)
	})
}

// compareRuns compares runs with the fast path (each of on) to the run
// without it.
func compareRuns(t *testing.T, off fpRun, on map[FastPathMode]fpRun) {
	t.Helper()
	// Where the rings sit (AfterTCX) follows the fast path's mode
	// (testEngineNAT checks it); what they forward must not.
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		s := p.String()
		return strings.HasSuffix(s, "Ring") || strings.HasSuffix(s, "ExpiresIn") || strings.HasSuffix(s, "AfterTCX")
	}, cmp.Ignore())
	for mode, r := range on {
		if diff := cmp.Diff(off.at1, r.at1); diff != "" {
			t.Errorf("%s: frames received by h1 (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.at2, r.at2); diff != "" {
			t.Errorf("%s: frames received by h2 (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.ports, r.ports, ignore); diff != "" {
			t.Errorf("%s: port counters (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if diff := cmp.Diff(off.conns, r.conns, ignore, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
			t.Errorf("%s: connections (-slow path only +with the fast path):\n%s", mode, diff)
		}
		for i := range min(len(off.conns), len(r.conns)) {
			if d := off.conns[i].ExpiresIn - r.conns[i].ExpiresIn; d > Duration(time.Second) || d < -Duration(time.Second) {
				t.Errorf("%s: connection %d expires in %v, %v without the fast path", mode, i, r.conns[i].ExpiresIn, off.conns[i].ExpiresIn)
			}
		}
		if diff := cmp.Diff(off.counters, r.counters, cmp.FilterPath(func(p cmp.Path) bool {
			return strings.HasSuffix(p.String(), "LastHit")
		}, cmp.Ignore())); diff != "" {
			t.Errorf("%s: rule counters (-slow path only +with the fast path):\n%s", mode, diff)
		}
		if off.policy != r.policy {
			t.Errorf("%s: forward policy counted %d frames, %d without the fast path", mode, r.policy, off.policy)
		}
		if r.fast == nil || r.fast.Mode != string(mode) || r.fast.Packets == 0 {
			t.Errorf("%s: the fast path forwarded nothing: %+v", mode, r.fast)
		} else {
			t.Logf("%s: fast path forwarded %d frames; %d installed, punts %v", mode, r.fast.Packets, r.fast.Installed, r.fast.Punts)
		}
	}
	if off.fast == nil || off.fast.Mode != "off" {
		t.Errorf("the fast path ran in the run without it: %+v", off.fast)
	}
}

// collect reads an engine's results after the traffic, which ended at
// end: the connections' expiries are as of end, not of the listing,
// whose time varies with the waits before it on a busy machine (the
// runs' expiries are compared within a second).
func collect(t *testing.T, e *Engine, h1, h2 *netnstest.Packets, end time.Time) fpRun {
	t.Helper()
	h1.Wait(300*time.Millisecond, 3*time.Second)
	e.SyncFastPath() // as the API does before it lists counters
	s := e.Snapshot()
	r := fpRun{at1: sortedHex(h1.Frames()), at2: sortedHex(h2.Frames()), fast: s.FastPath}
	for _, p := range s.Ports {
		p.Ring = RingStats{}
		r.ports = append(r.ports, p)
	}
	_, r.counters = e.Rules().Counters()
	r.policy, _ = e.Rules().PolicyCounter(rules.Forward)
	if e.NAT() != nil {
		page, err := listConnsAt(e.NAT(), ConnFilter{}, 0, 0, end.UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		r.conns = page.Conns
		for i := range r.conns {
			r.conns[i].ID, r.conns[i].Created = 0, time.Time{}
		}
		// A total order: the table lists its connections in slot order,
		// and its free slots are taken at random.
		slices.SortFunc(r.conns, func(a, b Conn) int {
			if c := strings.Compare(a.Proto, b.Proto); c != 0 {
				return c
			}
			if c := strings.Compare(a.Orig.Src.String(), b.Orig.Src.String()); c != 0 {
				return c
			}
			return strings.Compare(a.Orig.Dst.String(), b.Orig.Dst.String())
		})
	}
	return r
}

// blast returns n frames made from good by random damage: truncated,
// bytes flipped in the headers, lengths and checksums wrong.
func blast(r *rand.Rand, good [][]byte, n int) [][]byte {
	out := make([][]byte, 0, n)
	for range n {
		b := slices.Clone(good[r.IntN(len(good))])
		switch r.IntN(4) {
		case 0: // truncated
			b = b[:14+r.IntN(len(b)-14)]
		case 1: // a header byte
			b[14+r.IntN(min(40, len(b)-14))] ^= byte(1 << r.IntN(8))
		case 2: // the IPv4 total length or the UDP length
			at := []int{16, 17, 38, 39}[r.IntN(4)]
			if at < len(b) {
				b[at] = byte(r.Uint32())
			}
		default: // two damages
			b[14+r.IntN(min(40, len(b)-14))] = byte(r.Uint32())
			b[14+r.IntN(min(40, len(b)-14))] = byte(r.Uint32())
		}
		if len(b) < 60 && r.IntN(2) == 0 {
			b = frametest.Pad(b)
		}
		out = append(out, b)
	}
	return out
}
