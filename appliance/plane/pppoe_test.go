package plane

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/tuning"
)

func TestPPPoENAT(t *testing.T) {
	ac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0xac}
	up := pppoe.Status{Phase: pppoe.PhaseUp, ACMAC: ac, SessionID: 0x1234, MTU: 1492,
		LocalIPv4: netip.MustParseAddr("100.64.0.5"), PeerIPv4: netip.MustParseAddr("10.255.0.1"),
		DNS1: netip.MustParseAddr("192.0.2.53")}
	static := dataplane.NAT{WANAddr: netip.MustParsePrefix("203.0.113.2/24"), Gateway: netip.MustParseAddr("203.0.113.1"), WANMTU: 1500}
	for _, tc := range []struct {
		name string
		st   *pppoe.Status
		want dataplane.NAT
	}{
		{"not a PPPoE WAN", nil, static},
		{"session up", &up, dataplane.NAT{WANPPPoE: true, PPPoESession: dataplane.PPPoESession{ID: 0x1234, ACMAC: [6]byte(ac)},
			WANAddr: netip.MustParsePrefix("100.64.0.5/32"), Gateway: netip.MustParseAddr("10.255.0.1"), WANMTU: 1492}},
		{"RFC 4638", func() *pppoe.Status { s := up; s.MTU = 1500; return &s }(), dataplane.NAT{WANPPPoE: true,
			PPPoESession: dataplane.PPPoESession{ID: 0x1234, ACMAC: [6]byte(ac)},
			WANAddr:      netip.MustParsePrefix("100.64.0.5/32"), Gateway: netip.MustParseAddr("10.255.0.1"), WANMTU: 1500}},
		{"IPv6CP up", func() *pppoe.Status {
			s := up
			s.LocalLinkLocal, s.PeerLinkLocal = netip.MustParseAddr("fe80::1c:2d:3e:4f"), netip.MustParseAddr("fe80::a:b:c:d")
			return &s
		}(), dataplane.NAT{WANPPPoE: true, PPPoESession: dataplane.PPPoESession{ID: 0x1234, ACMAC: [6]byte(ac),
			LocalLinkLocal: netip.MustParseAddr("fe80::1c:2d:3e:4f"), PeerLinkLocal: netip.MustParseAddr("fe80::a:b:c:d")},
			WANAddr: netip.MustParsePrefix("100.64.0.5/32"), Gateway: netip.MustParseAddr("10.255.0.1"), WANMTU: 1492}},
		{"discovery: down", &pppoe.Status{Phase: pppoe.PhaseDiscovery}, dataplane.NAT{WANPPPoE: true}},
		{"up without IPCP (IPv6CP only)", func() *pppoe.Status { s := up; s.LocalIPv4 = netip.Addr{}; return &s }(), dataplane.NAT{WANPPPoE: true}},
		{"network phase", func() *pppoe.Status { s := up; s.Phase = pppoe.PhaseNetwork; return &s }(), dataplane.NAT{WANPPPoE: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := static
			pppoeNAT(&n, tc.st)
			if diff := cmp.Diff(tc.want, n, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
				t.Errorf("NAT (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPPPoEWANPortMTU: a PPPoE WAN port at the default MTU carries the
// session's MRU and its 8-byte header (RFC 4638's 1500 on 1508); a port
// MTU set to something else stays.
func TestPPPoEWANPortMTU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		portMTU string // the WAN port's "mtu", "" unset
		mru     string // nat.wan.pppoe.mru, "" unset
		want    int
	}{
		{"default MRU", "", "", 1500},
		{"RFC 4638", "", "1500", 1508},
		{"RFC 4638, mtu 1500 set", "1500", "1500", 1508},
		{"mtu 9000 stays", "9000", "1500", 9000},
		{"mtu 1400 stays", "1400", "1500", 1400},
		{"small MRU", "", "1400", 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mtu, mru := "", ""
			if tc.portMTU != "" {
				mtu = `, "mtu": ` + tc.portMTU
			}
			if tc.mru != "" {
				mru = `, "mru": ` + tc.mru
			}
			c, err := config.Parse([]byte(`{"version": 2, "mode": "nat",
				"ports": [{"name": "wan", "interface": "eth0", "role": "wan"` + mtu + `},
				          {"name": "lan", "interface": "eth1", "role": "lan", "addresses": ["192.168.1.1/24"]}],
				"ipv6": {"enabled": false},
				"nat": {"wan": {"pppoe": {"username": "u", "password": "p"` + mru + `}}}}`))
			if err != nil {
				t.Fatalf("config.Parse: %v", err)
			}
			dc, err := dataplaneConfig(c, tuning.CPUPlan{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range dc.Ports {
				if p.Role == dataplane.RoleWAN && p.MTU != tc.want {
					t.Errorf("WAN port MTU %d, want %d", p.MTU, tc.want)
				}
			}
		})
	}
}
