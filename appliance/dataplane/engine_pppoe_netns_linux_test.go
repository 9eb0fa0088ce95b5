package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/services/pppoe"
	"e1kbox/internal/ispvm"
)

// pppoeBox is an engine whose WAN port is the tap of an ISP VM (package
// ispvm: the real pppoe-server and pppd) and a PPPoE client running over
// the engine's endpoint; each session event is applied to the engine as
// the plane does (SetPPPoE).
type pppoeBox struct {
	t      *testing.T
	tp     *topo
	vm     *ispvm.VM
	e      *Engine
	cfg    Config
	client *pppoe.Client
	events chan pppoe.Event
}

// newPPPoEBox boots the VM (vmc: PAP or CHAP, VLAN) on tap "p2" in the
// box's namespace, starts the engine with h1 on its LAN and runs the
// client.
func newPPPoEBox(t *testing.T, vmc ispvm.Config, fp FastPathMode) *pppoeBox {
	tp := newTopo(t, 1)
	tp.box.IP(t, "tuntap", "add", "dev", "p2", "mode", "tap")
	tp.box.Sysctl(t, "net.ipv6.conf.p2.disable_ipv6=1", "net.ipv4.conf.p1.arp_ignore=8")
	tp.box.IP(t, "link", "set", "p2", "up")
	vmc.Netns, vmc.Tap = tp.box.Name(), "p2"
	vm := ispvm.Start(t, vmc)
	tp.hosts[0].IP(t, "route", "add", "default", "via", "10.42.0.254")
	b := &pppoeBox{t: t, tp: tp, vm: vm, events: make(chan pppoe.Event, 64)}
	b.cfg = Config{
		Mode:     ModeNAT,
		FastPath: fp,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		NAT: &NAT{
			LANAddr:  netip.MustParsePrefix("10.42.0.254/24"),
			WANPPPoE: true,
		},
	}
	if vmc.VLAN != 0 {
		b.cfg.NAT.WANVLAN = WANVLAN{ID: uint16(vmc.VLAN), ControlPCP: 6}
	}
	b.e = tp.engine(&b.cfg)
	b.runClient(slog.LevelInfo, nil)
	return b
}

// runClient runs a PPPoE client for the VM's user over the engine's
// endpoint until the test's end, logging from level on, its events to
// b.events; cc, if not nil, adjusts its config.
func (b *pppoeBox) runClient(level slog.Level, cc func(*pppoe.Config)) {
	t := b.t
	t.Helper()
	link := b.e.PPPoE()
	cfg := pppoe.Config{User: b.vm.Config.User, Password: b.vm.Config.Password, MAC: link.MAC(),
		EchoInterval: time.Second, EchoFailures: 3, Backoff: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level})),
		OnEvent: func(ev pppoe.Event) {
			select {
			case b.events <- ev:
			default:
			}
		}}
	if cc != nil {
		cc(&cfg)
	}
	c, err := pppoe.New(link, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.client = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { c.Run(ctx); done <- struct{}{} }()
	go func() { link.Receive(ctx, c.Input); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
}

// apply makes the engine's WAN the session of st, as plane.SetPPPoE does.
func (b *pppoeBox) apply(st pppoe.Status) {
	b.t.Helper()
	cfg := b.cfg
	n := *cfg.NAT
	if st.Phase == pppoe.PhaseUp && st.LocalIPv4.IsValid() {
		n.PPPoESession = PPPoESession{ID: st.SessionID, ACMAC: [6]byte(st.ACMAC)}
		n.WANAddr = netip.PrefixFrom(st.LocalIPv4, 32)
		n.Gateway = st.PeerIPv4
		n.WANMTU = st.MTU
	}
	cfg.NAT = &n
	if err := b.e.Apply(&cfg); err != nil {
		b.t.Fatalf("Apply the session %+v: %v", st, err)
	}
}

// waitUp applies the client's events until its session is up (and
// applied), failing after d.
func (b *pppoeBox) waitUp(d time.Duration) pppoe.Status {
	b.t.Helper()
	return b.wait(d, true)
}

func (b *pppoeBox) wait(d time.Duration, up bool) pppoe.Status {
	b.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-b.events:
			b.apply(ev.Status)
			if ev.Up == up && (!up || ev.Status.LocalIPv4.IsValid()) {
				return ev.Status
			}
		case <-deadline:
			link, _ := b.tp.box.Output("ip", "-s", "-d", "link", "show", "p2")
			b.t.Logf("WAN link: %s", link)
			b.t.Fatalf("no session %s within %v: client %+v; engine drops %v", map[bool]string{true: "up", false: "down"}[up],
				d, b.client.Status(), fmt.Sprintf("%v; ports %+v; workers %+v", b.e.Snapshot().Drops, b.e.Snapshot().Ports, b.e.Snapshot().Workers))
		}
	}
}

// traffic checks that h1 pings the VM's upstream and fetches /big from it
// over TCP through the session, masqueraded on IPCP's address.
func (b *pppoeBox) traffic(local netip.Addr) {
	b.t.Helper()
	up := b.vm.Config.Upstream4.String()
	if err := b.tp.ping(1, up); err != nil {
		b.t.Fatalf("through the session: %v", err)
	}
	start := time.Now()
	out, err := b.tp.hosts[0].Output("sh", "-c", "curl -sS --max-time 60 http://"+up+"/big | sha256sum")
	if err != nil || !strings.HasPrefix(out, b.vm.Image.BigSHA256) {
		b.t.Fatalf("fetching /big through the session: %v %q, want SHA-256 %s", err, out, b.vm.Image.BigSHA256)
	}
	b.t.Logf("/big (%d MiB) in %v", ispvm.BigSize>>20, time.Since(start).Round(time.Millisecond))
	conns, err := ListConns(b.e.NAT(), ConnFilter{Proto: "icmp"}, 0, 0)
	if err != nil || conns.Total == 0 || conns.Conns[0].Reply.Dst.Addr() != local {
		b.t.Errorf("ICMP connections %+v (%v): want the reply to IPCP's address %v", conns, err, local)
	}
}

// checkDown checks that the router has no WAN address and no
// connections of the old one once the session is down.
func (b *pppoeBox) checkDown() {
	b.t.Helper()
	if a := b.e.NAT().Config().WAN.Addr; a.IsValid() {
		b.t.Errorf("the session is down, the router's WAN address is still %v", a)
	}
	if conns, err := ListConns(b.e.NAT(), ConnFilter{}, 0, 0); err != nil || conns.Total != 0 {
		b.t.Errorf("the session is down, %d connections of its address stay (%v)", conns.Total, err)
	}
}

func TestEnginePPPoE(t *testing.T) {
	// Every fast path mode hands the WAN worker the PPPoE frames: tcx
	// (the rings behind it, PPPoE on the demote's marker ring), generic
	// XDP (passed to the taps) and none (taps).
	for _, tc := range []struct {
		name string
		vm   ispvm.Config
		fp   FastPathMode
	}{
		{"PAP", ispvm.Config{ACName: "isp-pap"}, FastPathTCX},
		{"CHAP with XDP", ispvm.Config{ACName: "isp-chap", CHAP: true}, FastPathXDP},
		{"CHAP on VLAN 7", ispvm.Config{ACName: "isp-vlan7", CHAP: true, VLAN: 7}, FastPathTCX},
		{"PAP on VLAN 7 without fast path", ispvm.Config{ACName: "isp-vlan7", VLAN: 7}, FastPathOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPPPoEBox(t, tc.vm, tc.fp)
			if fp := b.e.Snapshot().FastPath; tc.fp != FastPathOff && (fp == nil || fp.Mode != string(tc.fp)) {
				t.Fatalf("fast path %+v, want %s", fp, tc.fp)
			}
			st := b.waitUp(60 * time.Second)
			if st.ACName != tc.vm.ACName || st.LocalIPv4 != netip.MustParseAddr("10.64.0.2") || st.PeerIPv4 != netip.MustParseAddr("10.64.0.1") || st.MTU != 1492 {
				t.Errorf("session: AC %q, %v peer %v, MTU %d; want %q, 10.64.0.2 peer 10.64.0.1, 1492", st.ACName, st.LocalIPv4, st.PeerIPv4, st.MTU, tc.vm.ACName)
			}
			if got := b.e.NAT().Config(); got.WAN.MTU != 1492 || got.WANPeerMAC.String() != st.ACMAC.String() {
				t.Errorf("router: WAN MTU %d, peer %v; want 1492, the AC %v", got.WAN.MTU, got.WANPeerMAC, st.ACMAC)
			}
			b.traffic(st.LocalIPv4)
			if tc.name != "PAP" {
				return
			}
			// The ISP ends the session: the client goes down and connects again.
			if err := b.vm.Disconnect(); err != nil {
				t.Fatalf("disconnect: %v", err)
			}
			b.wait(30*time.Second, false)
			b.checkDown()
			st = b.waitUp(60 * time.Second)
			b.traffic(st.LocalIPv4)
			t.Logf("session %#x after %d reconnects", st.SessionID, st.Reconnects)

			// The ISP's pppd stops answering: LCP echoes (1 s, 3 failures)
			// find the peer dead; once it answers again a session comes up.
			if err := b.vm.Freeze(); err != nil {
				t.Fatalf("freeze: %v", err)
			}
			start := time.Now()
			st = b.wait(20*time.Second, false)
			t.Logf("dead peer found after %v: %s", time.Since(start).Round(100*time.Millisecond), st.LastDownReason)
			b.checkDown()
			if err := b.vm.Thaw(); err != nil {
				t.Fatalf("thaw: %v", err)
			}
			st = b.waitUp(60 * time.Second)
			b.traffic(st.LocalIPv4)
			if d := b.e.Snapshot().Drops; d[DropPPPoEQueue] != 0 || d[DropPPPoEDown] != 0 {
				t.Errorf("%v: %d control frames lost; %v: %d (ARP never goes to a PPPoE WAN, nor IP without a session)",
					DropPPPoEQueue, d[DropPPPoEQueue], DropPPPoEDown, d[DropPPPoEDown])
			}
		})
	}
}
