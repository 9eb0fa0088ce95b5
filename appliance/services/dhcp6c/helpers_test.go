package dhcp6c

import (
	"net"
	"testing"
	"time"
)

var (
	boxMAC = net.HardwareAddr{0x02, 0x86, 0x00, 0x00, 0x00, 0x01}
	ispMAC = net.HardwareAddr{0x02, 0x86, 0x00, 0x00, 0x00, 0xfe}
)

// change is one onChange call.
type change struct{ old, new *Lease }

// next waits for the next change.
func next(t *testing.T, ch <-chan change, within time.Duration) change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(within):
		t.Fatalf("no lease change within %v", within)
		return change{}
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
