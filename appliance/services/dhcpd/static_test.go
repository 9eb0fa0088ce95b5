package dhcpd

import (
	"net/netip"
	"testing"
	"time"
)

// TestHandleStatic: static leases.
func TestHandleStatic(t *testing.T) {
	static := func(c *Config) {
		c.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100"), Hostname: "printer"}}
	}
	runHandle(t, []handleCase{
		{
			name: "a static lease goes to its device only",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
				{req: selecting(t, macS, "10.70.0.100"), want: "ACK 10.70.0.100"},
				{req: discover(t, macA, requested("10.70.0.100")), want: "OFFER 10.70.0.2"},
				{req: initReboot(t, macB, "10.70.0.100"), want: "NAK"},
				{req: renew(t, macB, "10.70.0.100"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 offered", macS + " 10.70.0.100 bound static config printer"},
		},
		{
			name: "a static lease is reserved before its device comes",
			cfg:  static,
			steps: []step{
				{req: initReboot(t, macA, "10.70.0.100"), want: "NAK"},
				{req: discover(t, macA, requested("10.70.0.100")), want: "OFFER 10.70.0.2"},
			},
			wantLeases: []string{macA + " 10.70.0.2 offered", macS + " 10.70.0.100 reserved static config printer"},
		},
		{
			name: "a device with a static lease gets no other address",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS, requested("10.70.0.7")), want: "OFFER 10.70.0.100"},
				{req: initReboot(t, macS, "10.70.0.7"), want: "NAK"},
				{req: renew(t, macS, "10.70.0.7"), want: "NAK"},
			},
		},
		{
			name: "a static lease outside the pool",
			cfg: func(c *Config) {
				c.PoolStart, c.PoolEnd = netip.MustParseAddr("10.70.0.100"), netip.MustParseAddr("10.70.0.110")
				c.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.50")}}
			},
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.50"},
				{req: selecting(t, macS, "10.70.0.50"), want: "ACK 10.70.0.50"},
			},
		},
		{
			name: "a declined static address falls back to the pool",
			cfg:  static,
			steps: []step{
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
				{req: selecting(t, macS, "10.70.0.100"), want: "ACK 10.70.0.100"},
				{req: decline(t, macS, "10.70.0.100"), want: ""},
				{req: discover(t, macS), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macS, "10.70.0.2"), want: "ACK 10.70.0.2"},
				// Once the quarantine is over the device moves back.
				{advance: QuarantineTime + time.Second, req: renew(t, macS, "10.70.0.2"), want: "NAK"},
				{req: discover(t, macS), want: "OFFER 10.70.0.100"},
			},
		},
	})
}

// TestHandleFullTable: a table at MaxLeases and an exhausted pool.
func TestHandleFullTable(t *testing.T) {
	const lease = DefaultLeaseTime
	runHandle(t, []handleCase{
		{
			name: "a full table of bound leases refuses new clients",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{req: selecting(t, macB, "10.70.0.3"), want: "ACK 10.70.0.3"},
				{req: discover(t, macC), want: ""},
				{req: initReboot(t, macC, "10.70.0.9"), want: ""},
				{req: release(t, macB, "10.70.0.3"), want: ""},
				{req: discover(t, macC), want: "OFFER 10.70.0.3"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound", macC + " 10.70.0.3 offered"},
		},
		{
			name: "a full table reclaims the oldest offer",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{advance: time.Second, req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{advance: time.Second, req: discover(t, macC), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "NAK"},
				{req: selecting(t, macB, "10.70.0.3"), want: "ACK 10.70.0.3"},
			},
			wantLeases: []string{macC + " 10.70.0.2 offered", macB + " 10.70.0.3 bound"},
		},
		{
			name: "an exhausted pool reclaims the expired lease first",
			cfg: func(c *Config) {
				c.PoolStart, c.PoolEnd = netip.MustParseAddr("10.70.0.2"), netip.MustParseAddr("10.70.0.3")
			},
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{advance: lease + time.Second, req: discover(t, macB), want: "OFFER 10.70.0.3"},
				{advance: time.Second, req: discover(t, macC), want: "OFFER 10.70.0.2"},
				{advance: time.Second, req: discover(t, macD), want: "OFFER 10.70.0.3"},
			},
			wantLeases: []string{macC + " 10.70.0.2 offered", macD + " 10.70.0.3 offered"},
		},
	})
}
