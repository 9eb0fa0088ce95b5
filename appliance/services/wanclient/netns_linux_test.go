package wanclient

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/services/dhcpclient"
)

// TestNetnsDnsmasq runs the client against Debian's dnsmasq as the ISP's
// DHCP server, on an interface without any IPv4 address: lease, renewal,
// INIT-REBOOT after a restart, expiry with the server gone, a new address
// from a new range, release.
//
// dnsmasq's shortest lease is 2 minutes (it raises the range's 30s to
// 2m), but it sends T1 and T2 as told: 5 s and 10 s, so renewals happen in
// real time. The expiry phase runs its client on a clock 8 times faster
// than real time, so that the 120 s lease ends 15 s after the server went
// away; everything on the wire is real.
func TestNetnsDnsmasq(t *testing.T) {
	l := newLab(t)
	l.startDnsmasq("10.80.0.100", "10.80.0.150")
	cfg := Config{Interface: "c0", MAC: boxMAC, Hostname: "e1kbox-test", LeaseFile: filepath.Join(l.dir, "perm", "wan.lease")}
	inRange := func(a netip.Addr, from, to string) bool {
		return a.Compare(netip.MustParseAddr(from)) >= 0 && a.Compare(netip.MustParseAddr(to)) <= 0
	}
	var first *Lease

	t.Run("lease", func(t *testing.T) {
		b := l.startClient(cfg, nil)
		ch := b.change(t, 20*time.Second)
		took := time.Since(b.started)
		t.Logf("time to lease: %v", took)
		first = ch.new
		if ch.old != nil || first == nil {
			t.Fatalf("onChange(%v, %v), want (nil, lease)", ch.old, ch.new)
		}
		if !inRange(first.Addr.Addr(), "10.80.0.100", "10.80.0.150") || first.Addr.Bits() != 24 {
			t.Errorf("address %v, want one of 10.80.0.100-150/24", first.Addr)
		}
		if first.Gateway != ispIP || len(first.DNS) != 1 || first.DNS[0] != ispIP || first.MTU != 1400 {
			t.Errorf("gateway %v, DNS %v, MTU %d; want 10.80.0.1, [10.80.0.1], 1400", first.Gateway, first.DNS, first.MTU)
		}
		if first.Server != ispIP || !macEqual(first.ServerMAC, ispMAC) {
			t.Errorf("server %v at %s, want %v at %s", first.Server, first.ServerMAC, ispIP, ispMAC)
		}
		if d := first.T1.Sub(first.Obtained); d != 5*time.Second {
			t.Errorf("T1 after %v, want 5s", d)
		}
		if d := first.T2.Sub(first.Obtained); d != 10*time.Second {
			t.Errorf("T2 after %v, want 10s", d)
		}
		if d := first.Expiry.Sub(first.Obtained); d != 120*time.Second {
			t.Errorf("lease of %v, want dnsmasq's minimum of 2m", d)
		}
		var dl dnsmasqLease
		if !eventually(5*time.Second, func() (ok bool) { dl, ok = l.dnsmasqLease(boxMAC); return ok }) {
			t.Fatalf("dnsmasq's lease file has no lease for %s", boxMAC)
		}
		if dl.addr != first.Addr.Addr() || dl.hostname != "e1kbox-test" || dl.clientID != "01:"+boxMAC.String() {
			t.Errorf("dnsmasq's lease %+v, want %v for e1kbox-test, client id 01:%s", dl, first.Addr.Addr(), boxMAC)
		}
		if out := l.box.IP(t, "-4", "addr", "show", "dev", "c0"); strings.TrimSpace(out) != "" {
			t.Errorf("the client put an address on c0: %s", out)
		}

		t.Run("renew", func(t *testing.T) {
			// The renewal at T1 is unicast: to 10.80.0.1 at the ISP's MAC,
			// from the leased address.
			captured := l.isp.OpenPackets(t, "s0", true)
			unicast := func() (n int) {
				for _, b := range captured.Frames() {
					u, why := dhcpclient.DecodeIPv4(b, serverPort, true)
					if why == "" && macEqual(u.DstMAC, ispMAC) && u.DstIP == ispIP && u.SrcIP == first.Addr.Addr() {
						n++
					}
				}
				return n
			}
			if !eventually(10*time.Second, func() bool {
				cur := b.c.Current()
				return cur != nil && cur.Obtained.After(first.Obtained)
			}) {
				t.Fatalf("no renewal within 10 s (stats %+v)", b.c.Stats())
			}
			if n := unicast(); n == 0 {
				t.Errorf("no unicast REQUEST reached the server")
			}
			cur := b.c.Current()
			if d := cur.Obtained.Sub(first.Obtained); d < 4*time.Second || d > 7*time.Second {
				t.Errorf("renewed %v after the lease, want about T1 (5 s)", d)
			}
			if !sameConfig(first, cur) {
				t.Errorf("renewal changed the lease: %+v -> %+v", first, cur)
			}
			var dl2 dnsmasqLease
			if !eventually(5*time.Second, func() (ok bool) {
				dl2, ok = l.dnsmasqLease(boxMAC)
				return ok && dl2.expiry.After(dl.expiry)
			}) {
				t.Errorf("dnsmasq did not extend the lease: expiry %v, then %v", dl.expiry, dl2.expiry)
			}
			select {
			case c := <-b.changes:
				t.Errorf("renewal called onChange(%+v, %+v)", c.old, c.new)
			default:
			}
		})
		b.stop(t)
		if b.c.Current() == nil {
			t.Errorf("stopping Run dropped the lease")
		}
	})
	if first == nil {
		t.FailNow()
	}

	t.Run("init-reboot", func(t *testing.T) {
		b := l.startClient(cfg, nil)
		ch := b.change(t, 10*time.Second)
		t.Logf("time to lease with INIT-REBOOT: %v", time.Since(b.started))
		if ch.old != nil || ch.new == nil || ch.new.Addr != first.Addr {
			t.Fatalf("onChange(%v, %v), want (nil, %v)", ch.old, ch.new, first.Addr)
		}
		if st := b.c.Stats(); st.Sent["DISCOVER"] != 0 {
			t.Errorf("restart sent %d DISCOVERs; sent %v", st.Sent["DISCOVER"], st.Sent)
		}
		b.stop(t)
	})

	t.Run("expiry and a new range", func(t *testing.T) {
		b := l.startClient(cfg, scaledClock{base: time.Now(), factor: 8})
		if ch := b.change(t, 10*time.Second); ch.new == nil || ch.new.Addr != first.Addr {
			t.Fatalf("restart got %v, want %v", ch.new, first.Addr)
		}
		l.stopDnsmasq()
		stopped := time.Now()
		before := b.c.Stats()
		ch := b.change(t, 25*time.Second) // 120 s on the client's clock
		t.Logf("lease given up %v after the server stopped", time.Since(stopped))
		if ch.new != nil || ch.old == nil || ch.old.Addr != first.Addr {
			t.Fatalf("onChange(%v, %v), want (lease, nil)", ch.old, ch.new)
		}
		if b.c.Current() != nil {
			t.Errorf("Current() = %v after expiry", b.c.Current())
		}
		// It kept asking (renewing, rebinding) and keeps discovering.
		if !eventually(5*time.Second, func() bool { return b.c.Stats().Sent["DISCOVER"] >= before.Sent["DISCOVER"]+2 }) {
			t.Errorf("no DISCOVERs after expiry: %v", b.c.Stats().Sent)
		}
		if after := b.c.Stats(); after.Sent["REQUEST"] < before.Sent["REQUEST"]+2 {
			t.Errorf("REQUESTs %d before, %d after: no renewing and rebinding", before.Sent["REQUEST"], after.Sent["REQUEST"])
		}

		l.startDnsmasq("10.80.0.200", "10.80.0.250")
		restarted := time.Now()
		ch = b.change(t, 20*time.Second)
		t.Logf("new lease %v after the server came back", time.Since(restarted))
		if ch.old != nil || ch.new == nil || !inRange(ch.new.Addr.Addr(), "10.80.0.200", "10.80.0.250") {
			t.Fatalf("onChange(%v, %v), want (nil, one of 10.80.0.200-250)", ch.old, ch.new)
		}

		t.Run("release", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.c.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if c := b.change(t, 5*time.Second); c.new != nil {
				t.Errorf("Release: onChange(%v, %v)", c.old, c.new)
			}
			if !eventually(5*time.Second, func() bool { _, ok := l.dnsmasqLease(boxMAC); return !ok }) {
				t.Errorf("dnsmasq kept the lease after the RELEASE")
			}
			if _, err := os.Stat(cfg.LeaseFile); !os.IsNotExist(err) {
				t.Errorf("lease file after Release: %v", err)
			}
		})
	})

	t.Run("MAC other than the interface's", func(t *testing.T) {
		// The router's WAN MAC may differ from the NIC's: the socket then
		// makes the interface promiscuous, for the server's unicast replies.
		mac := net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0x99}
		b := l.startClient(Config{Interface: "c0", MAC: mac}, nil)
		ch := b.change(t, 20*time.Second)
		if ch.new == nil || !inRange(ch.new.Addr.Addr(), "10.80.0.200", "10.80.0.250") {
			t.Fatalf("onChange(%v, %v), want a lease", ch.old, ch.new)
		}
		if dl, ok := l.dnsmasqLease(mac); !ok || dl.addr != ch.new.Addr.Addr() {
			t.Errorf("dnsmasq's lease for %s: %+v", mac, dl)
		}
		if out := l.box.IP(t, "-d", "link", "show", "c0"); !strings.Contains(out, "promiscuity 1") {
			t.Errorf("c0 is not promiscuous while the client runs:\n%s", out)
		}
		b.stop(t)
		if out := l.box.IP(t, "-d", "link", "show", "c0"); !strings.Contains(out, "promiscuity 0") {
			t.Errorf("c0 stays promiscuous after Run:\n%s", out)
		}
	})
}

// TestNetnsIngressDrop: on the dataplane's WAN port the kernel's stack gets
// no frames (ingressdrop's tcx program drops them, or demotes them for the
// rings bound behind it when the fast path runs): the client, whose socket
// is bound to IPv4 behind tcx, still gets its lease under either program.
func TestNetnsIngressDrop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(string, uint16) (*ingressdrop.Drop, error)
	}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			l.startDnsmasq("10.80.0.100", "10.80.0.150")
			l.box.Do(t, func() {
				drop, err := tc.attach("c0", 0)
				if err != nil {
					t.Fatalf("ingressdrop on c0: %v", err)
				}
				t.Cleanup(func() { drop.Close() })
			})
			b := l.startClient(Config{Interface: "c0", MAC: boxMAC}, nil)
			if ch := b.change(t, 20*time.Second); ch.new == nil {
				t.Fatalf("no lease behind ingressdrop's %s", tc.name)
			}
		})
	}
}
