package webui

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes the same Snapshot the dashboard shows (plus the rule
// counters and tuning reports) as Prometheus metrics, read at scrape time:
// nothing is counted twice.
type collector struct {
	s *Server
}

func newCollector(s *Server) *collector { return &collector{s: s} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("e1kbox_"+name, help, labels, nil)
}

var (
	descPortUp        = desc("port_up", "Whether the port's link is up.", "port", "iface")
	descPortSpeed     = desc("port_speed_bytes", "Negotiated link speed in bytes per second (0 if unknown).", "port", "iface")
	descPortRxPackets = desc("port_receive_packets_total", "Frames received on the port.", "port", "iface")
	descPortRxBytes   = desc("port_receive_bytes_total", "Bytes received on the port.", "port", "iface")
	descPortTxPackets = desc("port_transmit_packets_total", "Frames transmitted on the port.", "port", "iface")
	descPortTxBytes   = desc("port_transmit_bytes_total", "Bytes transmitted on the port.", "port", "iface")
	descPortRingDrops = desc("port_ring_drops_total", "Frames the kernel dropped because the port's RX ring was full.", "port", "iface")
	descPortBlocked   = desc("port_loop_blocked", "Whether loop protection blocks the port (a loop through it was found).", "port", "iface")
	descDrops         = desc("drops_total", "Frames dropped by the dataplane, by reason.", "reason")
	descCPU           = desc("cpu_seconds_total", "Time each core spent busy or idle.", "cpu", "mode")
	descIRQ           = desc("interrupts_total", "Interrupts per NIC vector.", "irq", "name")
	descRestarts      = desc("worker_restarts_total", "Dataplane workers restarted after a failure.")
	descCtEntries     = desc("conntrack_entries", "Connections in the NAT table.")
	descCtCapacity    = desc("conntrack_capacity", "Capacity of the NAT table.")
	descRulePackets   = desc("rule_packets_total", "Frames matched by a rule with a counter.", "chain", "index", "rule")
	descRuleBytes     = desc("rule_bytes_total", "Bytes matched by a rule with a counter.", "chain", "index", "rule")
	descRuleLastHit   = desc("rule_last_hit_timestamp_seconds", "When a rule with a counter last matched.", "chain", "index", "rule")
	descPolicyPackets = desc("policy_packets_total", "Frames decided by a chain's default policy.", "chain", "action")
	descPolicyBytes   = desc("policy_bytes_total", "Bytes decided by a chain's default policy.", "chain", "action")
	descSubtables     = desc("rule_subtables", "Hash subtables of the compiled rule table.")
	descRules         = desc("rules", "Rules in the running rule table.")
	descTuning        = desc("tuning_knob_status", "A tuning knob's status (1 for the current status).", "knob", "target", "status")
	descConfigPending = desc("config_pending", "1 while an applied config change waits for confirmation.")
	descWSClients     = desc("webui_stream_clients", "Connected dashboard WebSocket clients.")
	descWSDropped     = desc("webui_stream_dropped_total", "Dashboard WebSocket clients dropped for being too slow or failing.")
	descFailedLogins  = desc("webui_failed_logins_total", "Dashboard requests with a wrong password.")
	descAlarms        = desc("alarms", "Alarms on the overview now, by kind and severity.", "kind", "severity")

	descWANInfo       = desc("wan_info", "The WAN address and its state (1).", "port", "mode", "state", "address", "gateway")
	descWANLink       = desc("wan_link_info", "The WAN's link stack (1): its interface, its VLAN (0: untagged) and the VLAN priorities of data and control frames.", "port", "interface", "vlan", "pcp", "control_pcp")
	descWANUp         = desc("wan_up", "Whether the WAN has an address (bound or renewing).")
	descWANExpiry     = desc("wan_lease_expiry_timestamp_seconds", "When the WAN DHCP lease expires.")
	descWANT1         = desc("wan_lease_renew_timestamp_seconds", "When the WAN DHCP lease is renewed (T1).")
	descWANMTU        = desc("wan_mtu", "The WAN lease's MTU (option 26).")
	descWANReachable  = desc("wan_internet_reachable", "Whether the last Internet probe was answered.", "probe")
	descWANRTT        = desc("wan_internet_rtt_seconds", "Round-trip time of the last Internet probe.", "probe")
	descWANChecked    = desc("wan_internet_checked_timestamp_seconds", "When the Internet was last probed.", "probe")
	descDHCPEnabled   = desc("dhcp_enabled", "Whether the LAN DHCP server runs.")
	descDHCPInUse     = desc("dhcp_leases_in_use", "Bound DHCP leases (static ones too).")
	descDHCPPool      = desc("dhcp_pool_size", "Addresses of the DHCP pool.")
	descDHCPMessages  = desc("dhcp_messages_total", "DHCP messages by type.", "type")
	descDNSEnabled    = desc("dns_enabled", "Whether the LAN DNS forwarder runs.")
	descDNSQueries    = desc("dns_queries_total", "DNS queries received.")
	descDNSHits       = desc("dns_cache_hits_total", "DNS queries answered from the cache.")
	descDNSEntries    = desc("dns_cache_entries", "Answers in the DNS cache.")
	descDNSFailures   = desc("dns_upstream_failures_total", "Failed upstream DNS exchanges.")
	descDNSLatency    = desc("dns_upstream_latency_seconds", "Upstream DNS round-trip time.", "quantile")
	descTimeSynced    = desc("time_synced", "Whether the clock is synchronized by NTP.")
	descTimeOffset    = desc("time_offset_seconds", "The clock's offset from the NTP server at the last sync.")
	descTimeLastSync  = desc("time_last_sync_timestamp_seconds", "When the clock was last synchronized.")
	descDevicesOnline = desc("devices_online", "LAN devices with a bound DHCP lease.")

	descV6Forwarded  = desc("ipv6_forwarded_packets_total", "IPv6 frames routed between the LAN and the WAN.")
	descV6Drops      = desc("ipv6_drops_total", "IPv6 frames the IPv6 router dropped, by reason.", "reason")
	descV6Conns      = desc("ipv6_connections", "Connections in the IPv6 firewall's table.")
	descV6Neighbours = desc("ipv6_neighbours", "Entries of the IPv6 neighbour cache.")
	descV6DHCPv6     = desc("ipv6_dhcpv6_bound", "Whether the WAN's DHCPv6 client holds a prefix delegation.")
	descV6Valid      = desc("ipv6_delegated_prefix_valid_seconds", "Seconds until a delegated prefix's valid lifetime ends (0: ended).", "prefix")
	descV6Preferred  = desc("ipv6_delegated_prefix_preferred_seconds", "Seconds until a delegated prefix's preferred lifetime ends (0: ended).", "prefix")
	descV6WANAddrs   = desc("ipv6_wan_addresses", "The box's own WAN addresses by origin (link-local, slaac, dhcpv6) and state (tentative, preferred, deprecated, duplicate).", "origin", "state")
	descPPPoEUp      = desc("wan_pppoe_up", "Whether the WAN's PPPoE session is up (only on a PPPoE WAN).")
	descPPPoESession = desc("wan_pppoe_session_info", "The WAN's PPPoE session (1): its ID and access concentrator.", "session_id", "ac_name", "ac_mac")
	descPPPoEEchoRTT = desc("wan_pppoe_echo_rtt_seconds", "Round trip of the last answered LCP echo of the PPPoE session.")
	descPPPoERedials = desc("wan_pppoe_reconnects_total", "PPPoE discoveries restarted after a dropped session or attempt.")
	descV6DADFails   = desc("ipv6_dad_failures_total", "The box's WAN addresses duplicate address detection found on another node.")
)

var routerDescs = []*prometheus.Desc{descWANInfo, descWANUp, descWANExpiry, descWANT1, descWANMTU, descWANReachable,
	descWANRTT, descWANChecked, descDHCPEnabled, descDHCPInUse, descDHCPPool, descDHCPMessages, descDNSEnabled,
	descDNSQueries, descDNSHits, descDNSEntries, descDNSFailures, descDNSLatency, descTimeSynced, descTimeOffset,
	descTimeLastSync, descDevicesOnline, descV6DHCPv6, descV6Valid, descV6Preferred, descV6WANAddrs,
	descDHCPUnproven, descDHCPReclaimed, descDHCPRevived, descDHCPRefused, descDHCPFlooding,
	descPPPoEUp, descPPPoESession, descPPPoEEchoRTT, descPPPoERedials}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descPortUp, descPortSpeed, descPortRxPackets, descPortRxBytes, descPortTxPackets, descPortTxBytes,
		descPortRingDrops, descPortBlocked, descDrops, descCPU, descIRQ, descRestarts, descCtEntries, descCtCapacity,
		descRulePackets, descRuleBytes, descRuleLastHit, descPolicyPackets, descPolicyBytes,
		descSubtables, descRules, descTuning, descConfigPending, descWSClients, descWSDropped, descFailedLogins, descAlarms,
		descV6Forwarded, descV6Drops, descV6Conns, descV6Neighbours, descV6DADFails,
	} {
		ch <- d
	}
	for _, d := range routerDescs {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descFailedLogins, float64(s.guard.failed.Load()))
	if s.opts.Stats != nil {
		c.snapshot(s.opts.Stats.Snapshot(), gauge, counter)
	}
	if s.opts.Rules != nil {
		t := s.opts.Rules.Table()
		gauge(descSubtables, float64(t.Subtables))
		gauge(descRules, float64(len(t.Rules)))
		for i, r := range t.Rules {
			if !r.Counted {
				continue
			}
			idx := strconv.Itoa(i)
			counter(descRulePackets, float64(r.Packets), r.Chain, idx, r.Text)
			counter(descRuleBytes, float64(r.Bytes), r.Chain, idx, r.Text)
			if !r.LastHit.IsZero() {
				gauge(descRuleLastHit, float64(r.LastHit.UnixMilli())/1000, r.Chain, idx, r.Text)
			}
		}
		seen := map[string]bool{}
		for _, p := range t.Policies {
			if !seen[p.Chain] {
				seen[p.Chain] = true
				counter(descPolicyPackets, float64(p.Packets), p.Chain, p.Action)
				counter(descPolicyBytes, float64(p.Bytes), p.Chain, p.Action)
			}
		}
	}
	if s.opts.Tuning != nil {
		seen := map[[2]string]bool{}
		for _, r := range s.opts.Tuning.Reports() {
			k := [2]string{r.Knob, r.Target}
			if !seen[k] {
				seen[k] = true
				gauge(descTuning, 1, r.Knob, r.Target, r.Status)
			}
		}
	}
	if s.opts.Config != nil {
		gauge(descConfigPending, b2f(s.opts.Config.Pending() != nil))
	}
	if st, ok := s.routerNow(); ok {
		c.router(&st, gauge, counter)
	}
	c.alarms(gauge)
	gauge(descWSClients, float64(s.hub.count()))
	counter(descWSDropped, float64(s.hub.dropped.Load()))
}

type emit func(d *prometheus.Desc, v float64, labels ...string)

func unix(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// router exposes the router's status (e1kbox_wan_*, dhcp_*, dns_*, time_*).
func (c *collector) router(st *RouterStatus, gauge, counter emit) {
	w := st.WAN
	addr, gw := "", ""
	if w.Address.IsValid() {
		addr = w.Address.String()
	}
	if w.Gateway.IsValid() {
		gw = w.Gateway.String()
	}
	gauge(descWANInfo, 1, w.Port, w.Mode, w.State, addr, gw)
	var vl WANVLAN
	if w.Link.VLAN != nil {
		vl = *w.Link.VLAN
	}
	gauge(descWANLink, 1, w.Port, w.Link.Interface, strconv.Itoa(int(vl.ID)), strconv.Itoa(int(vl.PCP)), strconv.Itoa(int(vl.ControlPCP)))
	if p := w.Link.PPPoE; p != nil {
		gauge(descPPPoEUp, b2f(p.State == "up"))
		if p.SessionID != 0 {
			gauge(descPPPoESession, 1, strconv.Itoa(int(p.SessionID)), p.ACName, p.ACMAC)
			gauge(descPPPoEEchoRTT, time.Duration(p.EchoRTT).Seconds())
		}
		counter(descPPPoERedials, float64(p.Reconnects))
	}
	gauge(descWANUp, b2f(w.Address.IsValid() && (w.State == WANBound || w.State == WANRenewing || w.State == WANRebinding)))
	if !w.Expiry.IsZero() {
		gauge(descWANExpiry, unix(w.Expiry))
	}
	if !w.T1.IsZero() {
		gauge(descWANT1, unix(w.T1))
	}
	if w.MTU > 0 {
		gauge(descWANMTU, float64(w.MTU))
	}
	if in := w.Internet; in.Probe != "" && !in.Checked.IsZero() {
		gauge(descWANReachable, b2f(in.Reachable), in.Probe)
		gauge(descWANRTT, time.Duration(in.RTT).Seconds(), in.Probe)
		gauge(descWANChecked, unix(in.Checked), in.Probe)
	}
	d := st.DHCP
	gauge(descDHCPEnabled, b2f(d.Enabled))
	gauge(descDHCPInUse, float64(d.LeasesInUse))
	gauge(descDHCPPool, float64(d.PoolSize))
	gauge(descDevicesOnline, float64(d.LeasesInUse))
	for _, m := range []struct {
		t string
		n uint64
	}{{"discover", d.Discovers}, {"offer", d.Offers}, {"request", d.Requests}, {"ack", d.Acks},
		{"nak", d.Naks}, {"decline", d.Declines}, {"release", d.Releases}} {
		counter(descDHCPMessages, float64(m.n), m.t)
	}
	dhcpPorts(d, gauge, counter)
	n := st.DNS
	gauge(descDNSEnabled, b2f(n.Enabled))
	counter(descDNSQueries, float64(n.Queries))
	counter(descDNSHits, float64(n.CacheHits))
	gauge(descDNSEntries, float64(n.CacheEntries))
	counter(descDNSFailures, float64(n.UpstreamFailures))
	gauge(descDNSLatency, time.Duration(n.LatencyP50).Seconds(), "0.5")
	gauge(descDNSLatency, time.Duration(n.LatencyP99).Seconds(), "0.99")
	t := st.Time
	gauge(descTimeSynced, b2f(t.Synced))
	gauge(descTimeOffset, time.Duration(t.Offset).Seconds())
	if !t.LastSync.IsZero() {
		gauge(descTimeLastSync, unix(t.LastSync))
	}
	if v6 := st.IPv6; v6 != nil {
		gauge(descV6DHCPv6, b2f(v6.DHCPv6 == DHCPv6Bound))
		now := time.Now()
		left := func(at time.Time) float64 { return max(0, at.Sub(now).Seconds()) }
		seen := map[netip.Prefix]bool{}
		for _, p := range v6.Delegated {
			if !seen[p.Prefix] && !p.Valid.IsZero() {
				seen[p.Prefix] = true
				gauge(descV6Valid, left(p.Valid), p.Prefix.String())
				gauge(descV6Preferred, left(p.Preferred), p.Prefix.String())
			}
		}
		n := map[[2]string]int{}
		for _, a := range v6.WANAddresses {
			n[[2]string{a.Origin, a.State}]++
		}
		for _, o := range []string{WANAddrLinkLocal, WANAddrSLAAC, WANAddrDHCPv6} {
			for _, st := range []string{WANAddrTentative, WANAddrPreferred, WANAddrDeprecated, WANAddrDuplicate} {
				gauge(descV6WANAddrs, float64(n[[2]string{o, st}]), o, st)
			}
		}
	}
}

// alarms counts the alarms of the newest published message.
func (c *collector) alarms(gauge emit) {
	s := c.s
	s.mu.Lock()
	b := s.lastAlarms
	s.mu.Unlock()
	n := map[[2]string]int{}
	for _, a := range b {
		n[[2]string{a.Kind, a.Severity}]++
	}
	for k, v := range n {
		gauge(descAlarms, float64(v), k[0], k[1])
	}
}

// snapshot exposes the counters of one Snapshot.
func (c *collector) snapshot(snap Snapshot, gauge, counter emit) {
	seen := map[string]bool{}
	for _, p := range snap.Ports {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		gauge(descPortUp, b2f(p.Up), p.Name, p.Interface)
		gauge(descPortSpeed, float64(p.SpeedMbps)*1e6/8, p.Name, p.Interface)
		counter(descPortRxPackets, float64(p.RxPackets), p.Name, p.Interface)
		counter(descPortRxBytes, float64(p.RxBytes), p.Name, p.Interface)
		counter(descPortTxPackets, float64(p.TxPackets), p.Name, p.Interface)
		counter(descPortTxBytes, float64(p.TxBytes), p.Name, p.Interface)
		counter(descPortRingDrops, float64(p.RingDrops), p.Name, p.Interface)
		gauge(descPortBlocked, b2f(p.Blocked), p.Name, p.Interface)
	}
	clear(seen)
	for _, d := range snap.Drops {
		if !seen[d.Reason] {
			seen[d.Reason] = true
			counter(descDrops, float64(d.Packets), d.Reason)
		}
	}
	clear(seen)
	for _, cpu := range snap.CPUs {
		id := strconv.Itoa(cpu.CPU)
		if !seen[id] {
			seen[id] = true
			counter(descCPU, cpu.BusySeconds, id, "busy")
			counter(descCPU, cpu.IdleSeconds, id, "idle")
		}
	}
	clear(seen)
	for _, q := range snap.IRQs {
		id := strconv.Itoa(q.IRQ)
		if !seen[id+" "+q.Name] {
			seen[id+" "+q.Name] = true
			counter(descIRQ, float64(q.Count), id, q.Name)
		}
	}
	counter(descRestarts, float64(snap.WorkerRestarts))
	if ct := snap.Conntrack; ct != nil {
		gauge(descCtEntries, float64(ct.Entries))
		gauge(descCtCapacity, float64(ct.Capacity))
	}
	if v6 := snap.IPv6; v6 != nil {
		counter(descV6Forwarded, float64(v6.Forwarded))
		counter(descV6DADFails, float64(v6.DADFailures))
		gauge(descV6Conns, float64(v6.Conns))
		gauge(descV6Neighbours, float64(v6.Neighbours))
		clear(seen)
		for _, d := range v6.Drops {
			if !seen[d.Reason] {
				seen[d.Reason] = true
				counter(descV6Drops, float64(d.Packets), d.Reason)
			}
		}
	}
}
