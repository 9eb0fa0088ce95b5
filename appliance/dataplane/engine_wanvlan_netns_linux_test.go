package dataplane

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/vlanpeer"
)

// TestEngineNATOverVLAN routes h1 (LAN) to h2 (the WAN gateway) over a
// WAN tagged VLAN 7: h2's end of the cable speaks VLAN 7 (vlanpeer),
// as an ISP's access switch would. The router's frames on the wire are
// tagged 7, with priority 2 for data and 6 for ARP; the WAN port takes
// no untagged frames and none of VLAN 8, counted; a new VLAN applies
// live, and tagging off restarts the WAN port only. Both ring layouts:
// packet taps (fast path off) and rings bound after tcx, where tagged
// frames come on the demote's marker ring (fast path auto).
func TestEngineNATOverVLAN(t *testing.T) {
	for _, fp := range []FastPathMode{FastPathOff, FastPathAuto} {
		t.Run(string(fp), func(t *testing.T) { testEngineNATOverVLAN(t, fp) })
	}
}

func testEngineNATOverVLAN(t *testing.T, fp FastPathMode) {
	tp := newTopo(t, 2)
	h1, h2 := tp.hosts[0], tp.hosts[1]
	for _, p := range []string{"p1", "p2"} {
		tp.box.Sysctl(t, "net.ipv4.conf."+p+".arp_ignore=8")
	}
	h1.IP(t, "route", "add", "default", "via", "10.42.0.254")
	h2.IP(t, "addr", "flush", "dev", "eth0")
	h2.IP(t, "addr", "add", "10.43.0.1/24", "dev", "eth0")
	peer := vlanpeer.In(t, h2, "eth0", 7, 3)
	cfg := &Config{
		Mode:     ModeNAT,
		FastPath: fp,
		Ports:    []Port{{Interface: "p1", Role: RoleLAN}, {Interface: "p2", Role: RoleWAN}},
		NAT: &NAT{
			LANAddr: netip.MustParsePrefix("10.42.0.254/24"),
			WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			Gateway: netip.MustParseAddr("10.43.0.1"),
			WANVLAN: WANVLAN{ID: 7, PCP: 2, ControlPCP: 6},
		},
	}
	e := tp.engine(cfg)
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		key  vlanpeer.Key
		min  uint64
	}{
		{"the router's ARP with the control priority", vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_ARP}, 1},
		{"echo requests with the data priority", vlanpeer.Key{Tagged: 1, VID: 7, PCP: 2, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_ICMP, Port: 8}, 2},
	} {
		if got := peer.Frames(t, c.key); got < c.min {
			seen, _ := peer.Seen()
			t.Errorf("%s: h2 saw %d, want at least %d; it saw %+v", c.what, got, c.min, seen)
		}
	}
	if n, err := peer.Dropped(); n != 0 || err != nil {
		seen, _ := peer.Seen()
		t.Errorf("h2 got %d frames off VLAN 7 (%v): %+v", n, err, seen)
	}

	// Untagged, then VLAN 8: h2's ARP for the router's WAN address goes
	// unanswered, counted at the WAN port.
	wanLinkDrops := func() uint64 { return e.Snapshot().Drops[DropWANLink] }
	for _, vid := range []uint16{0, 8} {
		if err := peer.Close(); err != nil {
			t.Fatal(err)
		}
		if vid != 0 {
			peer = vlanpeer.In(t, h2, "eth0", vid, 3)
		}
		d0 := wanLinkDrops()
		if out, err := h2.Output("ping", "-c", "2", "-i", "0.2", "-W", "1", "10.43.0.2"); err == nil {
			t.Errorf("h2 pinged the router over VLAN %d:\n%s", vid, out)
		}
		if d := wanLinkDrops() - d0; d == 0 {
			t.Errorf("VLAN %d: no frame counted as %v at the WAN port", vid, DropWANLink)
		}
	}

	// VLAN 8 applies live: h2 (on VLAN 8 now) is reached again.
	cfg8 := *cfg
	n8 := *cfg.NAT
	n8.WANVLAN = WANVLAN{ID: 8, PCP: 5, ControlPCP: 6}
	cfg8.NAT = &n8
	if err := e.Apply(&cfg8); err != nil {
		t.Fatalf("Apply VLAN 8: %v", err)
	}
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Errorf("over VLAN 8: %v", err)
	}
	if got := peer.Frames(t, vlanpeer.Key{Tagged: 1, VID: 8, PCP: 5, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_ICMP, Port: 8}); got < 2 {
		t.Errorf("h2 saw %d echo requests on VLAN 8 with priority 5, want 2", got)
	}

	// Untagged: the WAN port restarts (its ring of tagged frames shrinks).
	if err := peer.Close(); err != nil {
		t.Fatal(err)
	}
	cfg0 := cfg8
	n0 := n8
	n0.WANVLAN = WANVLAN{}
	cfg0.NAT = &n0
	var err error
	tp.box.Do(t, func() { err = e.Apply(&cfg0) }) // the WAN port's rings open in the box
	if err != nil {
		t.Fatalf("Apply untagged: %v", err)
	}
	eventually(t, 10*time.Second, "engine healthy", func() (bool, string) {
		h := e.Health()
		return h.OK, fmt.Sprintf("%+v", h)
	})
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Errorf("untagged again: %v", err)
	}
}
