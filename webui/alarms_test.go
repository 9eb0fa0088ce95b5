package webui

import (
	"strings"
	"testing"
	"time"
)

// TestScanAlarm: the scan alarm follows the IPv6 router's scan drops
// (counters, whose rate it derives from the previous message) and the
// IPv4 router's neigh_limit rate, names the rate and who is limited, and
// stays scanHold after the scan was last limited.
func TestScanAlarm(t *testing.T) {
	var a alarmState
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		name string
		at   time.Duration
		v6   map[string]uint64 // IPv6 drops, cumulative
		arp  float64           // nat_neigh_limit per second
		want string            // in the alarm's message; "" for no alarm
	}{
		{"the first message: no rates yet", 0, map[string]uint64{"scan_source": 100}, 0, ""},
		{"one source", time.Second, map[string]uint64{"scan_source": 20100}, 0, "20000 new IPv6 connections/s to unknown LAN addresses dropped (one source over its rate)"},
		{"many sources", 2 * time.Second, map[string]uint64{"scan_source": 20100, "scan_total": 5000, "neigh_limit": 10}, 0,
			"5000 new IPv6 connections/s to unknown LAN addresses dropped (sources together over the total rate); known hosts stay reachable. IPv6 neighbour resolution of unknown addresses is at its limit (10/s refused)."},
		{"over: the alarm holds", 20 * time.Second, map[string]uint64{"scan_source": 20100, "scan_total": 5000, "neigh_limit": 10}, 0, "(10/s refused)"},
		{"held for scanHold", 2*time.Second + scanHold, map[string]uint64{"scan_source": 20100, "scan_total": 5000, "neigh_limit": 10}, 0, ""},
		{"ARP", 33 * time.Second, map[string]uint64{"scan_source": 20100, "scan_total": 5000, "neigh_limit": 10}, 42, "ARP resolution of unknown addresses is at its limit (42/s refused)."},
	} {
		m := &StatsMessage{Interval: 1, IPv6: &IPv6Counters{}, Drops: []DropRates{{DropStat: DropStat{Reason: "nat_neigh_limit"}, PerSecond: step.arp}}}
		for r, n := range step.v6 {
			m.IPv6.Drops = append(m.IPv6.Drops, DropStat{Reason: r, Packets: n})
		}
		var got []Alarm
		for _, al := range a.alarms(m, nil, nil, t0.Add(step.at)) {
			if al.Kind == "scan" {
				got = append(got, al)
			}
		}
		switch {
		case step.want == "" && len(got) != 0:
			t.Errorf("%s: %+v, want no scan alarm", step.name, got)
		case step.want != "" && (len(got) != 1 || got[0].Severity != "warn" || !strings.Contains(got[0].Message, step.want)):
			t.Errorf("%s: %+v, want one warning saying %q", step.name, got, step.want)
		}
	}
}
