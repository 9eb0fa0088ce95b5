package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/internal/keatest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The IPv6 suite runs the appliance in NAT mode with IPv6 left at its
// default (on) behind an ISP that delegates prefixes:
//
//	isp (2001:db8:64::1/64, MTU 1400): kea-dhcp6 delegating /56s, radvd (the WAN's default router), a web server,
//	  │   dnsmasq on 100.64.0.1:53 (the box's upstream DNS: www.isp.test has an AAAA)
//	  └─ p1 [box: wan 100.64.0.2/24 | lan 192.168.8.1/24, RAs for the delegation's first /64, DNS and
//	         stateless DHCPv6 on the box's ::1 there] p2
//	                                                   └─ h1, kernel SLAAC

const v6Config = `{
  "version": 3,
  "mode": "nat",
  "ports": [
    {"name": "wan", "interface": "p1", "role": "wan", "addresses": ["100.64.0.2/24"], "mtu": 1400},
    {"name": "lan", "interface": "p2", "role": "lan", "addresses": ["192.168.8.1/24"]}
  ],
  "nat": {"gateway": "100.64.0.1"},
  "dns": {"upstreams": ["100.64.0.1"]},
  "rules": {"rules": [{"iif": "wan", "l4proto": "tcp", "dport": "9000", "action": "accept", "comment": "h1's service"}]},
  "time": {"servers": ["100.64.0.1"]}
}
`

type v6Lab struct {
	*lab
	isp     *netnstest.Namespace
	kea     *keatest.Server
	cfgPath string
	wanLL   netip.Addr
}

// ispName6 is www.isp.test's AAAA at the ISP's DNS server.
const ispName6 = "2001:db8:64::80"

func ispKea(pool string) keatest.Config {
	return keatest.Config{Iface: "eth0", Subnet: netip.MustParsePrefix("2001:db8:64::/64"),
		PDPool: netip.MustParsePrefix(pool), DelegatedLen: 56, T1: 3, T2: 5, Preferred: 3600, Valid: 7200,
		DNS: []netip.Addr{netip.MustParseAddr("2001:db8:64::53")}}
}

// v6LabSetup is what newV6Lab's ISP runs and what it does before the box
// starts: kea's configuration, radvd's prefix, a hook.
type v6LabSetup struct {
	kea         keatest.Config
	radvd       keatest.Radvd
	beforeStart func(*v6Lab)
}

func newV6Lab(t *testing.T, opts ...func(*v6LabSetup)) *v6Lab {
	t.Helper()
	setup := v6LabSetup{kea: ispKea("2001:db8:6600::/48"), radvd: keatest.Radvd{Prefix: netip.MustParsePrefix("2001:db8:64::/64")}}
	for _, o := range opts {
		o(&setup)
	}
	requireNetns(t)
	testenv.Require(t, "kea-dhcp6", "radvd", "curl", "dnsmasq", "dig", "rdisc6", "dhclient")
	l := &v6Lab{lab: &lab{t: t, dir: t.TempDir()}}
	l.box = netnstest.New(t, "ipv6-b")
	l.isp = netnstest.New(t, "ipv6-i")
	h := netnstest.New(t, "ipv6-h")
	for _, ns := range []*netnstest.Namespace{l.box, l.isp, h} {
		ns.IP(t, "link", "set", "lo", "up")
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	l.isp.Sysctl(t, "net.ipv6.conf.all.forwarding=1")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, MTU: 1400, Up: true},
		netnstest.End{NS: l.isp, Name: "eth0", Off: noOff, MTU: 1400, Addrs: []string{"100.64.0.1/24", "2001:db8:64::1/64"}, Up: true})
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:78:00:00:00:01", Up: true})
	l.hosts = []*netnstest.Namespace{h}
	mac, _ := net.ParseMAC(strings.Fields(l.box.IP(t, "-br", "link", "show", "p1"))[2])
	l.wanLL = dataplane.LinkLocal([6]byte(mac))
	l.kea = keatest.Start(t, l.isp, filepath.Join(l.dir, "kea"), setup.kea)
	keatest.StartRadvdWith(t, l.isp, "eth0", setup.radvd)
	netnstest.StartLogged(t, "the ISP's dnsmasq", l.isp.Command("dnsmasq", "--no-daemon", "--conf-file=/dev/null",
		"--listen-address=100.64.0.1", "--bind-interfaces", "--no-resolv", "--no-hosts", "--log-queries",
		"--address=/www.isp.test/"+ispName6, "--address=/www.isp.test/100.64.0.80"))
	serveHTTP(t, l.isp, "[2001:db8:64::1]:8080")
	serveHTTP(t, h, "[::]:9000")
	serveHTTP(t, h, "[::]:9001")
	l.cfgPath = filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(l.cfgPath, []byte(v6Config), 0o644); err != nil {
		t.Fatal(err)
	}
	if setup.beforeStart != nil {
		setup.beforeStart(l)
	}
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	return l
}

// staticGateway is the ISP's link-local address in newStaticV6Lab (the
// EUI-64 of its MAC), the box's IPv6 next hop.
var staticGateway = netip.MustParseAddr("fe80::64:ff:fe00:1")

// newStaticV6Lab runs the appliance in NAT mode with the static prefix
// static (its first /64 on the LAN, where h1 autoconfigures) behind an
// ISP without DHCPv6 that routes it to the box: the ISP (2001:db8:64::1
// on the WAN, staticGateway) and h1, in namespaces named after prefix.
// cfg is the config the box runs.
func newStaticV6Lab(t *testing.T, prefix string, static netip.Prefix) (v *v6Lab, cfg string) {
	t.Helper()
	requireNetns(t)
	testenv.Require(t, "curl")
	l := &lab{t: t, dir: t.TempDir()}
	l.box = netnstest.New(t, prefix+"-b")
	isp := netnstest.New(t, prefix+"-i")
	h := netnstest.New(t, prefix+"-h")
	for _, ns := range []*netnstest.Namespace{l.box, isp, h} {
		ns.IP(t, "link", "set", "lo", "up")
		ns.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	}
	isp.Sysctl(t, "net.ipv6.conf.all.forwarding=1")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, Up: true},
		netnstest.End{NS: isp, Name: "eth0", Off: noOff, MAC: "02:64:00:00:00:01", Addrs: []string{"100.64.0.1/24", "2001:db8:64::1/64"}, Up: true})
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:78:00:00:00:01", Up: true})
	l.hosts = []*netnstest.Namespace{h}
	v = &v6Lab{lab: l, isp: isp, wanLL: dataplane.LinkLocal(macOf(t, l.box, "p1"))}
	isp.IP(t, "-6", "route", "replace", static.String(), "via", v.wanLL.String(), "dev", "eth0")
	serveHTTP(t, isp, "[2001:db8:64::1]:8080")
	cfg = strings.Replace(v6Config, `"time":`, `"ipv6": {"prefix": "`+static.String()+`", "gateway": "`+staticGateway.String()+`"},
  "time":`, 1)
	v.cfgPath = filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(v.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", v.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	return v, cfg
}

// delegation waits for the box's lease file to hold a prefix other than
// not, and routes it from the ISP to the box (kea installs no routes).
func (l *v6Lab) delegation(t *testing.T, not netip.Prefix) netip.Prefix {
	t.Helper()
	var got netip.Prefix
	eventually(t, 15*time.Second, "a delegated prefix in the box's lease file", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(l.dir, "dhcp6-lease.json"))
		var f struct {
			Prefixes []struct{ Prefix netip.Prefix }
		}
		if err != nil || json.Unmarshal(b, &f) != nil || len(f.Prefixes) == 0 {
			return false, fmt.Sprintf("%v %s", err, b)
		}
		got = f.Prefixes[0].Prefix
		return got != not, string(b)
	})
	l.isp.IP(t, "-6", "route", "replace", got.String(), "via", l.wanLL.String(), "dev", "eth0")
	return got
}

// slaac waits for h1 to have a preferred address in the first /64 of d.
func (l *v6Lab) slaac(t *testing.T, d netip.Prefix) netip.Addr {
	t.Helper()
	lan := netip.PrefixFrom(d.Addr(), 64)
	want := netip.MustParseAddr(strings.TrimSuffix(lan.Addr().String(), "::") + "::78:ff:fe00:1") // EUI-64 of 02:78:00:00:00:01
	eventually(t, 15*time.Second, "h1's SLAAC address "+want.String(), func() (bool, string) {
		out, _ := l.hosts[0].Output("ip", "-6", "addr", "show", "dev", "eth0", "scope", "global")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, want.String()+"/64") && !strings.Contains(line, "deprecated") && !strings.Contains(line, "tentative") {
				return true, out
			}
		}
		return false, out
	})
	return want
}

// reach checks that h1 pings and fetches from the ISP's server from addr.
func (l *v6Lab) reach(t *testing.T, addr netip.Addr) {
	t.Helper()
	eventually(t, 10*time.Second, "h1 pings the ISP's server from "+addr.String(), func() (bool, string) {
		out, err := l.host(1, "ping", "-6", "-c", "1", "-W", "1", "-I", addr.String(), "2001:db8:64::1")
		return err == nil, out
	})
	out, err := l.host(1, "curl", "-6", "-s", "--max-time", "5", "--interface", addr.String(), "http://[2001:db8:64::1]:8080/")
	if err != nil || !strings.HasPrefix(out, "from ["+addr.String()+"]:") {
		t.Errorf("h1 curl -6 to the server: %v %q, want it seen from %v", err, out, addr)
	}
}

// serveHTTP answers with the client's address on addr inside ns.
func serveHTTP(t *testing.T, ns *netnstest.Namespace, addr string) {
	t.Helper()
	serveIn(t, ns, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from %s", r.RemoteAddr)
	}))
}

// serveIn serves h on addr inside ns until the test's cleanup, which
// closes the server and waits for it (httptest's Close).
func serveIn(t *testing.T, ns *netnstest.Namespace, addr string, h http.Handler) {
	t.Helper()
	var ln net.Listener
	var err error
	ns.Do(t, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close() // httptest's own; it serves ln
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
}

// dig asks the DNS server at server for name's AAAA from h1 (ns 1) or the
// ISP (ns 0) and returns the answers ("" for none or no answer).
func (l *v6Lab) dig(t *testing.T, ns int, server netip.Addr, name string, args ...string) string {
	t.Helper()
	cmd := append([]string{"dig", "+short", "+time=2", "+tries=1", "AAAA", name, "@" + server.String()}, args...)
	var out string
	if ns == 0 {
		out, _ = l.isp.Output(cmd...)
	} else {
		out, _ = l.host(ns, cmd...)
	}
	if strings.Contains(out, ";;") { // a timeout or error, not an answer
		return ""
	}
	return strings.TrimSpace(out)
}
