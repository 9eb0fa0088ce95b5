package qemutest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// api calls the dashboard API with the box's password (and the CSRF header
// on mutations); v receives the JSON answer.
func (b *box) api(method, path string, body []byte, v any) error {
	req, err := http.NewRequest(method, b.dashboardURL(path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth("gokrazy", b.password)
	if method != http.MethodGet {
		req.Header.Set("X-E1kbox-CSRF", "1")
		req.Header.Set("Content-Type", "application/json")
	}
	client := httpClient
	if strings.HasPrefix(path, "/api/config/apply") {
		// The answer comes once the change runs: a new engine, retuned
		// NICs and the router services, seconds under TCG.
		client = applyClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}

var applyClient = &http.Client{Timeout: 60 * time.Second}

// applyConfig applies cfg with commit-confirm and returns the change id.
func (b *box) applyConfig(t testing.TB, cfg []byte, timeoutS int) string {
	t.Helper()
	var ans struct {
		Pending struct {
			ID string `json:"id"`
		} `json:"pending"`
		ID string `json:"id"`
	}
	if err := b.api(http.MethodPost, fmt.Sprintf("/api/config/apply?confirm_timeout=%d", timeoutS), cfg, &ans); err != nil {
		t.Fatalf("apply: %v", err)
	}
	id := ans.Pending.ID
	if id == "" {
		id = ans.ID
	}
	if id == "" {
		t.Fatal("apply answered no change id")
	}
	return id
}

func (b *box) confirm(t testing.TB, id string) {
	t.Helper()
	if err := b.api(http.MethodPost, "/api/config/changes/"+id+"/confirm", nil, nil); err != nil {
		t.Fatalf("confirm: %v", err)
	}
}

type counters struct{ RX, TX uint64 }

// irqCounts reads one NIC vector's per-CPU interrupt counts.
func (b *box) irqCounts(t testing.TB, name string) []uint64 {
	t.Helper()
	var v struct {
		IRQs []struct {
			Name   string   `json:"name"`
			PerCPU []uint64 `json:"per_cpu"`
		} `json:"irqs"`
	}
	if err := b.api(http.MethodGet, "/api/dataplane", nil, &v); err != nil {
		t.Fatal(err)
	}
	for _, q := range v.IRQs {
		if q.Name == name {
			return q.PerCPU
		}
	}
	t.Fatalf("no interrupt vector %s in %+v", name, v.IRQs)
	return nil
}

// portCounters reads per-port rx/tx packet counters from the appliance API.
func (b *box) portCounters(t *testing.T) map[string]counters {
	t.Helper()
	var raw json.RawMessage
	if err := b.api(http.MethodGet, "/api/dataplane", nil, &raw); err != nil {
		t.Fatalf("/api/dataplane: %v", err)
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
