package qemutest

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/firmware/vm"
	"e1kbox/internal/vlanpeer"
)

// TestWANVLANOnE1000e: the router image on its e1000e NICs, its WAN
// configured on VLAN 7 with control priority 6, behind an ISP whose tap
// carries VLAN 7 (vlanpeer: untagged inside, tagged on the wire): the
// box's DHCP client leases over the VLAN, every DHCP frame the NIC sent
// carried VLAN 7 and priority 6 as written (no offload or driver path
// moved or dropped the in-frame tag), the NIC handed the box the ISP's
// tagged replies, and a LAN host reaches the ISP through the box.
func TestWANVLANOnE1000e(t *testing.T) {
	requireQEMU(t)
	requireRoot(t)
	m := theRouterBuild(t)
	factory, err := vm.ReadFactory(filepath.Join(repoRoot, routerConfig))
	if err != nil {
		t.Fatal(err)
	}
	wan, _, err := factory.DataPort("wan")
	if err != nil {
		t.Fatal(err)
	}
	lan, _, err := factory.DataPort("lan")
	if err != nil {
		t.Fatal(err)
	}
	var taps [2]string
	taps[wan], taps[lan] = newTap(t), newTap(t)
	img := copyImage(t, m.Image)
	v, err := vm.Start(context.Background(), vm.Options{Image: img, DataTaps: taps, OneTCGThread: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &box{VM: v, t: t, password: m.Password, image: img}
	t.Cleanup(func() {
		b.saveConsole(t.Name())
		b.Kill()
	})
	for _, tap := range taps {
		if err := waitTapOpened(tap, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ispHost := attach(t, taps[wan], "")
	peer := vlanpeer.In(t, ispHost.ns, ispHost.dev, 7, 0)
	isp := startISP(t, ispHost)
	lanHost := attach(t, taps[lan], "192.168.1.10/24")
	lanHost.must("ip", "route", "add", "default", "via", "192.168.1.1")
	if err := b.waitHealthy(m.BuildTimestamp, bootTimeout); err != nil {
		t.Fatalf("%s\nnot healthy: %v", b.diagnosis(reason("the router's boot")), err)
	}

	var cur map[string]any
	if err := b.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
		t.Fatal(err)
	}
	cfg := cur["config"].(map[string]any)
	nat := cfg["nat"].(map[string]any)
	nat["wan"] = map[string]any{"vlan": map[string]any{"id": 7, "controlPCP": 6}}
	body, _ := json.Marshal(cfg)
	b.confirm(t, b.applyConfig(t, body, 120))

	wanAddr := ""
	for deadline := time.Now().Add(90 * time.Second); wanAddr == "" && time.Now().Before(deadline); time.Sleep(time.Second) {
		var st struct {
			NAT struct {
				WAN string `json:"wan"`
			} `json:"nat"`
		}
		if err := b.api(http.MethodGet, "/api/dataplane", nil, &st); err == nil {
			wanAddr = strings.Split(st.NAT.WAN, "/")[0]
		}
	}
	seen, _ := peer.Seen()
	if wanAddr == "" {
		t.Fatalf("no WAN address over VLAN 7 in 90 s; the wire saw %+v\nthe ISP's dnsmasq:\n%s", seen, tail(isp.String(), 20))
	}
	t.Logf("WAN address over VLAN 7: %s; the wire saw %+v", wanAddr, seen)
	dhcp := vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}
	if n := peer.Frames(t, dhcp); n < 2 {
		t.Errorf("the wire carried %d DHCP frames with VLAN 7 and priority 6, want at least 2 (DISCOVER, REQUEST)", n)
	}
	anyPCP := dhcp
	anyPCP.PCP = 0
	if n := peer.Frames(t, anyPCP) - peer.Frames(t, dhcp); n != 0 {
		t.Errorf("%d DHCP frames on VLAN 7 with another priority than 6", n)
	}
	if err := lanHost.waitPing(ispAddr, 30*time.Second); err != nil {
		seen, _ := peer.Seen()
		t.Errorf("the LAN host does not reach the ISP over VLAN 7: %v; the wire saw %+v", err, seen)
	}

}
