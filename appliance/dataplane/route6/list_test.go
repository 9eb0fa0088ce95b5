package route6

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"

	"github.com/google/go-cmp/cmp"
)

// connLine is a listed connection in one comparable line.
func connLine(c *Conn) string {
	return strings.Join([]string{protoName(c.Proto), ipString(c.LAN), u16(c.LANPort), ipString(c.WAN), u16(c.WANPort),
		c.State, boolWord(c.Inbound, "inbound", "outbound"), boolWord(c.Replied, "replied", "unreplied"),
		u64(c.Packets[LAN]) + "/" + u64(c.Packets[WAN])}, " ")
}

// TestEachConn: the walk sees each live connection opened by real frames
// once, with its state, direction and packets per side; it stops when fn
// says so, lists nothing expired, and Conns (built on it) agrees.
func TestEachConn(t *testing.T) {
	e := resolved(t, `ip6 daddr 2001:db8:1::10 tcp dport 22 accept`)
	for _, p := range []struct {
		port int
		pkt  []byte
	}{
		{lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))},
		{wanPort, fromWAN(tcp(server, host, 443, 40000, frame.TCPSyn|frame.TCPAck, 0))},
		{lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPAck, 10))},
		{lanPort, fromLAN(udp(host, server, 7000, 53))},
		{wanPort, fromWAN(tcp(server, host, 5555, 22, frame.TCPSyn, 0))},
		{lanPort, fromLAN(icmp(host, server, 64, frame.ICMPv6EchoRequest, 0, 0x12340001, nil))},
	} {
		if res := e.handle(p.port, p.pkt); res.Action != routing.Forward {
			t.Fatalf("setting up: %v/%v, want forwarded", res.Action, res.Reason)
		}
	}
	all := []string{
		"icmpv6 2001:db8:1::10 4660 2001:db8:ffff::80 0 icmp outbound unreplied 1/0",
		"tcp 2001:db8:1::10 22 2001:db8:ffff::80 5555 syn_sent inbound unreplied 0/1",
		"tcp 2001:db8:1::10 40000 2001:db8:ffff::80 443 established outbound replied 2/1",
		"udp 2001:db8:1::10 7000 2001:db8:ffff::80 53 udp outbound unreplied 1/0",
	}
	for _, tc := range []struct {
		name  string
		after int64 // seconds from now
		stop  int   // fn returns false after this many (0: never)
		want  []string
	}{
		{"all", 0, 0, all},
		{"stopped after two", 0, 2, nil},
		{"after 31 s the unreplied UDP and echo are gone", 31, 0, all[1:3]},
		{"after 121 s only the established TCP", 121, 0, all[2:3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := e.now + tc.after*1e9
			var got []string
			e.r.EachConn(now, func(c *Conn) bool {
				got = append(got, connLine(c))
				return tc.stop == 0 || len(got) < tc.stop
			})
			if tc.stop != 0 {
				if len(got) != tc.stop {
					t.Errorf("fn saw %d connections after asking to stop at %d: %v", len(got), tc.stop, got)
				}
				return
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EachConn (-want +got):\n%s", diff)
			}
			var listed []string
			for _, c := range e.r.Conns(100, now) {
				listed = append(listed, connLine(&c))
			}
			slices.Sort(listed)
			if diff := cmp.Diff(tc.want, listed); diff != "" {
				t.Errorf("Conns (-want +got):\n%s", diff)
			}
			if n := e.r.ConnCount(now); n != len(tc.want) {
				t.Errorf("ConnCount = %d, want %d", n, len(tc.want))
			}
		})
	}
	if n := len(e.r.Conns(2, e.now)); n != 2 {
		t.Errorf("Conns(max 2) listed %d", n)
	}
}

// TestNeighbourStates: a next hop being solicited is incomplete, its NA
// makes it reachable for 30 s, then it is stale (still used while it is
// solicited again).
func TestNeighbourStates(t *testing.T) {
	e := newEnv(t, "")
	if res := e.handle(lanPort, fromLAN(tcp(host, server, 40000, 443, frame.TCPSyn, 0))); res.Action != routing.Queued {
		t.Fatalf("SYN: %v/%v, want queued behind an NS for the gateway", res.Action, res.Reason)
	}
	type row struct {
		Side  string
		Addr  string
		MAC   string
		State string
		Reach bool
	}
	list := func(now int64) []row {
		var out []row
		for _, n := range e.r.Neighbours(now) {
			out = append(out, row{n.Side.String(), ipString(n.Addr), macString(n.MAC), n.State, n.Reachable})
		}
		return out
	}
	incomplete := []row{{"wan", "fe80::b:99", "00:00:00:00:00:00", NeighIncomplete, false}}
	if diff := cmp.Diff(incomplete, list(e.now)); diff != "" {
		t.Errorf("while soliciting (-want +got):\n%s", diff)
	}
	e.resolve(wanPort, gwLL, gwMAC)
	for _, tc := range []struct {
		after int64
		want  string
	}{{0, NeighReachable}, {29, NeighReachable}, {30, NeighStale}, {300, NeighStale}} {
		want := []row{{"wan", "fe80::b:99", "02:00:00:00:0b:99", tc.want, tc.want == NeighReachable}}
		if diff := cmp.Diff(want, list(e.now+tc.after*1e9)); diff != "" {
			t.Errorf("%d s after the NA (-want +got):\n%s", tc.after, diff)
		}
	}
}

func ipString(a [16]byte) string { return netip.AddrFrom16(a).String() }
func macString(m [6]byte) string { return net.HardwareAddr(m[:]).String() }
func u16(n uint16) string        { return strconv.Itoa(int(n)) }
func u64(n uint64) string        { return strconv.FormatUint(n, 10) }

func protoName(p uint8) string {
	switch p {
	case frame.ProtoTCP:
		return "tcp"
	case frame.ProtoUDP:
		return "udp"
	case frame.ProtoICMPv6:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

func boolWord(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
