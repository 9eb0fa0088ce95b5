package qemutest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"e1kbox/firmware/vm"
)

// BenchmarkTuningTCG measures, on the emulated e1000e under TCG, the RX
// interrupts per second and the received packet rate for interrupt
// throttling off / dynamic / 10000 ints/s and for copybreak 256 vs 0, with
// UDP from host A through the bridge to host B. Indicative only: QEMU's
// throttling emulation is approximate. Run: make bench-tuning.
func BenchmarkTuningTCG(b *testing.B) {
	requireQEMU(b)
	requireRoot(b)
	bs := theBuilds(b)
	tap1, tap2 := newTap(b), newTap(b)
	bx := boot(b, bs.good, vm.Options{DataTaps: [2]string{tap1, tap2}})
	ha := attach(b, tap1, "10.78.0.1/24")
	hb := attach(b, tap2, "10.78.0.2/24")
	if err := ha.waitPing(hb.ip(), 60*time.Second); err != nil {
		b.Fatal(err)
	}
	hb.start("iperf3", "-s", "-B", hb.ip())
	time.Sleep(500 * time.Millisecond)
	type row struct {
		name        string
		itr         string
		copybreak   int
		irqPerSec   float64
		recvPPS     float64
		lostPercent float64
	}
	rows := []row{
		{name: "ITR off", itr: "off", copybreak: 256},
		{name: "ITR dynamic", itr: "dynamic", copybreak: 256},
		{name: "ITR dynamic-conservative (driver default)", itr: "dynamic-conservative", copybreak: 256},
		{name: "ITR 10000 ints/s", itr: "10000", copybreak: 256},
		{name: "copybreak 256 (driver default), ITR off", itr: "off", copybreak: 256},
		{name: "copybreak 0, ITR off", itr: "off", copybreak: 0},
	}
	const seconds = 4
	for i := range rows {
		r := &rows[i]
		var cur map[string]any
		if err := bx.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
			b.Fatal(err)
		}
		cfg := cur["config"].(map[string]any)
		tun := cfg["tuning"].(map[string]any)
		tun["copybreak"] = r.copybreak
		for _, p := range tun["ports"].([]any) {
			p.(map[string]any)["itr"] = r.itr
		}
		body, _ := json.Marshal(cfg)
		var ans struct {
			Pending struct{ ID string } `json:"pending"`
		}
		if err := bx.api(http.MethodPost, "/api/config/apply?confirm_timeout=60", body, &ans); err != nil {
			b.Fatalf("%s: apply: %v", r.name, err)
		}
		if err := bx.api(http.MethodPost, "/api/config/changes/"+ans.Pending.ID+"/confirm", nil, nil); err != nil {
			b.Fatalf("%s: confirm: %v", r.name, err)
		}
		time.Sleep(time.Second)
		before := sumIRQ(b, bx, "eth1-rx-0")
		out, err := ha.exec("iperf3", "-c", hb.ip(), "-u", "-l", "64", "-b", "12M", "-t", fmt.Sprint(seconds), "-J")
		if err != nil {
			b.Fatalf("%s: iperf3: %v\n%s", r.name, err, out)
		}
		after := sumIRQ(b, bx, "eth1-rx-0")
		var rep struct {
			End struct {
				Sum struct {
					Packets     float64 `json:"packets"`
					LostPackets float64 `json:"lost_packets"`
					LostPercent float64 `json:"lost_percent"`
				} `json:"sum"`
			} `json:"end"`
		}
		json.Unmarshal([]byte(out), &rep)
		r.irqPerSec = float64(after-before) / seconds
		r.recvPPS = (rep.End.Sum.Packets - rep.End.Sum.LostPackets) / seconds
		r.lostPercent = rep.End.Sum.LostPercent
	}
	fmt.Fprintf(os.Stderr, "\nemulated e1000e under QEMU TCG, UDP 64 B payload offered at ~23 kpps through the bridge (eth1 → eth2), %d s each:\n\n", seconds)
	fmt.Fprintf(os.Stderr, "| setting | eth1 RX interrupts/s | received pps | lost |\n|---|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "| %s | %.0f | %.0f | %.1f %% |\n", r.name, r.irqPerSec, r.recvPPS, r.lostPercent)
	}
	b.ReportMetric(rows[0].irqPerSec, "irq/s-itr-off")
	b.ReportMetric(rows[3].irqPerSec, "irq/s-itr-10000")
}

func sumIRQ(b *testing.B, bx *box, name string) uint64 {
	var n uint64
	for _, c := range bx.irqCounts(b, name) {
		n += c
	}
	return n
}
