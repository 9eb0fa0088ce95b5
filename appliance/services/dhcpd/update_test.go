package dhcpd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUpdate applies a new pool and new statics to a running table: leases
// the new config allows renew, the others are NAKed when they renew.
func TestUpdate(t *testing.T) {
	a := netip.MustParseAddr
	s, clk := newTestServer(t, testConfig())
	changes := 0
	s.OnChange = func() { changes++ }
	dora(t, s, macA)                               // .2
	dora(t, s, macB)                               // .3
	dora(t, s, macC, requested("10.70.0.50"))      // .50
	dora(t, s, macD, requested("10.70.0.60"))      // .60
	dora(t, s, "02:00:00:00:00:0e", hostname("e")) // .4
	if err := s.MakeStatic(hw("02:00:00:00:00:0e")); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig()
	cfg.PoolStart, cfg.PoolEnd = a("10.70.0.2"), a("10.70.0.49")
	cfg.Static = []Static{
		{MAC: hw(macS), IP: a("10.70.0.3")},                // B's address
		{MAC: hw(macD), IP: a("10.70.0.60")},               // D's own address, outside the new pool
		{MAC: hw("02:00:00:00:00:0f"), IP: a("10.70.0.4")}, // the pinned address of e
	}
	before := changes
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	if changes != before+1 {
		t.Errorf("Update called OnChange %d times, want 1", changes-before)
	}
	clk.Add(time.Hour)
	for i, st := range []step{
		{req: renew(t, macA, "10.70.0.2"), want: "ACK 10.70.0.2"},
		// S's static address is still B's until B renews.
		{req: discover(t, macS), want: "OFFER 10.70.0.5"},
		{req: renew(t, macB, "10.70.0.3"), want: "NAK"},
		{req: discover(t, macS), want: "OFFER 10.70.0.3"},
		{req: selecting(t, macS, "10.70.0.3"), want: "ACK 10.70.0.3"},
		{req: discover(t, macB), want: "OFFER 10.70.0.6"},
		{req: renew(t, macC, "10.70.0.50"), want: "NAK"},
		{req: renew(t, macD, "10.70.0.60"), want: "ACK 10.70.0.60"},
		// e's pin conflicted with the new config and is gone.
		{req: renew(t, "02:00:00:00:00:0e", "10.70.0.4"), want: "NAK"},
	} {
		if got := summary(s.Handle(st.req)); got != st.want {
			t.Errorf("step %d (%s %s): got %q, want %q", i, st.req.MessageType(), st.req.ClientHWAddr, got, st.want)
		}
		checkInvariants(t, s)
	}
	want := []string{
		macA + " 10.70.0.2 bound",
		macS + " 10.70.0.3 bound static config",
		"02:00:00:00:00:0f 10.70.0.4 reserved static config",
		macB + " 10.70.0.6 offered",
		macD + " 10.70.0.60 bound static config",
	}
	if diff := cmp.Diff(want, leaseLines(s)); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}
	if got := s.Stats().PoolSize; got != 46 {
		t.Errorf("pool size %d, want 46 (.2-.49 without the static .3 and .4)", got)
	}

	// A refused config changes nothing.
	bad := cfg
	bad.Static = append(bad.Static, Static{MAC: hw(macA), IP: a("10.70.0.3")})
	if err := s.Update(bad); err == nil || !strings.Contains(err.Error(), "already Static[0]'s") {
		t.Errorf("Update with a duplicate static address: %v", err)
	}
	if got := len(s.Config().Static); got != 3 {
		t.Errorf("a refused Update changed the config: %d statics", got)
	}

	// Another subnet: every old lease is on the wrong network.
	other := testConfig()
	other.Subnet, other.ServerIP, other.Interface = netip.MustParsePrefix("192.168.5.0/24"), a("192.168.5.1"), "lan1"
	if err := s.Update(other); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.reopen:
	default:
		t.Error("an Update to another interface did not ask Serve to reopen its socket")
	}
	if got := summary(s.Handle(renew(t, macA, "10.70.0.2"))); got != "NAK" {
		t.Errorf("renewal on the old subnet: %q, want NAK", got)
	}
	if got := summary(s.Handle(discover(t, macA))); got != "OFFER 192.168.5.2" {
		t.Errorf("discover on the new subnet: %q", got)
	}
	checkInvariants(t, s)
}

// TestUpdateMaxLeases: lowering MaxLeases keeps the bound leases above the
// new bound; offers are reclaimed, and new clients wait until the table is
// below the bound again.
func TestUpdateMaxLeases(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	for i := range 10 {
		dora(t, s, macN(i))
	}
	for i := 10; i < 20; i++ {
		s.Handle(discover(t, macN(i)))
	}
	cfg := testConfig()
	cfg.MaxLeases = 5
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	if got := summary(s.Handle(discover(t, macN(99)))); got == "" {
		t.Error("a new client got no offer although offers can be reclaimed")
	}
	if got := s.dynamic(); got != 20 {
		t.Errorf("%d dynamic entries, want 20 (one offer reclaimed for one)", got)
	}
	clk.Add(OfferHold)
	s.sweep()
	if got := summary(s.Handle(discover(t, macN(100)))); got != "" {
		t.Errorf("a new client got %q from a table of 10 bound leases bounded to 5", got)
	}
	for i := range 10 {
		want := "ACK 10.70.0." + strconv.Itoa(i+2)
		if got := summary(s.Handle(renew(t, macN(i), "10.70.0."+strconv.Itoa(i+2)))); got != want {
			t.Errorf("client %d renewing: %q, want %q", i, got, want)
		}
	}
	checkInvariantsBound(t, s, 10)
}

func macN(i int) string {
	return fmt.Sprintf("02:00:00:%02x:%02x:%02x", byte(i>>16), byte(i>>8), byte(i))
}
