package plane

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/services/pppoe"
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
