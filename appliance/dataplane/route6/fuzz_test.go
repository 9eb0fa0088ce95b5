package route6

import (
	"net/netip"
	"slices"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// FuzzProcess: no frame, from either side, crashes the IPv6 path; what
// it forwards is the received frame (not past its IP end), still parses
// and has valid checksums if it had them (transit checksums are not
// verified, and a bad one stays bad); what it generates parses with valid
// checksums. The router does SLAAC and probes a leased address, so router
// advertisements' prefix options and conflicts with the tentative
// addresses are reached; no WAN address is ever in use while tentative.
func FuzzProcess(f *testing.F) {
	seeds := [][]byte{
		fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0)),
		fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0)),
		fromLAN(frametest.IPv6{Src: host, Dst: server, HopLimit: 1}.UDPPacket(1, 2, nil)),
		fromWAN(icmp(server, host, 64, frame.ICMPv6PacketTooBig, 0, 1280, udp(host, server, 7001, 53))),
		fromLAN(frametest.IPv6{Src: host, Dst: server, NextHeader: frame.ProtoFragment}.Build(
			append(frametest.Frag6(frame.ProtoUDP, 0, true, 7), frametest.UDPRaw(1, 2, make([]byte, 8))...))),
		eth(a6mac("ff02::1:ff00:1"), hostMAC, icmp(host, a6("ff02::1:ff00:1"), 255, icmpNS, 0, 0, lanAddr[:])),
		fromWAN(na(gwLL, wanLL, gwLL, gwMAC)),
		raFrame(pio("2001:db8:64::", 64, 0xc0, 7200, 3600), pio("2001:db8:65::", 64, 0x40, Forever, Forever)),
		dadNS(leased),
		naFor(leased),
		nsFrom(leased),
		echoIn(wanSrc(0, 0), unknownDst(1), 1), // a scan's packet
		eth(allNodesMAC, hostMAC, icmp(host2, a6("ff02::1"), 255, icmpNA, 0, 0x20000000, // an announced address
			append(append(host2[:0:0], host2[:]...), optTLLA, 1, 2, 0, 0, 0, 0x0a, 0x11))),
	}
	seeds = append(seeds, fromAC(udp(pppPeer, pppLL, 547, 546)), fromAC(icmp(pppPeer, pppLL, 64, frame.ICMPv6EchoRequest, 0, 1, nil)))
	for _, s := range seeds {
		f.Add(s, false, false)
		f.Add(s, true, false)
		f.Add(s, false, true)
		f.Add(s, true, true)
	}
	e := resolved(&testing.T{}, "")
	if err := e.r.SetWANAddressing(WANAddressing{SLAAC: true, Secret: secret, NetIface: "wan0", DHCPv6: true,
		Leased: []Leased{{netip.AddrFrom16(leased), Forever, Forever}}}, e.now); err != nil {
		f.Fatal(err)
	}
	// The same on a point-to-point WAN (a PPPoE session's).
	r2, err := New(ptpConfig(true), Limits{MaxConns: 1024, Neighbours: 64, Pending: 8})
	if err != nil {
		f.Fatal(err)
	}
	ptp := &env{t: &testing.T{}, r: r2, w: r2.NewWorker(nil), now: e.now}
	ptp.settle()
	lan := e
	f.Fuzz(func(t *testing.T, pkt []byte, wan, p2p bool) {
		e := lan
		if p2p {
			e = ptp
		}
		e.t = t
		port := lanPort
		if wan {
			port = wanPort
		}
		in := append([]byte(nil), pkt...)
		var fr frame.Frame
		if err := frame.Parse(in, &fr); err != nil || !fr.IsIPv6() {
			return // the NAT worker counts parse failures; only IPv6 reaches here
		}
		valid := frame.VerifyChecksums(in, &fr) == nil
		res := e.w.Process(e.now, port, in, &fr)
		switch res.Action {
		case routing.Forward:
			if len(res.Frame) > len(in) || &res.Frame[0] != &in[0] {
				t.Fatalf("forwarded frame is not the received one")
			}
			var out frame.Frame
			if err := frame.Parse(res.Frame, &out); err != nil {
				t.Fatalf("forwarded frame does not parse: %v", err)
			}
			if err := frame.VerifyChecksums(res.Frame, &out); valid && err != nil {
				t.Fatalf("forwarding broke the checksums: %v", err)
			}
		case routing.Reply:
			parse(t, res.Frame)
		}
		for _, b, ok := e.w.Output(); ok; _, b, ok = e.w.Output() {
			var out frame.Frame
			if err := frame.Parse(b, &out); err != nil {
				t.Fatalf("output frame does not parse: %v", err)
			}
			if out.IsICMP() && (out.ICMP.Type == icmpNS || out.ICMP.Type == icmpRS) { // generated; the others were queued as received
				parse(t, b)
			}
		}
		e.now += 1e8
		e.r.Maintain(e.now)
		e.w.Tick(e.now)
		for _, a := range e.r.WANAddrs() {
			if a.State == AddrTentative && a.Origin != OriginLinkLocal && slices.Contains(e.r.Addrs(WAN), a.Addr) {
				t.Fatalf("tentative %v in use", a.Addr)
			}
		}
	})
}
