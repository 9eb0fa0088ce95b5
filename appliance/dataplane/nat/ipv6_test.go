package nat

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/appliance/dataplane/routing"
)

// TestIPv6Hook: with Config.IPv6 the worker routes IPv6 through route6
// (the NS for the gateway from Output, the queued packet released after
// the NA, an unsolicited inbound SYN dropped as ReasonIPv6 with route6's
// reason in its stats) while IPv4 works as before.
func TestIPv6Hook(t *testing.T) {
	host6, server6, gw6 := ap("2001:db8:1::10").As16(), ap("2001:db8:ffff::1").As16(), ap("fe80::99").As16()
	v6, err := route6.New(route6.Config{
		LAN:         route6.Port{ID: lanPort, MAC: lanMAC, MTU: 1500, Addrs: []netip.Addr{ap("fe80::1"), ap("2001:db8:1::1")}},
		WAN:         route6.Port{ID: wanPort, MAC: wanMAC, MTU: 1500, Addrs: []netip.Addr{ap("fe80::2")}},
		LANPrefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")},
		Gateway:     ap("fe80::99"),
	}, route6.Limits{MaxConns: 256})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.IPv6 = v6 })
	w := e.r.NewWorker(nil)
	v6frame := func(dst, src [6]byte, ip []byte) []byte {
		return frametest.Pad(frametest.Frame(dst, src, frame.EtherTypeIPv6, ip))
	}
	syn := frametest.IPv6{Src: host6, Dst: server6}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 443, Flags: frame.TCPSyn}, nil)
	if res := w.Handle(e.now, lanPort, v6frame(lanMAC, hostA, syn)); res.Action != routing.Queued {
		t.Fatalf("IPv6 SYN: %v/%v, want queued for the gateway", res.Action, res.Reason)
	}
	if !w.Waiting() {
		t.Error("Waiting() is false with an IPv6 frame queued")
	}
	port, ns, ok := w.Output()
	if !ok || port != wanPort || len(ns) < 14+40 || ns[14+40] != 135 {
		t.Fatalf("Output: %v %d %x, want an NS on the WAN", ok, port, ns)
	}
	naBody := append(append(gw6[:0:0], gw6[:]...), 2, 1)
	naBody = append(naBody, gwMAC[:]...)
	na := frametest.IPv6{Src: gw6, Dst: ap("fe80::2").As16(), HopLimit: 255}.ICMPPacket(136, 0, 0x60000000, naBody)
	if res := w.Handle(e.now, wanPort, v6frame(wanMAC, gwMAC, na)); res.Action != routing.Consumed {
		t.Fatalf("NA: %v/%v, want consumed", res.Action, res.Reason)
	}
	if port, b, ok := w.Output(); !ok || port != wanPort || [6]byte(b[0:6]) != gwMAC {
		t.Fatalf("after the NA: %v %d, want the SYN to the gateway", ok, port)
	}
	in := frametest.IPv6{Src: server6, Dst: host6}.TCPPacket(frametest.TCP{SrcPort: 5, DstPort: 22, Flags: frame.TCPSyn}, nil)
	if res := w.Handle(e.now, wanPort, v6frame(wanMAC, gwMAC, in)); res.Action != routing.Drop || res.Reason != ReasonIPv6 {
		t.Errorf("unsolicited inbound IPv6 SYN: %v/%v, want dropped (ipv6)", res.Action, res.Reason)
	}
	if got := v6.Stats().Drops[route6.ReasonFirewall]; got != 1 {
		t.Errorf("route6 firewall drops %d, want 1", got)
	}
	ping := frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.ICMPPacket(frame.ICMPEchoRequest, 0, 0x00010001, nil)
	if res := w.Handle(e.now, lanPort, fromLAN(hostA, ping)); res.Action != routing.Forward {
		t.Errorf("IPv4 next to IPv6: %v/%v, want forwarded", res.Action, res.Reason)
	}
	if err := e.r.Update(testConfig()); err == nil {
		t.Error("Update dropping Config.IPv6 was accepted")
	}
}
