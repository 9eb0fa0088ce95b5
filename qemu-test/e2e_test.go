package qemutest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/vm"
)

// TestEndToEnd boots the image with its data ports on tap devices joined to
// two host namespaces, A (on eth1) and B (on eth2), and drives the box only
// from outside, the way a user would.
func TestEndToEnd(t *testing.T) {
	requireQEMU(t)
	requireRoot(t)
	bs := theBuilds(t)
	tap1, tap2 := newTap(t), newTap(t)
	b := boot(t, bs.good, vm.Options{DataTaps: [2]string{tap1, tap2}})
	a := attach(t, tap1, "10.77.0.1/24")
	bb := attach(t, tap2, "10.77.0.2/24")

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			b.saveConsole(t.Name() + "_" + name)
			t.Logf("step %q failed; serial console tail:\n%s", name, tail(b.Console(), 40))
		}
	}

	step("bridge", func(t *testing.T) {
		before := b.portCounters(t)
		if err := a.waitPing(bb.ip(), 60*time.Second); err != nil {
			t.Fatalf("A → B across eth1↔eth2: %v", err)
		}
		out := a.must("ping", "-c", "20", "-i", "0.05", "-W", "2", bb.ip())
		if !strings.Contains(out, " 0% packet loss") {
			t.Errorf("ping A → B lost packets:\n%s", out)
		}
		// iperf3 TCP and UDP from A to B.
		bb.start("iperf3", "-s", "-B", bb.ip())
		time.Sleep(500 * time.Millisecond)
		tcp := a.must("iperf3", "-c", bb.ip(), "-t", "3", "-J")
		t.Logf("iperf3 TCP A → B: %s", iperfSummary(tcp, false))
		udp := a.must("iperf3", "-c", bb.ip(), "-u", "-b", "20M", "-t", "3", "-J")
		t.Logf("iperf3 UDP A → B: %s", iperfSummary(udp, true))
		after := b.portCounters(t)
		for _, p := range []string{"port1", "port2"} {
			if after[p].RX <= before[p].RX || after[p].TX <= before[p].TX {
				t.Errorf("dashboard API counters of %s did not rise: before %+v after %+v", p, before[p], after[p])
			}
		}
	})
}

type counters struct{ RX, TX uint64 }

// portCounters reads per-port rx/tx packet counters from the appliance API.
func (b *box) portCounters(t *testing.T) map[string]counters {
	t.Helper()
	var raw json.RawMessage
	if err := getJSON(b.dashboardURL("/api/stats"), &raw); err != nil {
		t.Fatalf("/api/stats: %v", err)
	}
	var snap struct {
		Ports []struct {
			Name      string `json:"name"`
			RxPackets uint64 `json:"rxPackets"`
			TxPackets uint64 `json:"txPackets"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatalf("/api/stats: %v", err)
	}
	m := map[string]counters{}
	for _, p := range snap.Ports {
		m[p.Name] = counters{p.RxPackets, p.TxPackets}
	}
	if len(m) == 0 {
		t.Fatalf("/api/stats lists no ports: %s", raw)
	}
	return m
}

func iperfSummary(js string, udp bool) string {
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				LostPercent   float64 `json:"lost_percent"`
			} `json:"sum"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		return "unparsable iperf3 output"
	}
	if udp {
		return fmt.Sprintf("%.1f Mbit/s, %.1f%% lost", r.End.Sum.BitsPerSecond/1e6, r.End.Sum.LostPercent)
	}
	return fmt.Sprintf("%.1f Mbit/s", r.End.SumReceived.BitsPerSecond/1e6)
}
