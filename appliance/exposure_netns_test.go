package main

import (
	"e1kbox/internal/netnstest"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// listening lists the TCP listen addresses in the box namespace on port.
func (l *lab) listening(t *testing.T, port int) []string {
	t.Helper()
	out := l.box.Run(t, "ss", "-Htln", fmt.Sprintf("sport = :%d", port))
	var addrs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			addrs = append(addrs, f[3])
		}
	}
	slices.Sort(addrs)
	return addrs
}

// curlFrom fetches url from namespace ns; it returns the HTTP status (0
// when nothing answered within two seconds).
func curlFrom(ns *netnstest.Namespace, url string) int {
	out, _ := ns.Command("curl", "-s", "-o", "/dev/null", "--max-time", "2", "-w", "%{http_code}", url).Output()
	var code int
	fmt.Sscanf(string(out), "%d", &code)
	return code
}

// TestDashboardExposure: by default the dashboard listens only where
// management belongs — loopback and the host port's address on the LAN —
// never on a wildcard, so the WAN side cannot reach it whatever the
// kernel or the tcx program do; dashboard.listen makes it listen exactly
// where it says, live, and a change that leaves it nowhere is refused.
func TestDashboardExposure(t *testing.T) {
	l := newNATLab(t, 4096, "-listen=") // the runtime config decides
	for _, a := range l.listening(t, 8080) {
		if strings.HasPrefix(a, "0.0.0.0:") || strings.HasPrefix(a, "*:") || strings.HasPrefix(a, "[::]:") {
			t.Errorf("the dashboard listens on a wildcard address %s (all: %v)", a, l.listening(t, 8080))
		}
	}
	if got := l.listening(t, 8080); !slices.Contains(got, natBoxHost+":8080") || !slices.Contains(got, "127.0.0.1:8080") {
		t.Errorf("listening on %v, want the host port's %s:8080 and 127.0.0.1:8080", got, natBoxHost)
	}
	if code := curlFrom(l.hosts[nsLAN-1], "http://"+natBoxHost+":8080/healthz"); code != 200 {
		t.Errorf("from the LAN: /healthz answered %d, want 200", code)
	}
	// From the WAN: the router's WAN address, and the LAN address through
	// a route a WAN host could set.
	gw := l.hosts[nsGW-1]
	gw.IP(t, "route", "add", "10.60.0.0/24", "via", natWANAddr)
	for _, url := range []string{"http://" + natWANAddr + ":8080/healthz", "http://" + natBoxHost + ":8080/healthz"} {
		if code := curlFrom(gw, url); code != 0 {
			t.Errorf("from the WAN: %s answered %d, want no answer", url, code)
		}
	}

	// dashboard.listen set: exactly there, applied live and confirmed
	// through the new address.
	cfg := strings.Replace(natConfigJSON(4096), `"nat": {`, `"dashboard": {"listen": "127.0.0.1:9090"},
  "nat": {`, 1)
	code, body := l.boxPost("/api/config/apply?confirm_timeout=60", []byte(cfg))
	if code != 202 {
		t.Fatalf("apply: %d %s", code, body)
	}
	if got := l.listening(t, 9090); fmt.Sprint(got) != "[127.0.0.1:9090]" {
		t.Errorf("with dashboard.listen 127.0.0.1:9090: listening on %v", got)
	}
	if got := l.listening(t, 8080); len(got) != 0 {
		t.Errorf("still listening on %v", got)
	}
	id := pendingID(t, body)
	out, err := l.box.Command("curl", "-s", "--max-time", "5", "-u", "gokrazy:"+testPassword,
		"-H", "X-E1kbox-CSRF: 1", "-X", "POST", "-w", "\n%{http_code}", "http://127.0.0.1:9090/api/config/changes/"+id+"/confirm").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "200") {
		t.Fatalf("confirm through 127.0.0.1:9090: %v %s", err, out)
	}
	if code := curlFrom(l.hosts[nsLAN-1], "http://"+natBoxHost+":8080/healthz"); code != 0 {
		t.Errorf("from the LAN after the move: %d, want no answer", code)
	}

	// An address the box does not have: refused, the dashboard stays.
	bad := strings.Replace(cfg, "127.0.0.1:9090", "192.0.2.99:9090", 1)
	out, err = l.box.Command("curl", "-s", "--max-time", "10", "-u", "gokrazy:"+testPassword,
		"-H", "X-E1kbox-CSRF: 1", "-X", "POST", "--data-binary", bad, "-w", "\n%{http_code}", "http://127.0.0.1:9090/api/config/apply").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "400") || !strings.Contains(string(out), "nowhere to listen") {
		t.Errorf("apply with a listen address the box does not have: %v %s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	if got := l.listening(t, 9090); fmt.Sprint(got) != "[127.0.0.1:9090]" {
		t.Errorf("after the refused change: listening on %v", got)
	}
}

// pendingID reads the pending change's id from an apply answer.
func pendingID(t *testing.T, body string) string {
	t.Helper()
	var a struct {
		Pending struct{ ID string } `json:"pending"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || a.Pending.ID == "" {
		t.Fatalf("apply answer %s: %v", body, err)
	}
	return a.Pending.ID
}
