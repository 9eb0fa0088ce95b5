package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
)

// Helper programs and small helpers of the attack tests (see natHelper).

// pacedResult is what helperPaced prints.
type pacedResult struct {
	OK, Failed int
	// Slow counts connections whose connect took a second or more: a SYN
	// or SYN/ACK was lost and retransmitted.
	Slow         int
	P50Ms, MaxMs float64 // connect times
	Errors       []string
}

// paced runs helperPaced in host ns in the background: count connections
// to addr over d. wait returns its result.
func (l *lab) paced(t *testing.T, ns int, addr string, count int, d time.Duration) (wait func() pacedResult) {
	t.Helper()
	_, _, out := l.helper(t, ns, "paced", addr, fmt.Sprint(count), d.String())
	return func() pacedResult {
		t.Helper()
		var r pacedResult
		s := line(t, out, d+30*time.Second)
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("paced connections: %v: %q", err, s)
		}
		return r
	}
}

// macOf returns the link address of dev in namespace ns.
func macOf(t *testing.T, ns *netnstest.Namespace, dev string) [6]byte {
	t.Helper()
	s := strings.TrimSpace(ns.Run(t, "cat", "/sys/class/net/"+dev+"/address"))
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		t.Fatalf("address of %s: %q %v", dev, s, err)
	}
	return [6]byte(hw)
}

// ip4 parses a dotted IPv4 address.
func ip4(s string) [4]byte { return [4]byte(net.ParseIP(s).To4()) }
