package route6

import (
	"net/netip"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

const (
	lanPort = 1
	wanPort = 2
)

var (
	lanMAC  = [6]byte{0x02, 0, 0, 0, 0x0a, 1}
	wanMAC  = [6]byte{0x02, 0, 0, 0, 0x0b, 1}
	hostMAC = [6]byte{0x02, 0, 0, 0, 0x0a, 0x10}
	gwMAC   = [6]byte{0x02, 0, 0, 0, 0x0b, 0x99}

	lanLL   = a6("fe80::a:1")
	lanAddr = a6("2001:db8:1::1")
	wanLL   = a6("fe80::b:1")
	host    = a6("2001:db8:1::10")
	host2   = a6("2001:db8:1::11")
	gwLL    = a6("fe80::b:99")
	server  = a6("2001:db8:ffff::80")
)

func a6(s string) [16]byte { return netip.MustParseAddr(s).As16() }

func testConfig() Config {
	return Config{
		LAN:         Port{ID: lanPort, MAC: lanMAC, MTU: 1500, Addrs: []netip.Addr{netip.AddrFrom16(lanLL), netip.AddrFrom16(lanAddr)}},
		WAN:         Port{ID: wanPort, MAC: wanMAC, MTU: 1400, Addrs: []netip.Addr{netip.AddrFrom16(wanLL)}},
		LANPrefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")},
		Delegated:   []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/56")},
		Gateway:     netip.AddrFrom16(gwLL),
	}
}

// env is a router with one worker and a clock.
type env struct {
	t   testing.TB
	r   *Router
	w   *Worker
	now int64
	f   frame.Frame
}

func newEnv(t testing.TB, rs string) *env {
	t.Helper()
	return newEnvWith(t, rs, Limits{MaxConns: 1024, Neighbours: 64, Pending: 8})
}

// newEnvWith is newEnv with the tables of lim.
func newEnvWith(t testing.TB, rs string, lim Limits) *env {
	t.Helper()
	r, err := New(testConfig(), lim)
	if err != nil {
		t.Fatal(err)
	}
	var rw *rules.Worker
	if rs != "" {
		set, err := rules.Parse(rs)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := rules.Compile(set, rules.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := rules.NewSet(rules.SetOptions{Workers: 1})
		s.Swap(tab)
		rw = s.Worker(0)
	}
	e := &env{t: t, r: r, w: r.NewWorker(rw), now: 1_000_000 * 1e9}
	e.settle()
	return e
}

// settle runs the WAN link-local address's DAD to its end (the probe,
// one second without a conflict) and sends the router solicitation that
// follows, leaving no output behind.
func (e *env) settle() {
	e.t.Helper()
	e.w.Tick(e.now)
	e.outputs()
	e.r.Maintain(e.now + 1e9)
	e.w.Tick(e.now)
	e.outputs()
	if st := e.r.WANAddrs()[0]; st.Origin != OriginLinkLocal || st.State != AddrPreferred {
		e.t.Fatalf("the WAN link-local address after its DAD: %+v", st)
	}
}

// handle parses pkt and processes it from port.
func (e *env) handle(port int, pkt []byte) Result {
	e.t.Helper()
	if err := frame.Parse(pkt, &e.f); err != nil {
		e.t.Fatalf("test frame does not parse: %v", err)
	}
	return e.w.Process(e.now, port, pkt, &e.f)
}

// outputs drains Output.
func (e *env) outputs() []outFrame {
	var out []outFrame
	for port, b, ok := e.w.Output(); ok; port, b, ok = e.w.Output() {
		out = append(out, outFrame{port, append([]byte(nil), b...)})
	}
	return out
}

func eth(dst, src [6]byte, ip []byte) []byte {
	return frametest.Frame(dst, src, frame.EtherTypeIPv6, ip)
}

func fromLAN(ip []byte) []byte { return eth(lanMAC, hostMAC, ip) }
func fromWAN(ip []byte) []byte { return eth(wanMAC, gwMAC, ip) }

func tcp(src, dst [16]byte, sport, dport uint16, flags uint8, payload int) []byte {
	return frametest.IPv6{Src: src, Dst: dst}.TCPPacket(frametest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Window: 1000}, make([]byte, payload))
}

func udp(src, dst [16]byte, sport, dport uint16) []byte {
	return frametest.IPv6{Src: src, Dst: dst}.UDPPacket(sport, dport, []byte("hello"))
}

func icmp(src, dst [16]byte, hops uint8, typ, code uint8, rest uint32, payload []byte) []byte {
	return frametest.IPv6{Src: src, Dst: dst, HopLimit: hops}.ICMPPacket(typ, code, rest, payload)
}

// na is a solicited neighbour advertisement for target from mac.
func na(src, dst [16]byte, target [16]byte, mac [6]byte) []byte {
	body := append(append([]byte(nil), target[:]...), optTLLA, 1)
	body = append(body, mac[:]...)
	return icmp(src, dst, 255, icmpNA, 0, 0x60000000, body)
}

// resolve answers the NS the last packet sent on port for target.
func (e *env) resolve(port int, target [16]byte, mac [6]byte) []outFrame {
	e.t.Helper()
	var dst [16]byte = lanLL
	from := fromLAN
	if port == wanPort {
		dst, from = wanLL, func(ip []byte) []byte { return eth(wanMAC, mac, ip) }
	} else {
		from = func(ip []byte) []byte { return eth(lanMAC, mac, ip) }
	}
	if res := e.handle(port, from(na(target, dst, target, mac))); res.Action != routing.Consumed {
		e.t.Fatalf("NA from %x: %v/%v, want consumed", target, res.Action, res.Reason)
	}
	return e.outputs()
}

func parse(t testing.TB, b []byte) *frame.Frame {
	t.Helper()
	var f frame.Frame
	if err := frame.Parse(b, &f); err != nil {
		t.Fatalf("frame does not parse: %v", err)
	}
	if err := frame.VerifyChecksums(b, &f); err != nil {
		t.Fatalf("checksums: %v", err)
	}
	return &f
}
