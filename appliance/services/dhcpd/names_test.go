package dhcpd

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSanitizeHostname(t *testing.T) {
	for in, want := range map[string]string{
		"laptop":                       "laptop",
		"John's iPhone":                "john-s-iphone",
		"host.example.com":             "host",
		"--Weird__Name--":              "weird-name",
		"über":                         "ber",
		"":                             "",
		"...":                          "",
		"a" + string(make([]byte, 80)): "a",
		"x123456789012345678901234567890123456789012345678901234567890123456789": "x12345678901234567890123456789012345678901234567890123456789012",
		"ends-in-dash-at-63-chars-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-y":       "ends-in-dash-at-63-chars-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	} {
		got := sanitizeHostname(in)
		if got != want {
			t.Errorf("sanitizeHostname(%q) = %q, want %q", in, got, want)
		}
		if got != "" && !validLabel(got) {
			t.Errorf("sanitizeHostname(%q) = %q: not a DNS label", in, got)
		}
	}
}

// TestNames checks the local names: statics always, bound leases while
// bound, static names winning, the newest lease winning a name, and
// Lookup's forms.
func TestNames(t *testing.T) {
	cfg := testConfig()
	cfg.Static = []Static{
		{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100"), Hostname: "printer"},
		{MAC: hw("02:00:00:00:00:06"), IP: netip.MustParseAddr("10.70.0.101")}, // no name
	}
	s, clk := newTestServer(t, cfg)
	dora(t, s, macA, hostname("laptop"))
	clk.Add(time.Minute)
	dora(t, s, macB, hostname("Printer")) // a static name: ignored
	dora(t, s, macC, hostname("phone"))
	clk.Add(time.Minute)
	dora(t, s, macD, hostname("phone")) // newer: wins
	a := netip.MustParseAddr
	want := []Name{
		{"laptop", a("10.70.0.2")}, {"phone", a("10.70.0.5")}, {"printer", a("10.70.0.100")},
	}
	if diff := cmp.Diff(want, s.Names(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{
		"laptop": "10.70.0.2", "LAPTOP.lan.": "10.70.0.2", "laptop.lan": "10.70.0.2",
		"printer.lan": "10.70.0.100", "laptop.other": "", "x.laptop.lan": "", "nobody": "", "": "",
	} {
		got, ok := s.Lookup(name)
		if ok != (want != "") || (ok && got.String() != want) {
			t.Errorf("Lookup(%q) = %v, %v; want %q", name, got, ok, want)
		}
	}

	// Releasing and expiring take names away; statics stay.
	s.Handle(release(t, macD, "10.70.0.5"))
	if got, _ := s.Lookup("phone"); got.String() != "10.70.0.4" {
		t.Errorf("after D's release, phone is %v, want C's 10.70.0.4", got)
	}
	clk.Add(DefaultLeaseTime)
	if _, ok := s.Lookup("laptop"); ok {
		t.Error("laptop resolves after its lease expired")
	}
	if got, _ := s.Lookup("printer"); got.String() != "10.70.0.100" {
		t.Errorf("printer is %v after every lease expired, want its static 10.70.0.100", got)
	}
}

func TestMakeStaticForget(t *testing.T) {
	cfg := testConfig()
	cfg.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.100")}}
	s, clk := newTestServer(t, cfg)
	changes := 0
	s.OnChange = func() { changes++ }
	aIP := dora(t, s, macA, hostname("tv"))
	if err := s.MakeStatic(hw(macA)); err != nil {
		t.Fatal(err)
	}
	// The pin holds after the lease expired and B asks for the address.
	clk.Add(2 * DefaultLeaseTime)
	if got := summary(s.Handle(discover(t, macB, requested(aIP.String())))); got == "OFFER "+aIP.String() {
		t.Errorf("B was offered A's static address: %s", got)
	}
	if got := summary(s.Handle(discover(t, macA))); got != "OFFER "+aIP.String() {
		t.Errorf("A got %q, want its pinned address", got)
	}
	if got, _ := s.Lookup("tv"); got != aIP {
		t.Errorf("tv is %v, want %v", got, aIP)
	}
	wantLeases := []string{macA + " 10.70.0.2 offered static tv", macB + " 10.70.0.3 offered", macS + " 10.70.0.100 reserved static config"}
	if diff := cmp.Diff(wantLeases, leaseLines(s)); diff != "" {
		t.Errorf("Leases (-want +got):\n%s", diff)
	}
	if got := s.Stats().PoolSize; got != 251 {
		t.Errorf("pool size %d, want 251 (the pinned address left it)", got)
	}

	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"make static twice", s.MakeStatic(hw(macA)), ErrAlreadyStatic},
		{"make static without a lease", s.MakeStatic(hw(macD)), ErrNoLease},
		{"make a config static static", s.MakeStatic(hw(macS)), ErrConfigStatic},
		{"forget a config static", s.Forget(hw(macS)), ErrConfigStatic},
		{"forget an unknown device", s.Forget(hw(macD)), ErrNoLease},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}

	before := changes
	if err := s.Forget(hw(macA)); err != nil {
		t.Fatal(err)
	}
	if changes != before+1 {
		t.Errorf("Forget called OnChange %d times, want 1", changes-before)
	}
	if got := summary(s.Handle(initReboot(t, macC, aIP.String()))); got != "ACK "+aIP.String() {
		t.Errorf("after Forget, C asking for A's address got %q", got)
	}
	if _, ok := s.Lookup("tv"); ok {
		t.Error("tv resolves after Forget")
	}
	checkInvariants(t, s)
}

// TestSweep: offers and quarantines end, bound leases become expired (and
// sweep says so, for OnChange), expired leases stay as memory.
func TestSweep(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	dora(t, s, macA)
	dIP := dora(t, s, macD)
	s.Handle(decline(t, macD, dIP.String()))
	s.Handle(discover(t, macB))
	if s.sweep() {
		t.Error("sweep reported an expiry with nothing expired")
	}
	clk.Add(OfferHold)
	if s.sweep() {
		t.Error("sweep reported an expiry when only an offer ended")
	}
	if diff := cmp.Diff([]string{macA + " 10.70.0.2 bound"}, leaseLines(s)); diff != "" {
		t.Errorf("after the offer ended (-want +got):\n%s", diff)
	}
	clk.Add(DefaultLeaseTime)
	if !s.sweep() {
		t.Error("sweep did not report the expired lease")
	}
	if s.sweep() {
		t.Error("sweep reported the same expiry twice")
	}
	if diff := cmp.Diff([]string{macA + " 10.70.0.2 expired"}, leaseLines(s)); diff != "" {
		t.Errorf("after the lease ended (-want +got):\n%s", diff)
	}
	if len(s.declined) != 0 {
		t.Errorf("quarantine not purged: %v", s.declined)
	}
	checkInvariants(t, s)
}
