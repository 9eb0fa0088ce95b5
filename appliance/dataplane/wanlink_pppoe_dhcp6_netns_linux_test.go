package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/internal/ispvm"
)

// TestEnginePPPoEIPv6: IPv6 over the session at the engine: the PPPoE
// client negotiates IPv6CP, the session's link-locals make the IPv6
// router's WAN point-to-point, a DHCPv6 client over the endpoint's
// transport (PPPoELink.DHCPv6) gets the VM's dibbler-server's /56, and
// h1, with an address in its first /64, pings the ISP's IPv6 upstream
// through the session; the WAN side sent no neighbour solicitation.
func TestEnginePPPoEIPv6(t *testing.T) {
	tp := newTopo(t, 1)
	tp.box.IP(t, "tuntap", "add", "dev", "p2", "mode", "tap")
	tp.box.Sysctl(t, "net.ipv6.conf.p2.disable_ipv6=1")
	tp.box.IP(t, "link", "set", "p2", "up")
	vm := ispvm.Start(t, ispvm.Config{Netns: tp.box.Name(), Tap: "p2", CHAP: true})
	b := &pppoeBox{t: t, tp: tp, vm: vm, events: make(chan pppoe.Event, 64)}
	b.cfg = Config{Mode: ModeNAT, FastPath: FastPathTCX,
		Ports: []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		NAT:   &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANPPPoE: true, IPv6: true}}
	b.e = tp.engine(&b.cfg)
	link := b.e.PPPoE()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	c, err := pppoe.New(link, pppoe.Config{User: vm.Config.User, Password: vm.Config.Password, MAC: link.MAC(), IPv6: true,
		EchoInterval: time.Second, Log: log, OnEvent: func(ev pppoe.Event) {
			select {
			case b.events <- ev:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { c.Run(ctx); done <- struct{}{} }()
	go func() { link.Receive(ctx, c.Input); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()

	// The session with IPv6CP, applied as plane.SetPPPoE does.
	var st pppoe.Status
	deadline := time.After(60 * time.Second)
	for !st.LocalLinkLocal.IsValid() || !st.LocalIPv4.IsValid() {
		select {
		case ev := <-b.events:
			st = ev.Status
		case <-deadline:
			t.Fatalf("no session with IPv6CP: %+v", c.Status())
		}
	}
	cfg := b.cfg
	n := *cfg.NAT
	n.PPPoESession = PPPoESession{ID: st.SessionID, ACMAC: [6]byte(st.ACMAC), LocalLinkLocal: st.LocalLinkLocal, PeerLinkLocal: st.PeerLinkLocal}
	n.WANAddr, n.Gateway, n.WANMTU = netip.PrefixFrom(st.LocalIPv4, 32), st.PeerIPv4, st.MTU
	cfg.NAT = &n
	if err := b.e.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	r6 := b.e.IPv6()
	if gw, ok := r6.Gateway(time.Now().UnixNano()); !ok || gw != st.PeerLinkLocal || r6.Config().WAN.Addrs[0] != st.LocalLinkLocal {
		t.Fatalf("IPv6 router: gateway %v %v, WAN %v; want the peer %v, ours %v", gw, ok, r6.Config().WAN.Addrs, st.PeerLinkLocal, st.LocalLinkLocal)
	}

	// DHCPv6 over the session.
	dc, err := dhcp6c.New(dhcp6c.Config{Interface: "p2", MAC: link.MAC(), LinkLocal: st.LocalLinkLocal, SolicitKept: true,
		Open: func() (dhcpclient.Transport, int, error) { return link.DHCPv6(), st.MTU, nil }}, log)
	if err != nil {
		t.Fatal(err)
	}
	leases := make(chan *dhcp6c.Lease, 4)
	go func() {
		dc.Run(ctx, func(_, l *dhcp6c.Lease) {
			select {
			case leases <- l:
			default:
			}
		})
		done <- struct{}{}
	}()
	defer func() { cancel(); <-done }()
	var l *dhcp6c.Lease
	select {
	case l = <-leases:
	case <-time.After(30 * time.Second):
		t.Fatalf("no DHCPv6 lease over the session: %+v", dc.Stats())
	}
	if l == nil || len(l.Prefixes) != 1 || l.Prefixes[0].Prefix != vm.Config.Prefix {
		t.Fatalf("lease %+v, want %v delegated", l, vm.Config.Prefix)
	}

	// h1 in the first /64, the box's LAN link-local its router.
	lan := netip.PrefixFrom(vm.Config.Prefix.Addr(), 64)
	h1 := lan.Addr().Next().Next()
	box := lan.Addr().Next()
	if err := r6.SetPrefixes([]netip.Prefix{lan}, []netip.Prefix{vm.Config.Prefix}, []netip.Addr{box}); err != nil {
		t.Fatal(err)
	}
	h := tp.hosts[0]
	h.IP(t, "-6", "addr", "add", netip.PrefixFrom(h1, 64).String(), "dev", "eth0", "nodad")
	// The router's MAC given (the appliance's RAs carry it): this test
	// is about the WAN.
	rtr := LinkLocal(b.e.natp.lanMAC).String()
	h.IP(t, "-6", "neigh", "replace", rtr, "lladdr", net.HardwareAddr(b.e.natp.lanMAC[:]).String(), "dev", "eth0")
	h.IP(t, "-6", "route", "add", "default", "via", rtr, "dev", "eth0")
	t.Logf("h1 %v via %v; the router's LAN addresses %v", h1, LinkLocal(b.e.natp.lanMAC), r6.Addrs(0))
	nsBefore := r6.Stats().NS
	eventually(t, 10*time.Second, "h1's ping -6 to the ISP's upstream through the session", func() (bool, string) {
		out, err := h.Output("ping", "-6", "-c", "1", "-W", "1", vm.Config.Upstream6.String())
		st := r6.Stats()
		drops := map[string]uint64{}
		for i, n := range b.e.Snapshot().Drops {
			if n != 0 {
				drops[Drop(i).String()] = n
			}
		}
		neigh, _ := h.Output("ip", "-6", "neigh")
		addrs, _ := h.Output("ip", "-6", "addr")
		routes, _ := h.Output("ip", "-6", "route")
		out += neigh + addrs + routes
		return err == nil, fmt.Sprintf("%s\nactions %v drops %v; engine drops %v; neighbours %+v", out, st.Actions, st.Drops,
			drops, r6.Neighbours(time.Now().UnixNano()))
	})
	// The box solicited h1 on the LAN (at most a few), never the peer.
	for _, nb := range r6.Neighbours(time.Now().UnixNano()) {
		if nb.Side == 1 {
			t.Errorf("a WAN neighbour %+v on a point-to-point WAN", nb)
		}
	}
	t.Logf("NS sent while pinging: %d (h1's, on the LAN)", r6.Stats().NS-nsBefore)
}
