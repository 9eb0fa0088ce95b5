package dhcpd

import (
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestHandleDeclineRelease: DECLINE and its quarantine, RELEASE and
// INFORM.
func TestHandleDeclineRelease(t *testing.T) {
	runHandle(t, []handleCase{
		{
			name: "DECLINE quarantines the address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: decline(t, macA, "10.70.0.2"), want: ""},
				{req: discover(t, macA), want: "OFFER 10.70.0.3"},
				{req: discover(t, macB, requested("10.70.0.2")), want: "OFFER 10.70.0.4"},
				{req: initReboot(t, macC, "10.70.0.2"), want: "NAK"},
				{advance: QuarantineTime + time.Second, req: discover(t, macD, requested("10.70.0.2")), want: "OFFER 10.70.0.2"},
			},
		},
		{
			name: "DECLINE of an address the client does not hold is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: decline(t, macB, "10.70.0.2"), want: ""},
				{req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "DECLINE of an address only offered is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: decline(t, macA, "10.70.0.2"), want: ""},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
		},
		{
			name: "the quarantine holds at most MaxLeases addresses",
			cfg:  func(c *Config) { c.MaxLeases = 2 },
			steps: []step{
				{req: initReboot(t, macA, "10.70.0.10"), want: "ACK 10.70.0.10"},
				{req: decline(t, macA, "10.70.0.10"), want: ""},
				{advance: time.Second, req: initReboot(t, macA, "10.70.0.11"), want: "ACK 10.70.0.11"},
				{req: decline(t, macA, "10.70.0.11"), want: ""},
				{advance: time.Second, req: initReboot(t, macA, "10.70.0.12"), want: "ACK 10.70.0.12"},
				{req: decline(t, macA, "10.70.0.12"), want: ""},
				// .10 left the quarantine early, .11 and .12 are in it.
				{req: initReboot(t, macB, "10.70.0.11"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.12"), want: "NAK"},
				{req: initReboot(t, macB, "10.70.0.10"), want: "ACK 10.70.0.10"},
			},
		},
		{
			name: "RELEASE frees the address",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: release(t, macA, "10.70.0.2"), want: ""},
				{req: initReboot(t, macB, "10.70.0.2"), want: "ACK 10.70.0.2"},
			},
			wantLeases: []string{macB + " 10.70.0.2 bound"},
		},
		{
			name: "RELEASE of another client's address is ignored",
			steps: []step{
				{req: discover(t, macA), want: "OFFER 10.70.0.2"},
				{req: selecting(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
				{req: release(t, macB, "10.70.0.2"), want: ""},
				{req: msg(t, dhcpv4.MessageTypeRelease, macA, ciaddr("10.70.0.2"), serverID("10.70.0.99")), want: ""},
				{req: initReboot(t, macC, "10.70.0.2"), want: "NAK"},
			},
			wantLeases: []string{macA + " 10.70.0.2 bound"},
		},
		{
			name: "INFORM is answered without a lease",
			steps: []step{
				{req: inform(t, macA, "10.70.0.20"), want: "ACK ciaddr=10.70.0.20"},
				{req: inform(t, macA, "192.168.1.20"), want: ""},
			},
			wantLeases: []string{},
		},
	})
}
