package dhcp6c

import (
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// startDnsmasq6 runs Debian's dnsmasq as the ISP's DHCPv6 server on s0:
// addresses (IA_NA) of 2001:db8:86::100-1ff for 2 minutes (its
// shortest), tagging the client by what it sends and answering by tag:
// the user class "voip" (option 15, parsed by its 2-byte lengths) gets
// the DNS server 2001:db8:86::53, the vendor class data "vdata" of
// enterprise 3561 (16) the search domain vendor.example; a client
// without option 1234 = de:ad, or whose user class matches "tvvoip"
// (two classes run together), is ignored.
func startDnsmasq6(t *testing.T, l *lab) *netnstest.Buffer {
	t.Helper()
	buf := &netnstest.Buffer{}
	cmd := l.isp.Command("dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--user=root", "--pid-file=",
		"--port=0", "--bind-interfaces", "--interface=s0",
		"--dhcp-range=2001:db8:86::100,2001:db8:86::1ff,64,2m", "--dhcp-leasefile="+filepath.Join(l.dir, "dnsmasq.leases"),
		"--dhcp-userclass=set:uc,voip", "--dhcp-userclass=set:bad,tvvoip", "--dhcp-vendorclass=set:vc,enterprise:3561,vdata",
		"--dhcp-match=set:opt,option6:1234,de:ad", "--dhcp-ignore=tag:!opt", "--dhcp-ignore=tag:bad",
		"--dhcp-option=tag:uc,option6:dns-server,[2001:db8:86::53]", "--dhcp-option=tag:vc,option6:domain-search,vendor.example",
		"--log-facility=-", "--log-dhcp")
	cmd.Stdout, cmd.Stderr = buf, buf
	netnstest.Start(t, cmd)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("dnsmasq's log:\n%s", buf.String())
		}
	})
	netnstest.WaitFor(t, 30*time.Second, "dnsmasq serving DHCPv6", func() bool {
		return strings.Contains(buf.String(), "DHCPv6, IP range 2001:db8:86::100")
	})
	return buf
}

// scaledClock runs factor times faster than real time from base.
type scaledClock struct {
	base   time.Time
	factor time.Duration
}

func (c scaledClock) Now() time.Time { return c.base.Add(time.Since(c.base) * c.factor) }

func (c scaledClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(at.Sub(c.Now()) / c.factor)
	return t.C, func() { t.Stop() }
}

// TestNetnsISPOptions6: a client with the ISP's user class, vendor class
// and option 1234 gets an address, the DNS server and the domain that
// dnsmasq gives only to the tags those set, and keeps them through a
// renewal (on a clock 8 times faster than real time:
// dnsmasq's T1 of 60 s is 7.5 s); the same client without option 1234
// gets nothing.
func TestNetnsISPOptions6(t *testing.T) {
	testenv.Require(t, "root", "ip", "dnsmasq")
	l := newLink(t)
	startDnsmasq6(t, l)
	cfg := Config{Interface: "c0", MAC: boxMAC, StateDir: filepath.Join(l.dir, "state"), Address: true, NoPrefix: true,
		UserClass:   [][]byte{[]byte("iptv"), []byte("voip")},
		VendorClass: &VendorClass{Enterprise: 3561, Data: [][]byte{[]byte("vdata")}},
		Options:     []Option{{Code: 1234, Value: []byte{0xde, 0xad}}}}

	t.Run("without option 1234", func(t *testing.T) {
		other := cfg
		other.MAC, other.Options, other.StateDir = net.HardwareAddr{0x02, 0x86, 0, 0, 0, 0x42}, nil, ""
		c, ch, stop := l.runClient(t, other)
		netnstest.WaitFor(t, 10*time.Second, "two SOLICITs", func() bool { return c.Stats().Sent["SOLICIT"] >= 2 })
		stop()
		if s := c.Stats(); s.Received["ADVERTISE"] != 0 || len(ch) != 0 {
			t.Errorf("stats %+v, %d changes: want no answer", s, len(ch))
		}
	})

	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.core.Clock = scaledClock{base: time.Now(), factor: 8}
	ch, _ := l.run(t, c)
	got := next(t, ch, 20*time.Second).new
	check := func(what string, got *Lease) {
		t.Helper()
		pool := netip.MustParsePrefix("2001:db8:86::/64")
		if got == nil || len(got.Addrs) != 1 || !pool.Contains(got.Addrs[0].Addr) ||
			!slices.Equal(got.DNS, []netip.Addr{netip.MustParseAddr("2001:db8:86::53")}) || !slices.Equal(got.Domains, []string{"vendor.example"}) {
			t.Fatalf("%s: %+v, want an address of %v, DNS 2001:db8:86::53, domain vendor.example", what, got, pool)
		}
	}
	check("binding", got)
	netnstest.WaitFor(t, 20*time.Second, "a renewal answered", func() bool {
		s := c.Stats()
		return s.Sent["RENEW"] >= 1 && s.Received["REPLY"] >= 2 && s.State == "bound"
	})
	check("after the renewal", c.Current())
	select {
	case c := <-ch:
		t.Errorf("the renewal changed the binding: %+v -> %+v", c.old, c.new)
	default:
	}
}
