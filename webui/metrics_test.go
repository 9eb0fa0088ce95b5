package webui

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// series names a sample as name{label="value",...} with sorted labels.
func series(name string, labels ...string) string {
	var parts []string
	for i := 0; i+1 < len(labels); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return name
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func scrape(t *testing.T, f *fixture) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	res := f.req("GET", "/metrics", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing exposition: %v", err)
	}
	values := map[string]float64{}
	types := map[string]dto.MetricType{}
	for name, fam := range fams {
		types[name] = fam.GetType()
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if fam.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			values[series(name, labels...)] = v
		}
	}
	return values, types
}

func TestMetrics(t *testing.T) {
	frozen := time.Now()
	stats := newFakeStats()
	stats.start = frozen.Add(-90 * time.Second)
	stats.now = func() time.Time { return frozen }
	stats.ports[1].Blocked = true
	f := startFixture(t, func(o *Options) { o.Stats = stats }, false)

	// What the exposition must hold: the same snapshot, read by the test.
	snap := stats.Snapshot()
	want := map[string]float64{}
	for _, p := range snap.Ports {
		l := []string{"port", p.Name, "iface", p.Interface}
		want[series("e1kbox_port_up", l...)] = b2f(p.Up)
		want[series("e1kbox_port_speed_bytes", l...)] = float64(p.SpeedMbps) * 125000
		want[series("e1kbox_port_receive_packets_total", l...)] = float64(p.RxPackets)
		want[series("e1kbox_port_receive_bytes_total", l...)] = float64(p.RxBytes)
		want[series("e1kbox_port_transmit_packets_total", l...)] = float64(p.TxPackets)
		want[series("e1kbox_port_transmit_bytes_total", l...)] = float64(p.TxBytes)
		want[series("e1kbox_port_ring_drops_total", l...)] = float64(p.RingDrops)
		want[series("e1kbox_port_loop_blocked", l...)] = b2f(p.Blocked)
	}
	for _, d := range snap.Drops {
		want[series("e1kbox_drops_total", "reason", d.Reason)] = float64(d.Packets)
	}
	for _, c := range snap.CPUs {
		want[series("e1kbox_cpu_seconds_total", "cpu", strconv.Itoa(c.CPU), "mode", "busy")] = c.BusySeconds
		want[series("e1kbox_cpu_seconds_total", "cpu", strconv.Itoa(c.CPU), "mode", "idle")] = c.IdleSeconds
	}
	for _, q := range snap.IRQs {
		want[series("e1kbox_interrupts_total", "irq", strconv.Itoa(q.IRQ), "name", q.Name)] = float64(q.Count)
	}
	want["e1kbox_worker_restarts_total"] = float64(snap.WorkerRestarts)
	want["e1kbox_conntrack_entries"] = float64(snap.Conntrack.Entries)
	want["e1kbox_conntrack_capacity"] = float64(snap.Conntrack.Capacity)
	want["e1kbox_config_pending"] = 0
	want["e1kbox_webui_failed_logins_total"] = 0
	want["e1kbox_webui_stream_clients"] = 0
	want["e1kbox_webui_stream_dropped_total"] = 0
	want["e1kbox_rules"] = 3
	for _, r := range testTuning {
		want[series("e1kbox_tuning_knob_status", "knob", r.Knob, "target", r.Target, "status", r.Status)] = 1
	}
	for _, p := range []PolicyStat{{Chain: "forward", Action: "accept", Packets: 1234, Bytes: 1234 * 400}} {
		want[series("e1kbox_policy_packets_total", "chain", p.Chain, "action", p.Action)] = float64(p.Packets)
		want[series("e1kbox_policy_bytes_total", "chain", p.Chain, "action", p.Action)] = float64(p.Bytes)
	}

	// Rule counters grow in real time: scrape, then check them against the
	// rule table read right after, within the growth of that moment.
	got, types := scrape(t, f)
	table := f.srv.opts.Rules.Table()
	want["e1kbox_rule_subtables"] = float64(table.Subtables)
	counted := 0
	for i, r := range table.Rules {
		if !r.Counted {
			continue
		}
		counted++
		l := []string{"chain", r.Chain, "index", strconv.Itoa(i), "rule", r.Text}
		for _, name := range []string{"e1kbox_rule_packets_total", "e1kbox_rule_bytes_total", "e1kbox_rule_last_hit_timestamp_seconds"} {
			k := series(name, l...)
			v, ok := got[k]
			if !ok {
				if name == "e1kbox_rule_last_hit_timestamp_seconds" && got[series("e1kbox_rule_packets_total", l...)] == 0 {
					continue // no hit yet when scraped
				}
				t.Errorf("missing %s", k)
				continue
			}
			want[k] = v // checked below for plausibility, not equality
			switch name {
			case "e1kbox_rule_packets_total":
				if v > float64(r.Packets) {
					t.Errorf("%s = %v, more than the table read after it (%d)", k, v, r.Packets)
				}
			case "e1kbox_rule_bytes_total":
				if v != got[series("e1kbox_rule_packets_total", l...)]*700 {
					t.Errorf("%s = %v, want 700 bytes per packet", k, v)
				}
			}
		}
	}
	if counted != 2 {
		t.Errorf("%d counted rules, want 2", counted)
	}

	ours := map[string]float64{}
	for k, v := range got {
		if strings.HasPrefix(k, "e1kbox_") {
			ours[k] = v
		}
	}
	if diff := cmp.Diff(want, ours); diff != "" {
		t.Errorf("e1kbox series (-want +got):\n%s", diff)
	}
	for name, typ := range map[string]dto.MetricType{
		"e1kbox_port_receive_packets_total": dto.MetricType_COUNTER,
		"e1kbox_drops_total":                dto.MetricType_COUNTER,
		"e1kbox_port_up":                    dto.MetricType_GAUGE,
		"e1kbox_conntrack_entries":          dto.MetricType_GAUGE,
	} {
		if types[name] != typ {
			t.Errorf("%s has type %v, want %v", name, types[name], typ)
		}
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	// The snapshot is read per scrape, not counted a second time.
	before := stats.snapshots()
	scrape(t, f)
	if n := stats.snapshots() - before; n != 1 {
		t.Errorf("a scrape took %d snapshots, want 1", n)
	}
}
