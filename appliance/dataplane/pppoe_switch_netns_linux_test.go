package dataplane

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"e1kbox/appliance/services/pppoe"
	"e1kbox/internal/ispvm"
)

// TestEnginePPPoESwitchOn: an engine running a plain WAN (no address yet,
// as the appliance starts one before its PPPoE client) is switched to a
// PPPoE WAN by Apply, which restarts the WAN port's workers, as
// plane.SetPPPoE does when the router starts the client; the client then
// reaches a session over the restarted port and h1 the ISP through it.
func TestEnginePPPoESwitchOn(t *testing.T) {
	for _, fp := range []FastPathMode{FastPathTCX, FastPathOff} {
		t.Run(string(fp), func(t *testing.T) {
			tp := newTopo(t, 1)
			tp.box.IP(t, "tuntap", "add", "dev", "p2", "mode", "tap")
			tp.box.Sysctl(t, "net.ipv6.conf.p2.disable_ipv6=1", "net.ipv4.conf.p1.arp_ignore=8")
			tp.box.IP(t, "link", "set", "p2", "up")
			vm := ispvm.Start(t, ispvm.Config{Netns: tp.box.Name(), Tap: "p2", ACName: "isp-switch"})
			tp.hosts[0].IP(t, "route", "add", "default", "via", "10.42.0.254")
			b := &pppoeBox{t: t, tp: tp, vm: vm, events: make(chan pppoe.Event, 64)}
			b.cfg = Config{
				Mode:     ModeNAT,
				FastPath: fp,
				Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
				NAT:      &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24")},
			}
			b.e = tp.engine(&b.cfg)
			time.Sleep(200 * time.Millisecond) // the workers run
			on := b.cfg
			n := *on.NAT
			n.WANPPPoE = true
			on.NAT = &n
			start := time.Now()
			var err error
			tp.box.Do(t, func() { err = b.e.Apply(&on) }) // the restarted port's sockets open in the box
			if err != nil {
				t.Fatalf("Apply with PPPoE on: %v", err)
			}
			t.Logf("PPPoE switched on in %v", time.Since(start).Round(time.Millisecond))
			b.cfg = on
			b.runClient(slog.LevelWarn, nil)
			st := b.waitUp(60 * time.Second)
			t.Logf("session up %v after the switch", time.Since(start).Round(time.Millisecond))
			if err := tp.ping(1, vm.Config.Upstream4.String()); err != nil {
				t.Fatalf("through the session %#x: %v", st.SessionID, err)
			}
		})
	}
}
