package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/capture"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

const logRuleConfig = `{
  "version": 2, "mode": "bridge",
  "ports": [{"name": "lan1", "interface": "p1"}, {"name": "lan2", "interface": "p2"}],
  "rules": {"rules": [
    {"l4proto": "tcp", "dport": "22", "log": true, "counter": true, "action": "drop", "comment": "no ssh"}
  ]}
}`

// TestDashboardFeatures runs the appliance binary in a bridge with a
// `log` rule: the rule's hits reach /api/logs with the rule, the verdict
// and the 5-tuple; a capture on a port through /api/capture is a pcapng
// file tcpdump reads; a ping from the box answers; the 24 h history
// survives a restart of the appliance.
func TestDashboardFeatures(t *testing.T) {
	testenv.Require(t, "tcpdump", "curl")
	l := newLab(t, 2)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(logRuleConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json")}
	l.start(flags...)
	l.mustHost(t, 1, "ping", "-c", "2", "-W", "2", "10.50.0.2")

	// SSH attempts from host 1: dropped and logged.
	for range 3 {
		l.host(1, "curl", "-s", "--max-time", "1", "telnet://10.50.0.2:22")
	}
	var entry webui.LogEntry
	eventually(t, 10*time.Second, "a rule log record on /api/logs", func() (bool, string) {
		code, body := l.boxGet("/api/logs?source=rule")
		var p webui.LogPage
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil || len(p.Entries) == 0 {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		entry = p.Entries[0]
		return true, ""
	})
	attrs := map[string]string{}
	for _, a := range entry.Attrs {
		attrs[a.Key] = a.Value
	}
	if entry.Source != webui.LogRule || attrs["verdict"] != "drop" || attrs["in"] != "lan1" || attrs["proto"] != "tcp" ||
		!strings.HasPrefix(attrs["src"], "10.50.0.1:") || attrs["dst"] != "10.50.0.2:22" || !strings.Contains(attrs["rule"], "tcp dport 22") {
		t.Errorf("rule log record %+v", entry)
	}

	// A capture of ICMP on lan2 while host 1 pings host 2.
	ping := l.hosts[0].Command("ping", "-c", "40", "-i", "0.2", "10.50.0.2")
	ping.Start()
	defer func() { ping.Process.Kill(); ping.Wait() }()
	pcap := filepath.Join(l.dir, "c.pcapng")
	out, err := l.box.Command("curl", "-s", "--max-time", "20", "-u", "gokrazy:"+testPassword, "-H", "X-E1kbox-CSRF: 1",
		"-o", pcap, "-w", "%{http_code} %{content_type}", "--data", `{"port":"lan2","proto":"icmp","count":10,"seconds":15}`,
		"http://127.0.0.1:8080/api/capture").CombinedOutput()
	if err != nil || string(out) != "200 application/x-pcapng" {
		t.Fatalf("capture: %v %s", err, out)
	}
	b, _ := os.ReadFile(pcap)
	f, err := capture.Read(b)
	if err != nil || len(f.Packets) != 10 || f.Interface != "p2" {
		t.Fatalf("capture file: %v, %+v", err, f)
	}
	td, err := exec.Command("tcpdump", "-n", "-r", pcap).CombinedOutput()
	// The frames the port received: the echo replies of host 2 (and its
	// ICMPv6 router solicitations). What the dataplane transmits on a port
	// bypasses the kernel's packet taps (qdisc bypass), so a capture sees
	// a port's received frames.
	if err != nil || strings.Count(string(td), "ICMP") != 10 || !strings.Contains(string(td), "IP 10.50.0.2 > 10.50.0.1: ICMP echo reply") {
		t.Errorf("tcpdump -r: %v, want 10 ICMP frames with echo replies:\n%s", err, td)
	}

	// A ping from the box (its routing table: loopback here).
	code, body := l.boxPost("/api/diag/ping", []byte(`{"host":"127.0.0.1","count":2,"interval_s":0.2}`))
	if code != 200 || !strings.Contains(body, `"type":"summary"`) || !strings.Contains(body, `"received":2`) {
		t.Errorf("ping from the box: %d %s", code, body)
	}

	// The history: at least one point before the restart, and after it.
	time.Sleep(2 * time.Second)
	before := history24h(t, l)
	if len(before.Time) == 0 {
		t.Fatal("no 24 h history")
	}
	l.stop()
	if _, err := os.Stat(filepath.Join(l.dir, "history.json")); err != nil {
		t.Fatalf("history not saved at exit: %v", err)
	}
	l.start(flags...)
	after := history24h(t, l)
	if len(after.Time) == 0 || after.Time[0] != before.Time[0] {
		t.Errorf("history after the restart starts at %v, before at %v", after.Time, before.Time)
	}
}

func history24h(t *testing.T, l *lab) webui.HistoryMessage {
	t.Helper()
	code, body := l.boxGet("/api/stats/history?range=24h")
	var h webui.HistoryMessage
	if code != 200 || json.Unmarshal([]byte(body), &h) != nil {
		t.Fatalf("history: %d %s", code, body)
	}
	return h
}
