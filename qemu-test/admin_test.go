package qemutest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// passwordAndHistory changes the password on the dashboard, reboots the box
// from it and checks that both the dashboard and gokrazy's UI take the new
// password and refuse the old, and that the dashboard's 24 h history from
// before the reboot is still there. hung power-cycles a box that stopped
// answering after the reboot and returns the box booted again.
func passwordAndHistory(t *testing.T, b *box, hung func(error) *box) {
	// The box may have just booted (an update's test boot keeps /perm
	// read-only, so no history was saved before it): its publisher records
	// the first point with its second sample, a second or two after it
	// starts, possibly after the box reports healthy.
	var before struct{ Time []float64 }
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := b.api(http.MethodGet, "/api/stats/history?range=24h", nil, &before)
		if err == nil && len(before.Time) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("24 h history before the reboot: %v, %d points after 30 s", err, len(before.Time))
		}
		time.Sleep(time.Second)
	}
	old, next := b.password, "qemu-N3w-pw-"+time.Now().Format("150405")
	body, _ := json.Marshal(map[string]string{"current": old, "new": next})
	if err := b.api(http.MethodPost, "/api/admin/password", body, nil); err != nil {
		t.Fatalf("password change: %v", err)
	}
	b.password = next // what the rest of the test (and the cleanup) uses
	if err := b.api(http.MethodGet, "/api/info", nil, nil); err != nil {
		t.Errorf("dashboard with the new password: %v", err)
	}
	b.password = old
	if err := b.api(http.MethodGet, "/api/info", nil, nil); !unauthorized(err) {
		t.Errorf("dashboard with the old password: %v, want 401", err)
	}
	b.password = next
	start := time.Now()
	if err := b.api(http.MethodPost, "/api/admin/reboot", nil, nil); err != nil {
		t.Fatalf("reboot: %v", err)
	}
	time.Sleep(5 * time.Second) // the box goes down first
	var st struct{ BuildTimestamp string }
	err := b.waitGokrazy(next, &st)
	if err != nil && statusOf(err) == 0 {
		// Nothing answered at all: the TCG hang powerCycle describes, not
		// a refusal (a 401 here is a real failure and is not retried).
		b = hung(err)
		err = b.waitGokrazy(next, &st)
	}
	if err != nil {
		t.Fatalf("gokrazy with the new password after the reboot: %v\nserial console tail:\n%s", err, tail(b.Console(), 40))
	}
	t.Logf("reboot from the dashboard: gokrazy answers with the new password after %.1f s", time.Since(start).Seconds())
	if err := getJSON(b.gokrazyURL(old), &st); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("gokrazy with the old password: %v, want 401", err)
	}
	if err := b.waitHealthy(st.BuildTimestamp, bootTimeout); err != nil {
		t.Fatalf("appliance after the reboot: %v", err)
	}
	var after struct{ Time []float64 }
	if err := b.api(http.MethodGet, "/api/stats/history?range=24h", nil, &after); err != nil || len(after.Time) == 0 || after.Time[0] != before.Time[0] {
		t.Errorf("24 h history after the reboot starts at %v (%v), before it at %v", after.Time, err, before.Time)
	}
	b.password = old
	if err := b.api(http.MethodGet, "/api/info", nil, nil); !unauthorized(err) {
		t.Errorf("dashboard with the old password after the reboot: %v, want 401", err)
	}
	b.password = next
}

// waitGokrazy waits up to bootTimeout for gokrazy's UI to answer with
// password; the last error if it never does.
func (b *box) waitGokrazy(password string, v any) error {
	deadline := time.Now().Add(bootTimeout)
	var err error
	for time.Now().Before(deadline) {
		if err = getJSON(b.gokrazyURL(password), v); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// unauthorized reports whether an api call was refused with 401.
func unauthorized(err error) bool {
	return err != nil && strings.Contains(err.Error(), "HTTP 401")
}
