package webui

import (
	"fmt"
	"strings"
	"time"
)

// Alarm is something the owner should look at, shown on the overview and
// sent in every stream message.
type Alarm struct {
	// Kind is link_down, loop, hang, table_full, drops_table_full,
	// worker_restart, scan, wan_down, internet, time, dhcp_pool,
	// dhcp_flood.
	Kind string `json:"kind"`
	// Severity is "bad" or "warn".
	Severity string `json:"severity"`
	Port     string `json:"port,omitempty"`
	Message  string `json:"message"`
}

// alarmState is what alarms remember between samples (publisher only).
type alarmState struct {
	primed       bool
	restarts     uint64
	restartsSeen time.Time // when the restart count last rose
	// The scan alarm: the IPv6 router's scanDrops in the last message
	// (its counters have no rates), when a scan was last limited and
	// what was said of it.
	scanPrev   [len(scanDrops)]uint64
	scanPrimed bool
	scanSeen   time.Time
	scanMsg    string
}

// scanDrops are the IPv6 router's drops of a scan being limited
// (package route6's names), scanARP the IPv4 router's.
var scanDrops = [...]string{"scan_source", "scan_total", "neigh_limit"}

const scanARP = "nat_neigh_limit"

// scanHold is how long the scan alarm stays after the scan was last
// limited: a scan that comes in bursts is one alarm.
const scanHold = 30 * time.Second

// tableFullShare is the share of the connection table that raises an alarm.
const tableFullShare = 0.95

// alarms derives the alarms of a message; router is the cached router
// status (nil without a router), hangs the hang-mitigation reports.
func (a *alarmState) alarms(m *StatsMessage, router *RouterStatus, hangs []TuningReport, now time.Time) []Alarm {
	out := []Alarm{}
	for _, p := range m.Ports {
		switch {
		case p.Blocked:
			msg := fmt.Sprintf("Loop in the segment of port %s: it is blocked until the loop is gone.", p.Name)
			if p.LoopWith != "" && p.LoopWith != p.Name {
				msg = fmt.Sprintf("Loop between ports %s and %s: %s is blocked until the loop is gone.", p.LoopWith, p.Name, p.Name)
			}
			out = append(out, Alarm{Kind: "loop", Severity: "bad", Port: p.Name, Message: msg})
		case !p.Up && p.Kind != PortHost:
			sev := "warn"
			if router != nil && router.WAN.Port == p.Name {
				sev = "bad"
			}
			out = append(out, Alarm{Kind: "link_down", Severity: sev, Port: p.Name,
				Message: fmt.Sprintf("Port %s (%s): no link. Is the cable plugged in?", p.Name, p.Interface)})
		}
	}
	for _, r := range hangs {
		out = append(out, Alarm{Kind: "hang", Severity: "warn", Port: r.Target,
			Message: fmt.Sprintf("The e1000e on %s hung and was reset; the hang mitigation is applied (%s: %s).", r.Target, r.Status, r.Wanted)})
	}
	if ct := m.Conntrack; ct != nil && ct.Capacity > 0 && float64(ct.Entries) >= tableFullShare*float64(ct.Capacity) {
		out = append(out, Alarm{Kind: "table_full", Severity: "bad",
			Message: fmt.Sprintf("The connection table is %d%% full (%d of %d): new connections may be refused.", 100*ct.Entries/ct.Capacity, ct.Entries, ct.Capacity)})
	}
	for _, d := range m.Drops {
		if d.Reason == DropNATFull && d.PerSecond > 0 {
			out = append(out, Alarm{Kind: "drops_table_full", Severity: "bad",
				Message: fmt.Sprintf("New connections are dropped: the connection table is full (%.0f/s).", d.PerSecond)})
		}
	}
	if a.primed && m.WorkerRestarts > a.restarts {
		a.restartsSeen = now
	}
	a.primed, a.restarts = true, m.WorkerRestarts
	if !a.restartsSeen.IsZero() && now.Sub(a.restartsSeen) < 5*time.Minute {
		out = append(out, Alarm{Kind: "worker_restart", Severity: "warn",
			Message: fmt.Sprintf("A dataplane worker failed and was restarted %s ago (%d restarts since the start).", roundDur(now.Sub(a.restartsSeen)), m.WorkerRestarts)})
	}
	if msg := a.scan(m); msg != "" {
		a.scanSeen, a.scanMsg = now, msg
	}
	if !a.scanSeen.IsZero() && now.Sub(a.scanSeen) < scanHold {
		out = append(out, Alarm{Kind: "scan", Severity: "warn", Message: a.scanMsg})
	}
	if router != nil {
		out = append(out, routerAlarms(router)...)
	}
	return out
}

// scan describes the scan limits at work in m, or "" when none drops:
// new connections from the WAN to unknown IPv6 addresses (a scan of the
// LAN's /64), the neighbour cache's and the ARP table's resolution of
// unknown addresses.
func (a *alarmState) scan(m *StatsMessage) string {
	var v6 [len(scanDrops)]float64
	if m.IPv6 != nil {
		var cur [len(scanDrops)]uint64
		for _, d := range m.IPv6.Drops {
			for i, r := range scanDrops {
				if d.Reason == r {
					cur[i] = d.Packets
				}
			}
		}
		if a.scanPrimed {
			for i := range cur {
				v6[i] = rate(cur[i], a.scanPrev[i], m.Interval)
			}
		}
		a.scanPrev, a.scanPrimed = cur, true
	}
	var arp float64
	for _, d := range m.Drops {
		if d.Reason == scanARP {
			arp = d.PerSecond
		}
	}
	var says []string
	if n := v6[0] + v6[1]; n > 0 {
		who := "one source over its rate"
		if v6[1] > 0 {
			who = "sources together over the total rate"
		}
		says = append(says, fmt.Sprintf("A scan from the WAN is being limited: %.0f new IPv6 connections/s to unknown LAN addresses dropped (%s); known hosts stay reachable.", n, who))
	}
	if v6[2] > 0 {
		says = append(says, fmt.Sprintf("IPv6 neighbour resolution of unknown addresses is at its limit (%.0f/s refused).", v6[2]))
	}
	if arp > 0 {
		says = append(says, fmt.Sprintf("ARP resolution of unknown addresses is at its limit (%.0f/s refused).", arp))
	}
	return strings.Join(says, " ")
}

func roundDur(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

func routerAlarms(r *RouterStatus) []Alarm {
	var out []Alarm
	switch r.WAN.State {
	case WANBound, WANRenewing:
	case WANRebinding:
		out = append(out, Alarm{Kind: "wan_down", Severity: "warn", Port: r.WAN.Port,
			Message: "The WAN lease could not be renewed with its server; asking any DHCP server (rebinding)."})
	default:
		msg := "No WAN address: the box is looking for a DHCP server on the WAN port."
		switch p := r.WAN.Link.PPPoE; {
		case r.WAN.Mode == WANModeStatic:
			msg = "No WAN address is configured."
		case r.WAN.Mode == WANModePPPoE && p != nil:
			msg = "No WAN address: the PPPoE session is not up (" + p.State + ")."
			if p.LastDownReason != "" {
				msg += " Last down: " + p.LastDownReason + "."
			}
		}
		out = append(out, Alarm{Kind: "wan_down", Severity: "bad", Port: r.WAN.Port, Message: msg})
	}
	if in := r.WAN.Internet; in.Probe != "" && !in.Checked.IsZero() && !in.Reachable {
		msg := "The Internet is not reachable (" + in.Probe + ")"
		if in.Error != "" {
			msg += ": " + in.Error
		}
		out = append(out, Alarm{Kind: "internet", Severity: "bad", Message: msg + "."})
	}
	if !r.Time.Synced {
		out = append(out, Alarm{Kind: "time", Severity: "warn", Message: "The clock is not synchronized (NTP)."})
	}
	if r.DHCP.Enabled && r.DHCP.PoolSize > 0 && r.DHCP.LeasesInUse >= r.DHCP.PoolSize {
		out = append(out, Alarm{Kind: "dhcp_pool", Severity: "warn",
			Message: fmt.Sprintf("The DHCP pool is used up (%d of %d addresses): new devices get no address.", r.DHCP.LeasesInUse, r.DHCP.PoolSize)})
	}
	out = append(out, dhcpFloodAlarms(r.DHCP)...)
	return out
}
