package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/internal/vlanpeer"
)

// The WAN-over-VLAN lab: the ISP is an ordinary untagged namespace whose
// wire carries VLAN 7 (vlanpeer on its veth end: its frames leave tagged,
// only VLAN 7's reach it):
//
//	isp (100.64.0.1/24, MTU 1400, VLAN 7 on the wire): dnsmasq
//	  └─ p1 [box: wan by DHCP over VLAN 7, control priority 6 | lan 192.168.7.1/24] p2
//	                                                                            └─ h1 192.168.7.10
const wanVLANConfig = `{
  "version": 3,
  "mode": "nat",
  "ports": [
    {"name": "wan", "interface": "p1", "role": "wan"},
    {"name": "lan1", "interface": "p2", "role": "lan", "addresses": ["192.168.7.1/24"]}
  ],
  "nat": {"wanDHCP": true, "wan": {"vlan": {"id": 7, "controlPCP": 6}}}
}
`

// TestWANVLANDHCP: the appliance in NAT mode with nat.wan.vlan {7,
// controlPCP 6} gets its WAN lease from the ISP's dnsmasq over VLAN 7:
// every DHCP frame the ISP's wire saw from it carried VLAN 7 and priority
// 6, none went untagged; then a LAN host reaches the ISP through the box
// (the data path over the VLAN, the dataplane's). When the ISP moves the
// line to VLAN 8 and the config follows (applied live), the client
// restarts on VLAN 8 and the box leases and forwards again.
func TestWANVLANDHCP(t *testing.T) {
	t.Parallel()
	requireNetns(t)
	testenv.Require(t, "dnsmasq")
	l := &svcLab{lab: &lab{t: t, dir: t.TempDir()}}
	l.box = netnstest.New(t, "e1kvb")
	l.box.IP(t, "link", "set", "lo", "up")
	l.isp = netnstest.New(t, "e1kvi")
	l.isp.IP(t, "link", "set", "lo", "up")
	h := netnstest.New(t, "e1kvh")
	h.IP(t, "link", "set", "lo", "up")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, Up: true},
		netnstest.End{NS: l.isp, Name: "eth0", Off: noOff, MTU: 1400, Addrs: []string{svcISP + "/24"}, Up: true})
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p2", Off: noOff, Up: true},
		netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: "02:77:00:00:00:01", Addrs: []string{"192.168.7.10/24"}, Up: true})
	h.IP(t, "route", "add", "default", "via", svcRouter)
	l.hosts = []*netnstest.Namespace{h}
	peer := vlanpeer.In(t, l.isp, "eth0", 7, 0)
	l.dnsmasq(t, "100.64.0.100,100.64.0.150")
	l.cfgPath = filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(l.cfgPath, []byte(wanVLANConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))

	w := l.wan(t, 30*time.Second, "")
	addr := strings.Split(w, "/")[0]
	if !strings.Contains(l.ispLeases(), addr) {
		t.Errorf("the ISP's lease file has no %s:\n%s", addr, l.ispLeases())
	}
	dhcp := vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}
	if n := peer.Frames(t, dhcp); n < 2 { // DISCOVER, REQUEST
		seen, _ := peer.Seen()
		t.Errorf("the ISP's wire carried %d DHCP frames with VLAN 7 and priority 6, want at least 2; seen %+v", n, seen)
	}
	anyPCP := dhcp
	anyPCP.PCP = 0
	if n := peer.Frames(t, anyPCP) - peer.Frames(t, dhcp); n != 0 {
		t.Errorf("%d DHCP frames on VLAN 7 with another priority than 6", n)
	}
	if n := peer.Frames(t, vlanpeer.Key{Tagged: 0, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}); n != 0 {
		t.Errorf("%d untagged DHCP frames on the ISP's wire, want none", n)
	}

	t.Run("a LAN host reaches the ISP over the VLAN", func(t *testing.T) {
		eventually(t, 10*time.Second, "h1's ping to the ISP answered", func() (bool, string) {
			out, err := l.host(1, "ping", "-c", "1", "-W", "1", svcISP)
			return err == nil, fmt.Sprintf("%v %s", err, out)
		})
		echo := vlanpeer.Key{Tagged: 1, VID: 7, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_ICMP, Port: 8}
		if n := peer.Frames(t, echo); n == 0 {
			seen, _ := peer.Seen()
			t.Errorf("no echo request on VLAN 7 on the ISP's wire; seen %+v", seen)
		}
	})

	t.Run("the line moves to VLAN 8", func(t *testing.T) {
		if err := peer.Close(); err != nil {
			t.Fatal(err)
		}
		peer8 := vlanpeer.In(t, l.isp, "eth0", 8, 0)
		l.apply(t, strings.Replace(wanVLANConfig, `"id": 7`, `"id": 8`, 1), true)
		dhcp8 := dhcp
		dhcp8.VID = 8
		eventually(t, 30*time.Second, "a DHCP exchange over VLAN 8", func() (bool, string) {
			seen, _ := peer8.Seen()
			return peer8.Frames(t, dhcp8) >= 1, fmt.Sprintf("seen %+v", seen)
		})
		l.wan(t, 30*time.Second, "")
		eventually(t, 15*time.Second, "h1's ping to the ISP answered over VLAN 8", func() (bool, string) {
			out, err := l.host(1, "ping", "-c", "1", "-W", "1", svcISP)
			return err == nil, fmt.Sprintf("%v %s", err, out)
		})
	})
}
