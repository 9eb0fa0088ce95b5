package webui

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestPPPoEStatusAndMetrics: a PPPoE WAN's session reaches /api/router
// and the e1kbox_wan_pppoe_* metrics.
func TestPPPoEStatusAndMetrics(t *testing.T) {
	r := newFakeRouter()
	r.edit(func(s *RouterStatus) {
		s.WAN.Mode, s.WAN.Address, s.WAN.Gateway, s.WAN.MTU = WANModePPPoE, netip.MustParsePrefix("100.64.0.2/32"), netip.MustParseAddr("100.64.0.1"), 1492
		s.WAN.Link.PPPoE = &WANPPPoE{State: "up", ACName: "ispvm", ACMAC: "52:54:00:12:34:56", SessionID: 3,
			EchoRTT: Duration(2 * time.Millisecond), UpSince: time.Now().Add(-time.Hour), Reconnects: 2}
	})
	f := startFixture(t, func(o *Options) { o.Router = r }, false)
	f.srv.publish(time.Now())
	var st RouterStatus
	f.doJSON("GET", "/api/router", nil, http.StatusOK, &st)
	if p := st.WAN.Link.PPPoE; st.WAN.Mode != WANModePPPoE || p == nil || p.SessionID != 3 || p.ACName != "ispvm" {
		t.Errorf("/api/router WAN %+v, link %+v: want mode pppoe, session 3, AC ispvm", st.WAN, p)
	}
	body := string(readAll(t, f.req("GET", "/metrics", nil)))
	for _, want := range []string{
		`e1kbox_wan_info{address="100.64.0.2/32",gateway="100.64.0.1",mode="pppoe",port="port1",state="bound"} 1`,
		`e1kbox_wan_pppoe_up 1`,
		`e1kbox_wan_pppoe_session_info{ac_mac="52:54:00:12:34:56",ac_name="ispvm",session_id="3"} 1`,
		`e1kbox_wan_pppoe_echo_rtt_seconds 0.002`,
		`e1kbox_wan_pppoe_reconnects_total 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	r.edit(func(s *RouterStatus) { s.WAN.Link.PPPoE = nil })
	f.srv.routerAt = time.Time{}
	f.srv.publish(time.Now())
	if body := string(readAll(t, f.req("GET", "/metrics", nil))); strings.Contains(body, "e1kbox_wan_pppoe_up") {
		t.Error("PPPoE metrics on a WAN that is no PPPoE link")
	}
}
