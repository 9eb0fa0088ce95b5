package dhcp6c

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/internal/keatest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// lab is an "isp" namespace whose veth s0 runs kea-dhcp6 and a "box"
// namespace whose veth c0 (the kernel answers neighbour solicitations for
// its link-local address, the client's source) the client runs in.
type lab struct {
	isp, box *netnstest.Namespace
	dir      string
	kea      *keatest.Server
}

// ispConfig delegates /56s from pool (a /48) with short timers: T1 1 s,
// T2 2 s, preferred 3 s, valid 4 s.
func ispConfig(pool string) keatest.Config {
	return keatest.Config{
		Iface: "s0", Subnet: netip.MustParsePrefix("2001:db8:86::/64"), Addrs: "2001:db8:86::100-2001:db8:86::1ff",
		PDPool: netip.MustParsePrefix(pool), DelegatedLen: 56,
		T1: 1, T2: 2, Preferred: 3, Valid: 4,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8:86::53")}, Domains: []string{"isp.example"},
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	testenv.Require(t, "root", "ip", "kea-dhcp6")
	l := newLink(t)
	l.kea = keatest.Start(t, l.isp, filepath.Join(l.dir, "kea"), ispConfig("2001:db8:8600::/48"))
	return l
}

// newLink is the lab's two namespaces and their veths, with no server.
func newLink(t *testing.T) *lab {
	t.Helper()
	l := &lab{isp: netnstest.New(t, "ipv6-isp"), box: netnstest.New(t, "ipv6-box"), dir: t.TempDir()}
	for _, ns := range []*netnstest.Namespace{l.isp, l.box} {
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		ns.IP(t, "link", "set", "lo", "up")
	}
	netnstest.Veth(t,
		netnstest.End{NS: l.isp, Name: "s0", MAC: ispMAC.String(), Addrs: []string{"2001:db8:86::1/64"}, Up: true},
		netnstest.End{NS: l.box, Name: "c0", MAC: boxMAC.String(), Up: true})
	return l
}

// runClient runs a client in the box namespace until the test ends or
// stop is called; its changes arrive on the channel.
func (l *lab) runClient(t *testing.T, cfg Config) (*Client, <-chan change, func()) {
	t.Helper()
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, stop := l.run(t, c)
	return c, ch, stop
}

// run runs c as runClient does.
func (l *lab) run(t *testing.T, c *Client) (<-chan change, func()) {
	t.Helper()
	ch := make(chan change, 16)
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.box.Go(t, func() {
		onChange := func(old, new *Lease) {
			select {
			case ch <- change{old, new}:
			case <-ctx.Done(): // stopped: nobody reads
			}
		}
		if err := c.Run(ctx, onChange); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	stop := func() { cancel(); wait() }
	t.Cleanup(stop)
	return ch, stop
}

func prefixes(l *Lease) []netip.Prefix {
	if l == nil {
		return nil
	}
	var ps []netip.Prefix
	for _, p := range l.Prefixes {
		ps = append(ps, p.Prefix)
	}
	return ps
}

// TestNetnsKea: the client against Kea: a /56 (and an address) with DNS,
// renewals that change nothing, the ISP moving the delegation to another
// pool, a restart that rebinds the kept lease with the same DUID, and
// expiry once the server is gone.
func TestNetnsKea(t *testing.T) {
	l := newLab(t)
	state := filepath.Join(l.dir, "state")
	cfg := Config{Interface: "c0", MAC: boxMAC, StateDir: state, PrefixLength: 56, Address: true}
	c, ch, stop := l.runClient(t, cfg)

	first := next(t, ch, 10*time.Second)
	if first.old != nil || first.new == nil {
		t.Fatalf("first change %+v, want a new binding", first)
	}
	pool := netip.MustParsePrefix("2001:db8:8600::/48")
	got := first.new
	if len(got.Prefixes) != 1 || got.Prefixes[0].Prefix.Bits() != 56 || !pool.Contains(got.Prefixes[0].Prefix.Addr()) {
		t.Fatalf("prefixes %v, want one /56 of %v", prefixes(got), pool)
	}
	if len(got.Addrs) != 1 || !netip.MustParsePrefix("2001:db8:86::/64").Contains(got.Addrs[0].Addr) {
		t.Errorf("addresses %+v, want one in the subnet", got.Addrs)
	}
	if len(got.DNS) != 1 || got.DNS[0] != netip.MustParseAddr("2001:db8:86::53") || strings.Join(got.Domains, ",") != "isp.example" {
		t.Errorf("DNS %v domains %v, want 2001:db8:86::53 and isp.example", got.DNS, got.Domains)
	}
	if got.Server != LinkLocal(ispMAC) || got.ServerMAC.String() != ispMAC.String() {
		t.Errorf("server %v at %v, want %v at %v", got.Server, got.ServerMAC, LinkLocal(ispMAC), ispMAC)
	}
	delegated := got.Prefixes[0].Prefix
	if !strings.Contains(l.kea.Leases(), delegated.Addr().String()) {
		t.Errorf("kea's lease file has no %v:\n%s", delegated, l.kea.Leases())
	}

	// Renewals at T1 (1 s) keep the binding: no change, lifetimes move on.
	netnstest.WaitFor(t, 8*time.Second, "two renewals answered", func() bool {
		s := c.Stats()
		return s.Sent["RENEW"] >= 2 && s.Received["REPLY"] >= 3 && s.State == "bound"
	})
	if cur := c.Current(); cur == nil || len(cur.Prefixes) != 1 || cur.Prefixes[0].Prefix != delegated ||
		!cur.Prefixes[0].Valid.After(got.Prefixes[0].Valid) {
		t.Errorf("after renewals %+v, want %v with a later valid lifetime than %v", cur, delegated, got.Prefixes[0].Valid)
	}
	select {
	case c := <-ch:
		t.Errorf("renewals changed the binding: %v -> %v", prefixes(c.old), prefixes(c.new))
	default:
	}

	// The ISP renumbers: the old prefix comes back with lifetime 0 at the
	// next renewal and a new one from the new pool replaces it.
	l.kea.Reconfigure(ispConfig("2001:db8:8700::/48"))
	moved := next(t, ch, 10*time.Second)
	newPool := netip.MustParsePrefix("2001:db8:8700::/48")
	if ps := prefixes(moved.new); len(ps) != 1 || !newPool.Contains(ps[0].Addr()) || ps[0].Bits() != 56 {
		t.Fatalf("after renumbering: %v -> %v, want one /56 of %v", prefixes(moved.old), ps, newPool)
	}
	if ps := prefixes(moved.old); len(ps) != 1 || ps[0] != delegated {
		t.Errorf("the change's old binding %v, want %v", ps, delegated)
	}

	// Restart: the kept lease is announced at once and rebound; the DUID
	// is the same.
	stop()
	duid := c.DUID()
	c2, ch2, stop2 := l.runClient(t, cfg)
	if string(c2.DUID()) != string(duid) {
		t.Errorf("DUID after restart %x, want %x", c2.DUID(), duid)
	}
	kept := next(t, ch2, 2*time.Second)
	if kept.old != nil || len(kept.new.Prefixes) != 1 || kept.new.Prefixes[0].Prefix != moved.new.Prefixes[0].Prefix {
		t.Fatalf("after restart: %+v, want the kept %v", kept, prefixes(moved.new))
	}
	netnstest.WaitFor(t, 5*time.Second, "the kept lease rebound", func() bool {
		s := c2.Stats()
		return s.Sent["REBIND"] >= 1 && s.Received["REPLY"] >= 1 && s.State == "bound"
	})
	if p := prefixes(c2.Current()); len(p) != 1 || p[0] != moved.new.Prefixes[0].Prefix {
		t.Errorf("rebound %v, want %v", p, prefixes(moved.new))
	}

	// The server goes away: at the end of the valid lifetime (4 s) the
	// binding ends and the lease file is gone.
	l.kea.Stop()
	gone := next(t, ch2, 10*time.Second)
	if gone.new != nil {
		t.Fatalf("with the server gone: %v -> %v, want the binding to end", prefixes(gone.old), prefixes(gone.new))
	}
	stop2()
	if _, err := os.Stat(filepath.Join(state, leaseFile)); !os.IsNotExist(err) {
		t.Errorf("lease file after expiry: %v, want none", err)
	}
	if s := c2.Stats(); s.Sent["SOLICIT"] == 0 {
		t.Errorf("stats %+v: no SOLICIT after expiry", s)
	}
}

// TestNetnsIngressDrop: on the dataplane's WAN port the kernel's stack gets
// no frames (ingressdrop's tcx program drops them, or demotes them for the
// rings bound behind it when the fast path runs): the client, whose socket
// is bound to IPv6 behind tcx, still gets its binding from Kea under
// either program. The ISP side knows the client's link-local neighbour
// statically: the box's kernel answers no solicitation behind the program
// (the dataplane does on a real box).
func TestNetnsIngressDrop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(string, uint16) (*ingressdrop.Drop, error)
	}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			l.isp.IP(t, "-6", "neigh", "replace", LinkLocal(boxMAC).String(), "lladdr", boxMAC.String(), "dev", "s0", "nud", "permanent")
			l.box.Do(t, func() {
				d, err := tc.attach("c0", 0)
				if err != nil {
					t.Fatalf("ingressdrop on c0: %v", err)
				}
				t.Cleanup(func() { d.Close() })
			})
			_, ch, _ := l.runClient(t, Config{Interface: "c0", MAC: boxMAC, StateDir: filepath.Join(l.dir, "state"), PrefixLength: 56})
			if first := next(t, ch, 10*time.Second); first.new == nil || len(first.new.Prefixes) != 1 {
				t.Fatalf("first change %+v behind ingressdrop's %s, want a delegated prefix", first, tc.name)
			}
		})
	}
}
