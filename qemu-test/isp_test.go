package qemutest

import (
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/keatest"
	"e1kbox/internal/netnstest"
)

// The ISP's IPv4 side (startISP): its address, the pool its DHCP server
// leases from, and the name its DNS server answers.
const (
	ispAddr   = "198.51.100.1"
	ispPool   = "198.51.100.100-198.51.100.150"
	ispName   = "www.wan.test"
	ispAnswer = ispAddr // what ispName resolves to
)

// startISP makes h the ISP on a box's WAN: ispAddr/24 and dnsmasq serving
// DHCP (router and DNS server: itself) from ispPool and DNS (ispName,
// nothing else). It returns dnsmasq's log.
func startISP(t *testing.T, h *host) *netnstest.Buffer {
	t.Helper()
	first, last, _ := strings.Cut(ispPool, "-")
	h.must("ip", "addr", "add", ispAddr+"/24", "dev", h.dev)
	c := h.cmd("dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--interface="+h.dev, "--bind-interfaces",
		"--dhcp-range="+first+","+last+",255.255.255.0,2m", "--dhcp-option=option:router,"+ispAddr,
		"--dhcp-option=option:dns-server,"+ispAddr, "--dhcp-leasefile="+filepath.Join(t.TempDir(), "isp.leases"),
		"--address=/"+ispName+"/"+ispAnswer, "--no-resolv", "--no-hosts")
	log := &netnstest.Buffer{}
	c.Stdout, c.Stderr = log, log // --no-daemon logs to stderr
	netnstest.Start(h.t, c)
	return log
}

// ispAcked reports whether the ISP's dnsmasq (its log) acknowledged a
// lease to mac.
func ispAcked(log *netnstest.Buffer, mac string) bool {
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "DHCPACK(") && strings.Contains(l, mac) {
			return true
		}
	}
	return false
}

// isp6 is the ISP's IPv6 side in B's namespace: kea delegating /56s from
// its pool to the box's WAN, a web server on the ISP's link address, and
// (from routesLAN on) radvd as the WAN's default router.
type isp6 struct {
	bb  *host
	log *netnstest.Buffer // the web server's log
}

const (
	isp6Link = "2001:db8:64::1"
	isp6Pool = "2001:db8:6600::/48"
	// boxWANLinkLocal is eth2's link-local address (EUI-64 of the MAC
	// firmware/vm gives the second data port, 52:54:00:e1:00:02).
	boxWANLinkLocal = "fe80::5054:ff:fee1:2"
)

func startISP6(t *testing.T, bb *host) *isp6 {
	t.Helper()
	bb.must("ip", "addr", "add", isp6Link+"/64", "dev", bb.dev)
	keatest.Start(t, bb.ns, t.TempDir(), keatest.Config{Iface: bb.dev, Subnet: netip.MustParsePrefix("2001:db8:64::/64"),
		PDPool: netip.MustParsePrefix(isp6Pool), DelegatedLen: 56, T1: 600, T2: 900, Preferred: 3600, Valid: 7200,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8:64::53")}})
	i := &isp6{bb: bb, log: &netnstest.Buffer{}}
	srv := bb.cmd("python3", "-m", "http.server", "8001", "--bind", isp6Link)
	srv.Stdout, srv.Stderr = i.log, i.log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	return i
}

// routesLAN checks IPv6 through the booted image: the box gets a /56 from
// the ISP's kea, LAN host a autoconfigures in its first /64 from the box's
// router advertisements and reaches the ISP's server with its own address
// (routed, no NAT66), and the box's IPv6 counters show it.
func (i *isp6) routesLAN(t *testing.T, b *box, a *host) {
	t.Helper()
	// The ISP's RAs start only now: sent while the box was still a
	// bridge, they would reach A and put the ISP's link on A's.
	keatest.StartRadvd(t, i.bb.ns, i.bb.dev, netip.MustParsePrefix("2001:db8:64::/64"))
	type v6 struct {
		IPv6 *struct {
			LAN       []string          `json:"lan"`
			Delegated []string          `json:"delegated"`
			Gateway   string            `json:"gateway"`
			Actions   map[string]uint64 `json:"actions"`
			Drops     map[string]uint64 `json:"drops"`
		} `json:"ipv6"`
	}
	var st v6
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		st = v6{}
		if err := b.api(http.MethodGet, "/api/dataplane", nil, &st); err == nil && st.IPv6 != nil && len(st.IPv6.LAN) > 0 && len(st.IPv6.Delegated) > 0 {
			break
		}
		time.Sleep(time.Second)
	}
	if st.IPv6 == nil || len(st.IPv6.LAN) == 0 || len(st.IPv6.Delegated) == 0 {
		t.Errorf("the box has no IPv6 delegation from the ISP's kea after 90 s: %+v", st.IPv6)
		return
	}
	d, err := netip.ParsePrefix(st.IPv6.Delegated[0])
	if err != nil || d.Bits() != 56 || !netip.MustParsePrefix(isp6Pool).Contains(d.Addr()) {
		t.Errorf("delegation %q, want a /56 of %s", st.IPv6.Delegated[0], isp6Pool)
		return
	}
	lan := netip.MustParsePrefix(st.IPv6.LAN[0])
	t.Logf("IPv6: delegated %s, LAN %s, WAN gateway %q", d, lan, st.IPv6.Gateway)
	// kea installs no routes: the ISP routes the delegation to the box.
	i.bb.must("ip", "-6", "route", "replace", d.String(), "via", boxWANLinkLocal, "dev", i.bb.dev)

	var addr netip.Addr
	deadline = time.Now().Add(60 * time.Second)
	for !addr.IsValid() && time.Now().Before(deadline) {
		out, _ := a.exec("ip", "-6", "-o", "addr", "show", "dev", a.dev, "scope", "global")
		for _, f := range strings.Fields(out) {
			if p, err := netip.ParsePrefix(f); err == nil && lan.Contains(p.Addr()) && !strings.Contains(out, "tentative") {
				addr = p.Addr()
			}
		}
		if !addr.IsValid() {
			time.Sleep(time.Second)
		}
	}
	if !addr.IsValid() {
		out, _ := a.exec("ip", "-6", "addr", "show", "dev", a.dev)
		t.Errorf("LAN host A has no SLAAC address in %s after 60 s:\n%s", lan, out)
		return
	}
	if err := a.waitPing(isp6Link, 30*time.Second); err != nil {
		var after v6
		b.api(http.MethodGet, "/api/dataplane", nil, &after)
		aState, _ := a.exec("sh", "-c", "ip -6 route; ip -6 neigh")
		ispState, _ := i.bb.exec("sh", "-c", "ip -6 route; ip -6 neigh")
		t.Errorf("LAN host A (%s) → the ISP's server over IPv6: %v\nbox: %+v\nA:\n%s\nISP:\n%s", addr, err, after.IPv6, aState, ispState)
		return
	}
	if out, err := a.exec("curl", "-6", "-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "http://["+isp6Link+"]:8001/"); err != nil || out != "200" {
		t.Errorf("curl -6 A → the ISP's server: %v %s", err, out)
	}
	if !strings.Contains(i.log.String(), addr.String()) {
		t.Errorf("the ISP's server did not see A's own address %s (routed, no NAT66); its log:\n%s", addr, i.log.String())
	}
	t.Logf("IPv6 through the box: A %s reached [%s]:8001", addr, isp6Link)
}
