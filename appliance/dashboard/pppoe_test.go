package dashboard

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/services/pppoe"
	"e1kbox/webui"
)

// TestPPPoEView: a PPPoE WAN is bound with the session's /32, peer, DNS
// and MTU while up, init while dialling, none without a client; the link
// shows the session.
func TestPPPoEView(t *testing.T) {
	ac, _ := net.ParseMAC("52:54:00:12:34:56")
	since := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	up := &pppoe.Status{Phase: pppoe.PhaseUp, ACName: "ispvm", ACMAC: ac, SessionID: 3, MTU: 1492,
		LocalIPv4: netip.MustParseAddr("100.64.0.2"), PeerIPv4: netip.MustParseAddr("100.64.0.1"),
		DNS1: netip.MustParseAddr("100.64.0.53"), EchoRTT: 2 * time.Millisecond, UpSince: since, Reconnects: 1,
		LastDownReason: "PADT from the AC"}
	for _, tc := range []struct {
		name string
		st   *pppoe.Status
		want webui.WANStatus
	}{
		{"no client", nil, webui.WANStatus{Mode: webui.WANModePPPoE, State: webui.WANNone,
			Link: webui.WANLink{PPPoE: &webui.WANPPPoE{State: "down"}}}},
		{"discovery", &pppoe.Status{Phase: pppoe.PhaseDiscovery, Reconnects: 2, LastDownReason: "echo timeout"},
			webui.WANStatus{Mode: webui.WANModePPPoE, State: webui.WANInit,
				Link: webui.WANLink{PPPoE: &webui.WANPPPoE{State: "discovery", Reconnects: 2, LastDownReason: "echo timeout"}}}},
		{"up", up, webui.WANStatus{Mode: webui.WANModePPPoE, State: webui.WANBound,
			Address: netip.MustParsePrefix("100.64.0.2/32"), Gateway: netip.MustParseAddr("100.64.0.1"),
			DNS: []netip.Addr{netip.MustParseAddr("100.64.0.53")}, MTU: 1492, Obtained: since,
			Link: webui.WANLink{PPPoE: &webui.WANPPPoE{State: "up", ACName: "ispvm", ACMAC: "52:54:00:12:34:56", SessionID: 3,
				EchoRTT: webui.Duration(2 * time.Millisecond), UpSince: since, Reconnects: 1, LastDownReason: "PADT from the AC"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w webui.WANStatus
			pppoeView(&w, tc.st)
			if diff := cmp.Diff(tc.want, w, addrs); diff != "" {
				t.Errorf("WAN (-want +got):\n%s", diff)
			}
		})
	}
}
