package webui

import (
	"strconv"

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
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descPortUp, descPortSpeed, descPortRxPackets, descPortRxBytes, descPortTxPackets, descPortTxBytes,
		descPortRingDrops, descPortBlocked, descDrops, descCPU, descIRQ, descRestarts, descCtEntries, descCtCapacity,
		descRulePackets, descRuleBytes, descRuleLastHit, descPolicyPackets, descPolicyBytes,
		descSubtables, descRules, descTuning, descConfigPending, descWSClients, descWSDropped, descFailedLogins,
	} {
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
		snap := s.opts.Stats.Snapshot()
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
	gauge(descWSClients, float64(s.hub.count()))
	counter(descWSDropped, float64(s.hub.dropped.Load()))
}
