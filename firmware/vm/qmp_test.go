package vm

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestQMPEvents: after QMP's greeting the follower leaves the capabilities
// mode, then keeps the WATCHDOG events and nothing else.
func TestQMPEvents(t *testing.T) {
	in := strings.Join([]string{
		`{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}`,
		`{"return": {}}`,
		`{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "NIC_RX_FILTER_CHANGED", "data": {"path": "/machine/peripheral-anon/device[0]/virtio-backend"}}`,
		`{"timestamp": {"seconds": 3, "microseconds": 4}, "event": "WATCHDOG", "data": {"action": "reset"}}`,
		`{"timestamp": {"seconds": 3, "microseconds": 5}, "event": "RESET", "data": {"guest": true, "reason": "guest-reset"}}`,
		`not json`,
		`{"timestamp": {"seconds": 9, "microseconds": 0}, "event": "WATCHDOG", "data": {"action": "reset"}}`,
	}, "\n") + "\n"
	var sent bytes.Buffer
	e := &events{start: time.Now()}
	e.read(strings.NewReader(in), &sent)
	if got, want := sent.String(), `{"execute":"qmp_capabilities"}`+"\n"; got != want {
		t.Errorf("sent %q, want %q", got, want)
	}
	if len(e.watchdog) != 2 {
		t.Errorf("watchdog fired %d times, want 2: %v", len(e.watchdog), e.watchdog)
	}
	e = &events{start: time.Now()}
	sent.Reset()
	e.read(strings.NewReader(""), &sent)
	if sent.Len() != 0 || len(e.watchdog) != 0 {
		t.Errorf("no greeting: sent %q, recorded %v", sent.String(), e.watchdog)
	}
}
