package dataplane

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
)

// TestLANHosts: the engine tells on which LAN port a MAC is, and when a
// LAN host's address carried traffic through the router (what the DHCP
// server proves leases with): a host pinging through the router has, a
// host that only talks to another LAN host (bridged) has not.
func TestLANHosts(t *testing.T) {
	tp := newTopo(t, 3)
	h1, h2, h3 := tp.hosts[0], tp.hosts[1], tp.hosts[2]
	h1.IP(t, "route", "add", "default", "via", "10.42.0.254")
	h3.IP(t, "addr", "flush", "dev", "eth0")
	h3.IP(t, "addr", "add", "10.43.0.1/24", "dev", "eth0")
	e := tp.engine(&Config{
		Mode: ModeNAT,
		Ports: []Port{{Name: "lan1", Interface: "p1", Role: RoleLAN}, {Name: "lan2", Interface: "p2", Role: RoleLAN},
			{Name: "wan", Interface: "p3", Role: RoleWAN}},
		NAT: &NAT{LANAddr: netip.MustParsePrefix("10.42.0.254/24"), WANAddr: netip.MustParsePrefix("10.43.0.2/24"),
			Gateway: netip.MustParseAddr("10.43.0.1")},
	})
	start := time.Now().Truncate(time.Second)
	if err := tp.ping(1, "10.43.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(2, "10.42.0.1"); err != nil {
		t.Fatal(err)
	}
	mac1, mac2 := hostMAC(t, h1), hostMAC(t, h2)
	for _, tc := range []struct {
		name       string
		mac        [6]byte
		wantPort   string
		ip         string
		wantActive bool
	}{
		{"h1, through the router", mac1, "lan1", "10.42.0.1", true},
		{"h2, bridged to h1 only", mac2, "lan2", "10.42.0.2", false},
		{"a MAC never seen", [6]byte{2, 0, 0, 0, 0, 0x99}, "", "10.42.0.99", false},
	} {
		if got := e.LANPort(tc.mac); got != tc.wantPort {
			t.Errorf("%s: LANPort = %q, want %q", tc.name, got, tc.wantPort)
		}
		got := e.LANActivity(netip.MustParseAddr(tc.ip), tc.mac)
		if active := !got.IsZero(); active != tc.wantActive || active && (got.Before(start) || got.After(time.Now())) {
			t.Errorf("%s: LANActivity = %v, want one since %v: %v", tc.name, got, start, tc.wantActive)
		}
	}
}

// hostMAC is the MAC of eth0 in namespace ns.
func hostMAC(t *testing.T, ns *netnstest.Namespace) [6]byte {
	t.Helper()
	hw, err := net.ParseMAC(strings.TrimSpace(ns.Run(t, "cat", "/sys/class/net/eth0/address")))
	if err != nil || len(hw) != 6 {
		t.Fatalf("eth0's MAC: %v", err)
	}
	return [6]byte(hw)
}
