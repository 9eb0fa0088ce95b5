package qemutest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/vm"
	"e1kbox/internal/netnstest"
)

// BenchmarkForwardingTCG measures what a user's first hour with the image
// sees, under QEMU TCG on the emulated e1000e ports: boot to forwarding (VM
// start → first ping answered across eth1↔eth2), received pps through the
// bridge and through NAT at 64 B and 512 B frames, and the forwarding
// outage of an OTA update (longest gap between ping replies while the box
// updates). Indicative only: TCG emulates every instruction and the NIC, so
// real hardware is orders of magnitude faster. Run: make bench-qemu.
func BenchmarkForwardingTCG(b *testing.B) {
	requireQEMU(b)
	requireRoot(b)
	bs := theBuilds(b)
	for i := 0; i < b.N; i++ {
		res := measureForwarding(b, bs)
		fmt.Fprintf(os.Stderr, "\n%s", res.table())
		if err := os.WriteFile(filepath.Join(artifacts, "forwarding-tcg.md"), []byte(res.table()), 0o644); err != nil {
			b.Logf("saving the table: %v", err)
		}
		b.ReportMetric(res.bootToForward.Seconds(), "boot-to-forward-s")
		b.ReportMetric(res.otaOutage.Seconds(), "ota-longest-outage-s")
		b.ReportMetric(res.otaDown.Seconds(), "ota-outage-total-s")
		for _, r := range res.rows {
			b.ReportMetric(r.pps, strings.ReplaceAll(r.mode+"-"+strconv.Itoa(r.size)+"B", " ", "-")+"-pps")
		}
	}
}

type fwdRow struct {
	mode    string
	size    int // Ethernet frame size incl. FCS
	offered float64
	pps     float64
	lost    float64
}

type fwdResult struct {
	bootToForward, bootToHealthy time.Duration
	rows                         []fwdRow
	otaOutage, otaDown, otaTotal time.Duration
	otaAnswered, otaSent         int
}

func (r *fwdResult) table() string {
	var s strings.Builder
	fmt.Fprintf(&s, "e1kbox image under QEMU TCG (-cpu max, 2 vCPUs, 3× e1000e), %s — indicative only:\n\n", time.Now().Format(time.DateOnly))
	fmt.Fprintf(&s, "| measure | value |\n|---|---:|\n")
	fmt.Fprintf(&s, "| boot to forwarding (VM start → first ping across eth1↔eth2) | %.1f s |\n", r.bootToForward.Seconds())
	fmt.Fprintf(&s, "| boot to healthy /healthz | %.1f s |\n", r.bootToHealthy.Seconds())
	for _, row := range r.rows {
		fmt.Fprintf(&s, "| %s %d B UDP: received pps (offered %.0f k, lost %.0f %%) | %.0f |\n", row.mode, row.size, row.offered/1000, row.lost, row.pps)
	}
	fmt.Fprintf(&s, "| OTA while pinging every 100 ms: longest gap between replies | %.1f s |\n", r.otaOutage.Seconds())
	fmt.Fprintf(&s, "| OTA: all time without forwarding (gaps over 1 s: test boot and commit reboot) | %.1f s |\n", r.otaDown.Seconds())
	fmt.Fprintf(&s, "| OTA total (upload → committed and rebooted) | %.1f s (%d of %d pings answered) |\n", r.otaTotal.Seconds(), r.otaAnswered, r.otaSent)
	return s.String()
}

func measureForwarding(b *testing.B, bs *builds) *fwdResult {
	res := &fwdResult{}
	tap1, tap2 := newTap(b), newTap(b)
	img := copyImage(b, bs.good.Image)
	start := time.Now()
	// QEMU opens the taps by name in this namespace; they move into the
	// hosts' namespaces after (the kernel is still booting then).
	v, err := vm.Start(context.Background(), vm.Options{Image: img, DataTaps: [2]string{tap1, tap2}, CPU: "max"})
	if err != nil {
		b.Fatal(err)
	}
	for _, tap := range []string{tap1, tap2} {
		if err := waitTapOpened(tap, 30*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	ha := attach(b, tap1, "10.79.0.1/24")
	hb := attach(b, tap2, "10.79.0.2/24")
	// Ping from the start; the first reply is "forwarding".
	pinger := newPinger(b, ha, hb.ip(), 100*time.Millisecond)
	bx := &box{VM: v, t: b, password: bs.good.Password}
	b.Cleanup(func() {
		if b.Failed() {
			bx.saveConsole(b.Name())
			b.Logf("serial console tail:\n%s", tail(v.Console(), 40))
		}
		v.Kill()
	})
	if err := bx.waitHealthy(bs.good.BuildTimestamp, bootTimeout); err != nil {
		b.Fatalf("boot: %v", err)
	}
	res.bootToHealthy = time.Since(start)
	first, ok := pinger.firstReply(60 * time.Second)
	pinger.stop()
	if !ok {
		b.Fatalf("no ping crossed the bridge within 60 s of a healthy box; ping output:\n%s", tail(pinger.out.String(), 20))
	}
	res.bootToForward = first.Sub(start)

	hb.start("iperf3", "-s", "-B", hb.ip())
	time.Sleep(500 * time.Millisecond)
	for _, size := range []int{64, 512} {
		res.rows = append(res.rows, bestUDP(b, ha, hb.ip(), "bridge", size))
	}

	// NAT mode through the API (commit-confirm), hosts re-addressed: A on
	// the LAN, B the WAN gateway and server.
	ha.must("ip", "addr", "flush", "dev", ha.dev)
	ha.must("ip", "addr", "add", "192.168.60.10/24", "dev", ha.dev)
	ha.must("ip", "route", "add", "default", "via", "192.168.60.1")
	hb.must("ip", "addr", "flush", "dev", hb.dev)
	hb.must("ip", "addr", "add", "198.51.100.1/24", "dev", hb.dev)
	var cur map[string]any
	if err := bx.api(http.MethodGet, "/api/config", nil, &cur); err != nil {
		b.Fatal(err)
	}
	cfg := cur["config"].(map[string]any)
	cfg["mode"] = "nat"
	cfg["ports"] = []any{
		map[string]any{"name": "lan", "interface": "eth1", "role": "lan", "addresses": []string{"192.168.60.1/24"}},
		map[string]any{"name": "wan", "interface": "eth2", "role": "wan", "addresses": []string{"198.51.100.2/24"}},
	}
	cfg["hostPort"] = map[string]any{"addresses": []string{"192.168.60.2/24"}}
	cfg["nat"] = map[string]any{"gateway": "198.51.100.1"}
	body, _ := json.Marshal(cfg)
	bx.confirm(b, bx.applyConfig(b, body, 120))
	hb.start("iperf3", "-s", "-B", "198.51.100.1", "-p", "5202")
	if err := ha.waitPing("198.51.100.1", 60*time.Second); err != nil {
		b.Fatalf("LAN host → WAN through NAT: %v", err)
	}
	for _, size := range []int{64, 512} {
		res.rows = append(res.rows, bestUDP(b, ha, "198.51.100.1 -p 5202", "nat", size))
	}

	// OTA while pinging through NAT.
	pinger = newPinger(b, ha, "198.51.100.1", 100*time.Millisecond)
	otaStart := time.Now()
	rep, err := bx.update(bs.second)
	if err != nil {
		b.Fatalf("OTA: %v\n%v", err, rep)
	}
	if err := ha.waitPing("198.51.100.1", 60*time.Second); err != nil {
		b.Fatalf("NAT traffic after the update: %v", err)
	}
	time.Sleep(time.Second)
	pinger.stop()
	res.otaTotal = rep.Total
	res.otaOutage, res.otaDown, res.otaAnswered = pinger.gaps(otaStart, time.Second)
	res.otaSent = int(time.Since(otaStart) / (100 * time.Millisecond))
	return res
}

// bestUDP offers 64 B or 512 B UDP frames from h to dst ("addr" or "addr
// -p port") at three rates for 4 s each and returns the run with the most
// packets received by the iperf3 server.
func bestUDP(b *testing.B, h *host, dst, mode string, size int) fwdRow {
	payload := size - 14 - 20 - 8 - 4 // Ethernet, IPv4, UDP headers, FCS
	const seconds = 4
	best := fwdRow{mode: mode, size: size}
	for _, kpps := range []float64{20, 40, 80} {
		bps := kpps * 1000 * float64(payload) * 8
		args := append([]string{"iperf3", "-c"}, strings.Fields(dst)...)
		args = append(args, "-u", "-l", strconv.Itoa(payload), "-b", strconv.FormatFloat(bps, 'f', 0, 64), "-t", strconv.Itoa(seconds), "-J")
		out, err := h.exec(args...)
		if err != nil {
			b.Fatalf("%s %d B: iperf3: %v\n%s", mode, size, err, tail(out, 20))
		}
		var rep struct {
			End struct {
				Sum struct {
					Packets     float64 `json:"packets"`
					LostPackets float64 `json:"lost_packets"`
					LostPercent float64 `json:"lost_percent"`
				} `json:"sum"`
			} `json:"end"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.End.Sum.Packets == 0 {
			b.Fatalf("%s %d B: iperf3 report: %v\n%s", mode, size, err, tail(out, 20))
		}
		pps := (rep.End.Sum.Packets - rep.End.Sum.LostPackets) / seconds
		if pps <= 0 {
			b.Fatalf("%s %d B at %.0f kpps offered: nothing received:\n%s", mode, size, kpps, tail(out, 20))
		}
		if pps > best.pps {
			best.offered, best.pps, best.lost = rep.End.Sum.Packets/seconds, pps, rep.End.Sum.LostPercent
		}
	}
	return best
}

// pinger runs ping -D (Unix timestamps on each reply) in a namespace.
type pinger struct {
	cmd *exec.Cmd
	out *netnstest.Buffer
}

func newPinger(b *testing.B, h *host, dst string, every time.Duration) *pinger {
	p := &pinger{out: &netnstest.Buffer{}}
	p.cmd = h.cmd("stdbuf", "-oL", "ping", "-D", "-i", strconv.FormatFloat(every.Seconds(), 'f', 2, 64), "-W", "1", dst)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.stop)
	return p
}

func (p *pinger) stop() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// replies returns the times of the replies so far.
func (p *pinger) replies() []time.Time {
	var ts []time.Time
	for _, line := range strings.Split(p.out.String(), "\n") {
		if !strings.Contains(line, "bytes from") || !strings.HasPrefix(line, "[") {
			continue
		}
		end := strings.IndexByte(line, ']')
		f, err := strconv.ParseFloat(line[1:end], 64)
		if err != nil {
			continue
		}
		ts = append(ts, time.Unix(0, int64(f*1e9)))
	}
	return ts
}

func (p *pinger) firstReply(timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ts := p.replies(); len(ts) > 0 {
			return ts[0], true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, false
}

// gaps returns, after since, the longest time without a reply (from since
// to the first reply counts too), the sum of the gaps longer than over,
// and the number of replies.
func (p *pinger) gaps(since time.Time, over time.Duration) (longest, sum time.Duration, n int) {
	ts := p.replies()
	prev := since
	for _, t := range ts {
		if t.Before(since) {
			continue
		}
		d := t.Sub(prev)
		longest = max(longest, d)
		if d > over {
			sum += d
		}
		prev = t
	}
	return longest, sum, len(ts)
}

// waitTapOpened waits until a process (QEMU) has attached to tap: the
// carrier of a tap is up only while its file is open.
func waitTapOpened(tap string, timeout time.Duration) error {
	if out, err := exec.Command("ip", "link", "set", tap, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s up: %v: %s", tap, err, out)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := os.ReadFile("/sys/class/net/" + tap + "/carrier"); err == nil && strings.TrimSpace(string(c)) == "1" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("QEMU did not open %s within %v", tap, timeout)
}
