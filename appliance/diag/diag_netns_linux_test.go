package diag

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// topology: src (10.81.1.2) -- router (10.81.1.1 | 10.81.2.1) -- dst (10.81.2.2).
func topology(t *testing.T) (src *netnstest.Namespace) {
	testenv.Require(t, "root", "ip")
	src = netnstest.New(t, "dash-dsrc")
	rt := netnstest.New(t, "dash-drt")
	dst := netnstest.New(t, "dash-ddst")
	netnstest.Veth(t, netnstest.End{NS: src, Name: "d-src", Addrs: []string{"10.81.1.2/24"}, Up: true},
		netnstest.End{NS: rt, Name: "d-rt1", Addrs: []string{"10.81.1.1/24"}, Up: true})
	netnstest.Veth(t, netnstest.End{NS: rt, Name: "d-rt2", Addrs: []string{"10.81.2.1/24"}, Up: true},
		netnstest.End{NS: dst, Name: "d-dst", Addrs: []string{"10.81.2.2/24"}, Up: true})
	rt.Sysctl(t, "net.ipv4.ip_forward=1")
	src.IP(t, "route", "add", "default", "via", "10.81.1.1")
	dst.IP(t, "route", "add", "default", "via", "10.81.2.1")
	return src
}

func TestPingAndTraceroute(t *testing.T) {
	src := topology(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src.Do(t, func() {
		var replies []Reply
		sum, err := Ping(ctx, PingOptions{Host: "10.81.2.2", Count: 3, Interval: 200 * time.Millisecond}, func(r Reply) { replies = append(replies, r) })
		if err != nil {
			t.Fatal(err)
		}
		if sum.Sent != 3 || sum.Received != 3 || len(replies) != 3 || sum.Min <= 0 || sum.Max < sum.Min || sum.Avg < sum.Min {
			t.Fatalf("ping: %+v, replies %+v", sum, replies)
		}
		for i, r := range replies {
			// The router decremented the TTL: 64 - 1.
			if r.Seq != i+1 || r.From != netip.MustParseAddr("10.81.2.2") || r.TTL != 63 || r.Bytes != 64 || r.Err != "" {
				t.Errorf("reply %d: %+v", i, r)
			}
		}

		// Bound to the interface: the same.
		sum, err = Ping(ctx, PingOptions{Host: "10.81.2.2", Device: "d-src", Count: 1}, func(Reply) {})
		if err != nil || sum.Received != 1 {
			t.Errorf("ping bound to d-src: %+v %v", sum, err)
		}
		if _, err := Ping(ctx, PingOptions{Host: "10.81.2.2", Device: "nope0", Count: 1}, func(Reply) {}); err == nil || !strings.Contains(err.Error(), "nope0") {
			t.Errorf("ping bound to a missing interface: %v", err)
		}

		// Nobody at 10.81.1.99: timeouts.
		replies = nil
		sum, err = Ping(ctx, PingOptions{Host: "10.81.1.99", Count: 2, Interval: 200 * time.Millisecond, Timeout: 300 * time.Millisecond}, func(r Reply) { replies = append(replies, r) })
		if err != nil || sum.Received != 0 || sum.Sent != 2 || len(replies) != 2 || replies[0].Err != "timeout" {
			t.Errorf("ping nobody: %+v %+v %v", sum, replies, err)
		}
		// No route at the router: it says so.
		replies = nil
		Ping(ctx, PingOptions{Host: "10.81.9.9", Count: 1}, func(r Reply) { replies = append(replies, r) })
		if len(replies) != 1 || !strings.Contains(replies[0].Err, "unreachable") || replies[0].From != netip.MustParseAddr("10.81.1.1") {
			t.Errorf("ping without a route: %+v", replies)
		}

		var hops []Hop
		if err := Traceroute(ctx, TraceOptions{Host: "10.81.2.2", Probes: 2, Timeout: 500 * time.Millisecond}, func(h Hop) { hops = append(hops, h) }); err != nil {
			t.Fatal(err)
		}
		if len(hops) != 2 || hops[0].Addr != netip.MustParseAddr("10.81.1.1") || hops[0].Reached ||
			hops[1].Addr != netip.MustParseAddr("10.81.2.2") || !hops[1].Reached || len(hops[1].RTTs) != 2 || hops[1].RTTs[0] <= 0 {
			t.Fatalf("traceroute: %+v", hops)
		}
	})
	if _, err := Ping(ctx, PingOptions{Host: "10.81.2.2", Count: 1000}, func(Reply) {}); err == nil {
		t.Error("count 1000 accepted")
	}
}
