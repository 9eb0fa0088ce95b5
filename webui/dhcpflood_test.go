package webui

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDHCPFloodAlarm: a LAN port the DHCP server saw flooding with new
// devices raises an alarm that names it and its numbers; every port's
// counts are metrics.
func TestDHCPFloodAlarm(t *testing.T) {
	r := newFakeRouter()
	f := startFixture(t, func(o *Options) { o.Router = r }, false)
	r.edit(func(s *RouterStatus) {
		s.DHCP.Unproven, s.DHCP.Reclaimed, s.DHCP.Refused = 38, 1061, 904
		s.DHCP.Ports = []DHCPPort{
			{Port: "lan1", Unproven: 37, Reclaimed: 1061, Revived: 1, Refused: 904, Flooding: true},
			{Port: "lan2", Unproven: 1},
		}
	})
	f.srv.publish(time.Now())
	var m StatsMessage
	f.doJSON("GET", "/api/stats", nil, http.StatusOK, &m)
	var got []Alarm
	for _, a := range m.Alarms {
		if strings.HasPrefix(a.Kind, "dhcp") {
			got = append(got, a)
		}
	}
	want := []Alarm{{Kind: "dhcp_flood", Severity: "warn", Port: "lan1",
		Message: "A flood of new devices asks for DHCP leases on port lan1 (a pool starvation?): 37 of its leases are not used yet, " +
			"1061 such leases were given to other devices and 904 requests refused. Devices that use their address keep it."}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DHCP alarms (-want +got):\n%s", diff)
	}
	body := string(readAll(t, f.req("GET", "/metrics", nil)))
	for _, want := range []string{
		`e1kbox_dhcp_unproven_leases{port="lan1"} 37`,
		`e1kbox_dhcp_unproven_leases{port="lan2"} 1`,
		`e1kbox_dhcp_reclaimed_total{port="lan1"} 1061`,
		`e1kbox_dhcp_revived_total{port="lan1"} 1`,
		`e1kbox_dhcp_new_device_refusals_total{port="lan1"} 904`,
		`e1kbox_dhcp_flooding{port="lan1"} 1`,
		`e1kbox_dhcp_flooding{port="lan2"} 0`,
		`e1kbox_alarms{kind="dhcp_flood",severity="warn"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}
