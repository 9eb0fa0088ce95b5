package dataplane

import (
	"testing"
	"time"

	"e1kbox/internal/ispvm"
)

// TestFastPathPPPoEVM fetches /big (10 MiB) through a session with
// Debian's pppoe-server and pppd (package ispvm), untagged and in VLAN 7,
// with the tcx fast path: the fast path carries the transfer's
// established packets both ways (its port counters), and the data
// arrives intact (traffic checks the checksum).
func TestFastPathPPPoEVM(t *testing.T) {
	for _, tc := range []struct {
		name string
		vm   ispvm.Config
	}{
		{"untagged", ispvm.Config{ACName: "isp-fastpath"}},
		{"VLAN 7", ispvm.Config{ACName: "isp-fastpath7", VLAN: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPPPoEBox(t, tc.vm, FastPathTCX)
			st := b.waitUp(90 * time.Second)
			before := fastPorts(b.e)
			b.traffic(st.LocalIPv4)
			b.e.SyncFastPath()
			after := fastPorts(b.e)
			wan, lan := b.e.wanID(), uint16(1)
			fromWAN, fromLAN := after[wan].RxPackets-before[wan].RxPackets, after[lan].RxPackets-before[lan].RxPackets
			fs := b.e.Snapshot().FastPath
			t.Logf("the fast path forwarded %d frames from the session and %d from the LAN (%d bytes from the session); punts %v",
				fromWAN, fromLAN, after[wan].RxBytes-before[wan].RxBytes, fs.Punts)
			// 10 MiB in segments of at most 1452 bytes (the MSS clamp of
			// the session's 1492) is over 7200 segments: most of them the
			// fast path's, and the ACKs the other way.
			if fromWAN < 5000 || fromLAN < 1000 {
				t.Errorf("the fast path forwarded %d frames from the session and %d from the LAN, want most of the 10 MiB transfer's", fromWAN, fromLAN)
			}
		})
	}
}
