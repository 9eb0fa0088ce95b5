package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/ispvm"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// The PPPoE lab: the ISP is a VM (package ispvm: Debian's pppoe-server
// and pppd, CHAP) on a tap that is the box's WAN port:
//
//	ISP VM (pppoe-server, upstream 198.51.100.1: ping, HTTP /big)
//	  └─ p1 (tap) [box: wan by PPPoE (CHAP) | lan 192.168.7.1/24] p2
//	                                                             └─ h1 192.168.7.10
const pppoeLabPassword = "pppoe-s3cret-pw"

func pppoeLabConfig(vlan int) string {
	vl := ""
	if vlan != 0 {
		vl = fmt.Sprintf(`"vlan": {"id": %d, "controlPCP": 6}, `, vlan)
	}
	return `{
  "version": 3,
  "mode": "nat",
  "ports": [
    {"name": "wan", "interface": "p1", "role": "wan"},
    {"name": "lan1", "interface": "p2", "role": "lan", "addresses": ["192.168.7.1/24"]}
  ],
  "nat": {"wan": {` + vl + `"pppoe": {"username": "e1kbox", "password": "` + pppoeLabPassword + `", "lcpEchoInterval": "1s"}}},
  "ipv6": {"enabled": false},
  "time": {"servers": ["198.51.100.1"]}
}
`
}

// TestPPPoEWAN: the appliance in NAT mode with nat.wan.pppoe dials the
// ISP VM (CHAP): the session comes up, a LAN host pings the ISP's
// upstream and fetches /big (its SHA-256) through it, /api/router shows
// mode pppoe with the session ID and the AC name, /api/config does not
// show the password; after a server-side disconnect the LAN reaches the
// upstream again within 30 s; a config applied with the password's
// placeholder redials with the stored password. The same over VLAN 7.
func TestPPPoEWAN(t *testing.T) {
	for _, vlan := range []int{0, 7} {
		t.Run(fmt.Sprintf("vlan%d", vlan), func(t *testing.T) { pppoeWAN(t, vlan) })
	}
}

func pppoeWAN(t *testing.T, vlan int) {
	requireNetns(t)
	l := &lab{t: t, dir: t.TempDir()}
	l.box = netnstest.New(t, "e1kpb")
	l.box.IP(t, "link", "set", "lo", "up")
	h := netnstest.New(t, "e1kph")
	h.IP(t, "link", "set", "lo", "up")
	l.box.IP(t, "tuntap", "add", "dev", "p1", "mode", "tap")
	l.box.Sysctl(t, "net.ipv6.conf.p1.disable_ipv6=1")
	l.box.IP(t, "link", "set", "p1", "up")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:77:00:00:00:01", Addrs: []string{"192.168.7.10/24"}, Up: true})
	h.IP(t, "route", "add", "default", "via", svcRouter)
	l.hosts = []*netnstest.Namespace{h}
	vm := ispvm.Start(t, ispvm.Config{Netns: l.box.Name(), Tap: "p1", VLAN: vlan, CHAP: true, Password: pppoeLabPassword})
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(pppoeLabConfig(vlan)), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	start := time.Now()
	if _, err := vm.WaitEvent(90*time.Second, "up"); err != nil {
		t.Fatalf("no PPPoE session: %v", err)
	}
	t.Logf("session up %v after the start", time.Since(start).Round(time.Millisecond))
	up := vm.Config.Upstream4.String()
	reach := func(what string, d time.Duration) {
		t.Helper()
		eventually(t, d, what, func() (bool, string) {
			out, err := l.host(1, "ping", "-c", "1", "-W", "1", up)
			return err == nil, fmt.Sprintf("%v %s", err, out)
		})
	}
	reach("h1's ping to the ISP's upstream answered through the session", 30*time.Second)
	fetch := time.Now()
	out, err := l.host(1, "sh", "-c", "curl -sS --max-time 60 http://"+up+"/big | sha256sum")
	if err != nil || !strings.HasPrefix(out, vm.Image.BigSHA256) {
		t.Fatalf("fetching /big through the session: %v %q, want SHA-256 %s", err, out, vm.Image.BigSHA256)
	}
	t.Logf("/big (%d MiB) in %v", ispvm.BigSize>>20, time.Since(fetch).Round(time.Millisecond))

	var st webui.RouterStatus
	eventually(t, 10*time.Second, "/api/router shows the session", func() (bool, string) {
		code, body := l.boxGet("/api/router")
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			return false, fmt.Sprintf("HTTP %d %s", code, body)
		}
		p := st.WAN.Link.PPPoE
		return st.WAN.Mode == webui.WANModePPPoE && st.WAN.State == webui.WANBound && p != nil && p.SessionID != 0 &&
			p.ACName == "ispvm" && st.WAN.Address.Bits() == 32, body
	})
	if vlan != 0 && (st.WAN.Link.VLAN == nil || st.WAN.Link.VLAN.ID != uint16(vlan)) {
		t.Errorf("/api/router link %+v: want VLAN %d", st.WAN.Link, vlan)
	}
	if code, body := l.boxGet("/api/config"); code != 200 || strings.Contains(body, pppoeLabPassword) || !strings.Contains(body, "pppoe") {
		t.Errorf("/api/config: HTTP %d, shows the password or no pppoe section: %s", code, body)
	}
	if code, body := l.boxGet("/metrics"); code != 200 || !strings.Contains(body, "e1kbox_wan_pppoe_up 1\n") {
		t.Errorf("/metrics: HTTP %d without e1kbox_wan_pppoe_up 1", code)
	}

	if err := vm.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if _, err := vm.WaitEvent(30*time.Second, "down"); err != nil {
		t.Fatalf("the server-side disconnect: %v", err)
	}
	down := time.Now()
	if _, err := vm.WaitEvent(30*time.Second, "up"); err != nil {
		t.Fatalf("no session after the server-side disconnect: %v", err)
	}
	reach("h1's ping answered after the server-side disconnect", 30*time.Second-time.Since(down))
	t.Logf("the LAN reached the upstream again %v after the session went down", time.Since(down).Round(time.Millisecond))
	eventually(t, 10*time.Second, "/api/router counts the reconnect", func() (bool, string) {
		code, body := l.boxGet("/api/router")
		var st webui.RouterStatus
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.WAN.Link.PPPoE == nil {
			return false, fmt.Sprintf("HTTP %d %s", code, body)
		}
		return st.WAN.Link.PPPoE.Reconnects >= 1 && st.WAN.State == webui.WANBound, body
	})

	// A config edited from what the API shows (the password's
	// placeholder) keeps the password: the restarted client (a new echo
	// setting) authenticates again.
	edited := strings.Replace(pppoeLabConfig(vlan), `"password": "`+pppoeLabPassword+`", "lcpEchoInterval": "1s"`,
		`"password": "(unchanged)", "lcpEchoInterval": "2s"`, 1)
	l.apply(t, edited, true)
	if _, err := vm.WaitEvent(30*time.Second, "down"); err != nil {
		t.Fatalf("the old session did not end on the config change: %v", err)
	}
	if _, err := vm.WaitEvent(60*time.Second, "up"); err != nil {
		t.Fatalf("no session after a config change that kept the password: %v", err)
	}
	reach("h1's ping answered after the PPPoE config change", 30*time.Second)
}

// pppoe6LabConfig is pppoeLabConfig with IPv6 on.
func pppoe6LabConfig(vlan int) string {
	return strings.Replace(pppoeLabConfig(vlan), `"ipv6": {"enabled": false}`, `"ipv6": {"enabled": true}`, 1)
}

// TestPPPoEIPv6: IPv6 over the PPPoE session: once IPv6CP is up the box
// asks the ISP VM's dibbler-server for a prefix over the session, h1
// autoconfigures in its first /64 from the box's RAs (which advertise
// the session's MTU, 1492), pings the ISP's IPv6 upstream and fetches
// /big from it over IPv6; /api/dataplane shows the IPv6 router's next
// hop (the PPP peer's link-local address) and the LAN /64. After a
// server-side disconnect, with the ISP delegating another prefix from
// the next session on, h1 is back over IPv6 within 30 s in the new /64
// and its old address is deprecated; another reconnect that keeps the
// prefix keeps h1's address. The same over VLAN 7.
func TestPPPoEIPv6(t *testing.T) {
	for _, vlan := range []int{0, 7} {
		t.Run(fmt.Sprintf("vlan%d", vlan), func(t *testing.T) { pppoeIPv6(t, vlan) })
	}
}

func pppoeIPv6(t *testing.T, vlan int) {
	requireNetns(t)
	testenv.Require(t, "ping", "curl", "sha256sum")
	l := &lab{t: t, dir: t.TempDir()}
	l.box = netnstest.New(t, "e1kp6b")
	l.box.IP(t, "link", "set", "lo", "up")
	h := netnstest.New(t, "e1kp6h")
	h.IP(t, "link", "set", "lo", "up")
	h.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	l.box.IP(t, "tuntap", "add", "dev", "p1", "mode", "tap")
	l.box.Sysctl(t, "net.ipv6.conf.p1.disable_ipv6=1")
	l.box.IP(t, "link", "set", "p1", "up")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:77:00:00:00:01", Addrs: []string{"192.168.7.10/24"}, Up: true})
	h.IP(t, "route", "add", "default", "via", svcRouter)
	l.hosts = []*netnstest.Namespace{h}
	vm := ispvm.Start(t, ispvm.Config{Netns: l.box.Name(), Tap: "p1", VLAN: vlan, CHAP: true, Password: pppoeLabPassword})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ISP VM console:\n%s", vm.Console())
		}
	})
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(pppoe6LabConfig(vlan)), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	start := time.Now()
	ev, err := vm.WaitEvent(90*time.Second, "up6")
	if err != nil {
		t.Fatalf("no IPv6CP on the session: %v", err)
	}
	t.Logf("IPv6CP up %v after the start: %v", time.Since(start).Round(time.Millisecond), ev)

	first := vm.Config.Prefix
	addr := l.pppoeSLAAC(t, first, 60*time.Second)
	t.Logf("h1 has %v %v after the start", addr, time.Since(start).Round(time.Millisecond))
	up6 := vm.Config.Upstream6.String()
	l.ping6(t, addr, up6, 20*time.Second)
	out, err := l.host(1, "sh", "-c", "curl -6 -sS --max-time 60 http://["+up6+"]/big | sha256sum")
	if err != nil || !strings.HasPrefix(out, vm.Image.BigSHA256) {
		t.Fatalf("fetching /big over IPv6 through the session: %v %q, want SHA-256 %s", err, out, vm.Image.BigSHA256)
	}
	if mtu, err := l.host(1, "cat", "/proc/sys/net/ipv6/conf/eth0/mtu"); err != nil || strings.TrimSpace(mtu) != "1492" {
		t.Errorf("h1's IPv6 MTU %q (%v), want the session's 1492 from the box's RAs", mtu, err)
	}
	// pppd's link-locals: "up6 ppp0 <its> <ours>".
	if len(ev.Args) < 3 {
		t.Fatalf("up6 event %v: want the link-local addresses", ev)
	}
	peerLL, ourLL := netip.MustParseAddr(ev.Args[1]), netip.MustParseAddr(ev.Args[2])
	lan := netip.PrefixFrom(first.Addr(), 64)
	eventually(t, 10*time.Second, "/api/dataplane shows the PPP peer as next hop, IPv6CP's link-local and the LAN /64", func() (bool, string) {
		v6 := l.stats(t).IPv6
		if v6 == nil {
			return false, "no ipv6"
		}
		gw, _ := netip.ParseAddr(v6.Gateway)
		return gw == peerLL && len(v6.WANAddrs) > 0 && v6.WANAddrs[0] == ourLL && len(v6.LAN) > 0 && v6.LAN[0] == lan,
			fmt.Sprintf("%+v", v6)
	})

	if p := l.conntrack(t, "kind=routed&addr="+addr.String()); p.Total == 0 {
		t.Errorf("no routed connection of h1's %v before the reconnect: %+v", addr, p)
	}

	// The ISP renumbers at the next session.
	next := netip.MustParsePrefix("2001:db8:200::/56")
	if err := vm.SetPrefix(next); err != nil {
		t.Fatal(err)
	}
	if err := vm.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if _, err := vm.WaitEvent(30*time.Second, "down"); err != nil {
		t.Fatalf("the server-side disconnect: %v", err)
	}
	down := time.Now()
	if _, err := vm.WaitEvent(30*time.Second, "up6"); err != nil {
		t.Fatalf("no IPv6CP after the server-side disconnect: %v", err)
	}
	t.Logf("IPv6CP up again %v after the session went down", time.Since(down).Round(time.Millisecond))
	naddr := l.pppoeSLAAC(t, next, 30*time.Second-time.Since(down))
	l.ping6(t, naddr, up6, 30*time.Second-time.Since(down))
	t.Logf("h1 reached the ISP over IPv6 from the new prefix's %v %v after the session went down",
		naddr, time.Since(down).Round(time.Millisecond))
	if out, _ := h.Output("ip", "-6", "addr", "show", "dev", "eth0", "scope", "global"); !deprecated(out, addr) {
		t.Errorf("h1's old address %v is not deprecated:\n%s", addr, out)
	}
	// The old prefix's connections (curl's, closing for 120 s) went with
	// it; the new one's are there.
	if p := l.conntrack(t, "kind=routed&addr="+addr.String()); p.Total != 0 {
		t.Errorf("routed connections of h1's old %v after the renumbering: %+v", addr, p)
	}
	if p := l.conntrack(t, "kind=routed&addr="+naddr.String()); p.Total == 0 {
		t.Errorf("no routed connection of h1's new %v: %+v", naddr, p)
	}

	// Another reconnect, the same prefix: the LAN keeps its /64.
	if err := vm.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if _, err := vm.WaitEvent(30*time.Second, "down"); err != nil {
		t.Fatalf("the second disconnect: %v", err)
	}
	down = time.Now()
	l.ping6(t, naddr, up6, 30*time.Second)
	t.Logf("h1 reached the ISP over IPv6 again %v after the second session went down (same prefix)",
		time.Since(down).Round(time.Millisecond))
	if out, _ := h.Output("ip", "-6", "addr", "show", "dev", "eth0", "scope", "global"); deprecated(out, naddr) {
		t.Errorf("h1's address %v was deprecated by a reconnect that kept the prefix:\n%s", naddr, out)
	}
}

// pppoeSLAAC waits for h1 to have a preferred address (EUI-64 of its MAC
// 02:77:00:00:00:01) in the first /64 of d.
func (l *lab) pppoeSLAAC(t *testing.T, d netip.Prefix, within time.Duration) netip.Addr {
	t.Helper()
	lan := netip.PrefixFrom(d.Masked().Addr(), 64)
	want := netip.MustParseAddr(strings.TrimSuffix(lan.Addr().String(), "::") + "::77:ff:fe00:1")
	eventually(t, within, "h1's SLAAC address "+want.String(), func() (bool, string) {
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

// ping6 waits for h1's ping from src to dst to be answered.
func (l *lab) ping6(t *testing.T, src netip.Addr, dst string, within time.Duration) {
	t.Helper()
	eventually(t, within, "h1's ping -6 from "+src.String()+" to "+dst, func() (bool, string) {
		out, err := l.host(1, "ping", "-6", "-c", "1", "-W", "1", "-I", src.String(), dst)
		return err == nil, fmt.Sprintf("%v %s", err, out)
	})
}

// deprecated says whether ip addr's output shows a as deprecated.
func deprecated(out string, a netip.Addr) bool {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if strings.Contains(line, a.String()+"/64") {
			return strings.Contains(line, "deprecated") ||
				i+1 < len(lines) && strings.Contains(lines[i+1], "preferred_lft 0sec")
		}
	}
	return false
}
