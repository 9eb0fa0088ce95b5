package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"e1kbox/internal/ispvm"
	"e1kbox/internal/netnstest"
)

// pppoeLab is the PPPoE lab of TestPPPoEWAN (pppoe_netns_test.go) for the
// other PPPoE tests: the box's WAN p1 is the ISP VM's tap, h1 is on its
// LAN p2 (192.168.7.10/24, default route via the box).
type pppoeLab struct {
	*lab
	vm *ispvm.VM
	h  *netnstest.Namespace // h1
}

// newPPPoELab boots the ISP VM of vmc (its Netns and Tap are the lab's;
// CHAP with pppoeLabPassword unless vmc says otherwise) and starts the
// appliance with config, waiting until the session is up.
func newPPPoELab(t *testing.T, vmc ispvm.Config, config string) *pppoeLab {
	t.Helper()
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
	vmc.Netns, vmc.Tap = l.box.Name(), "p1"
	if vmc.Password == "" {
		vmc.CHAP, vmc.Password = true, pppoeLabPassword
	}
	vm := ispvm.Start(t, vmc)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	start := time.Now()
	if _, err := vm.WaitEvent(90*time.Second, "up"); err != nil {
		link, _ := l.box.Output("ip", "-s", "link", "show", "p1")
		t.Fatalf("no PPPoE session: %v; WAN link: %s", err, link)
	}
	t.Logf("session up %v after the start", time.Since(start).Round(time.Millisecond))
	return &pppoeLab{lab: l, vm: vm, h: h}
}
