package pppoe

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// upStatus is the part of a Status the session tests compare.
type upStatus struct {
	Phase                           Phase
	ACName                          string
	MRU, MTU                        int
	RFC4638                         bool
	LocalIPv4, PeerIPv4, DNS1, DNS2 netip.Addr
	LocalLinkLocal, PeerLinkLocal   netip.Addr
}

func summarize(s Status) upStatus {
	return upStatus{s.Phase, s.ACName, s.MRU, s.MTU, s.RFC4638, s.LocalIPv4, s.PeerIPv4, s.DNS1, s.DNS2, s.LocalLinkLocal, s.PeerLinkLocal}
}

func TestSessionUp(t *testing.T) {
	v4 := upStatus{
		Phase: PhaseUp, ACName: "isp", MRU: 1492, MTU: 1492,
		LocalIPv4: netip.MustParseAddr("100.64.0.7"), PeerIPv4: netip.MustParseAddr("100.64.0.1"),
		DNS1: netip.MustParseAddr("9.9.9.9"), DNS2: netip.MustParseAddr("149.112.112.112"),
	}
	with := func(f func(*upStatus)) upStatus { s := v4; f(&s); return s }
	tests := []struct {
		name string
		cfg  func(*Config)
		ac   func(*acDouble)
		want upStatus
	}{
		{name: "pap", want: v4},
		{name: "chap", ac: func(a *acDouble) { a.auth = protoCHAP }, want: v4},
		{name: "no auth asked", ac: func(a *acDouble) { a.auth = 0 }, want: v4},
		{
			name: "rfc4638 confirmed: 1500",
			cfg:  func(c *Config) { c.MRU = 1500 },
			ac:   func(a *acDouble) { a.rfc4638 = true },
			want: with(func(s *upStatus) { s.MRU, s.RFC4638 = 1500, true }), // the AC's MRU stays 1492: MTU 1492
		},
		{
			name: "rfc4638 not offered by the AC: 1492",
			cfg:  func(c *Config) { c.MRU = 1500 },
			want: v4,
		},
		{
			name: "rfc4638 confirmed but LCP Nak to 1492",
			cfg:  func(c *Config) { c.MRU = 1500 },
			ac:   func(a *acDouble) { a.rfc4638, a.mruLimit = true, 1492 },
			want: with(func(s *upStatus) { s.RFC4638 = true }),
		},
		{
			name: "ipv6cp with colliding interface IDs",
			cfg:  func(c *Config) { c.IPv6, c.InterfaceID = true, [8]byte{0x02, 0xac, 0, 0, 0, 0, 0, 1} },
			ac:   func(a *acDouble) { a.ipv6 = true },
			want: with(func(s *upStatus) {
				s.LocalLinkLocal = netip.MustParseAddr("fe80::1234:0:0:99")
				s.PeerLinkLocal = netip.MustParseAddr("fe80::2ac:0:0:1")
			}),
		},
		{
			name: "ipv6cp from the MAC",
			cfg:  func(c *Config) { c.IPv6 = true },
			ac:   func(a *acDouble) { a.ipv6 = true },
			want: with(func(s *upStatus) {
				s.LocalLinkLocal = netip.MustParseAddr("fe80::c1:1eff:fe47:1")
				s.PeerLinkLocal = netip.MustParseAddr("fe80::2ac:0:0:1")
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ac := newAC("isp", 1)
			if tt.ac != nil {
				tt.ac(ac)
			}
			s := newSim(t, cfg, ac)
			s.up()
			if diff := cmp.Diff(tt.want, summarize(s.e.status()), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if got := s.e.status().SessionID; got != ac.session || got == 0 {
				t.Errorf("session ID %#x, AC's %#x", got, ac.session)
			}
			if ac.authOKs > 1 || (ac.auth != 0 && ac.authOKs != 1) {
				t.Errorf("AC authenticated %d times", ac.authOKs)
			}
			if len(s.events) == 0 || !s.events[len(s.events)-1].Up {
				t.Errorf("events %+v: want an Up last", s.events)
			}
		})
	}
}

// TestPADR checks what a PADR carries: our Host-Uniq, the AC-Cookie and
// the Relay-Session-Id echoed, PPP-Max-Payload with an MRU above 1492.
func TestPADR(t *testing.T) {
	cfg := testConfig()
	cfg.MRU, cfg.Service, cfg.HostUniq = 1500, "internet", []byte("hu")
	ac := newAC("isp", 1)
	ac.services = []string{"voip", "internet"}
	ac.rfc4638 = true
	s := newSim(t, cfg, ac)
	s.up()
	d := ac.lastPADR
	got := map[string]string{
		"service": string(d.serviceName), "hostuniq": string(d.hostUniq),
		"cookie": string(d.cookie), "relay": string(d.relay),
	}
	want := map[string]string{"service": "internet", "hostuniq": "hu", "cookie": "cookie-isp", "relay": "\x01\x02\x03"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PADR tags (-want +got):\n%s", diff)
	}
	if d.maxPayload != 1500 {
		t.Errorf("PADR PPP-Max-Payload %d, want 1500", d.maxPayload)
	}
}

func TestSeveralACs(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		acs     func() []*acDouble
		wantAC  string
		wantErr bool
	}{
		{
			name:   "first acceptable wins",
			acs:    func() []*acDouble { return []*acDouble{newAC("first", 1), newAC("second", 2)} },
			wantAC: "first",
		},
		{
			name:   "AC-Name filter",
			cfg:    func(c *Config) { c.ACName = "second" },
			acs:    func() []*acDouble { return []*acDouble{newAC("first", 1), newAC("second", 2), newAC("third", 3)} },
			wantAC: "second",
		},
		{
			name: "Service-Name filter",
			cfg:  func(c *Config) { c.Service = "internet" },
			acs: func() []*acDouble {
				a, b := newAC("tv", 1), newAC("net", 2)
				a.services, b.services = []string{"iptv"}, []string{"iptv", "internet"}
				return []*acDouble{a, b}
			},
			wantAC: "net",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			acs := tt.acs()
			s := newSim(t, cfg, acs...)
			s.up()
			if got := s.e.status().ACName; got != tt.wantAC {
				t.Errorf("AC %q, want %q", got, tt.wantAC)
			}
			for _, a := range acs {
				if want := a.name == tt.wantAC; (a.padrs > 0) != want {
					t.Errorf("AC %q got %d PADRs", a.name, a.padrs)
				}
			}
		})
	}
}

// TestPADOFilter: PADOs without our Host-Uniq, from another AC name or
// broken are ignored; discovery keeps retrying with a doubling timeout.
func TestPADOFilter(t *testing.T) {
	cfg := testConfig()
	cfg.ACName = "mine"
	ac := newAC("other", 1)
	s := newSim(t, cfg, ac)
	// A PADO with a foreign Host-Uniq, from the right name.
	s.inject(newDiscovery([6]byte(clientMAC), [6]byte{2, 0, 0, 0, 0, 9}, codePADO, 0).tag(tagACName, []byte("mine")).tag(tagHostUniq, []byte("x")).frame())
	s.runFor(40*time.Second, nil)
	if s.phase() != PhaseDiscovery || ac.padrs != 0 {
		t.Fatalf("phase %v, PADRs %d: want still discovering", s.phase(), ac.padrs)
	}
	// PADIs at 0, 1, 3, 7, 15, 31 s: a doubling timeout.
	if ac.padis != 6 {
		t.Errorf("%d PADIs in 40 s, want 6", ac.padis)
	}
}

func TestPADSError(t *testing.T) {
	ac := newAC("isp", 1)
	ac.padsErr = tagServiceNameErr
	s := newSim(t, testConfig(), ac)
	s.runFor(100*time.Millisecond, func() bool { return s.e.st.LastDownReason != "" })
	if got, want := s.e.st.LastDownReason, "PADS: Service-Name-Error: no such service"; got != want {
		t.Errorf("down reason %q, want %q", got, want)
	}
	if s.phase() != PhaseDown {
		t.Errorf("phase %v, want down", s.phase())
	}
}

// TestReconnect: each way a session drops brings it down with the reason
// and back up by itself.
func TestReconnect(t *testing.T) {
	tests := []struct {
		name     string
		breakIt  func(*sim, *acDouble)
		repair   func(*acDouble)
		reason   string
		maxDelay time.Duration // down to up again
	}{
		{
			name:     "padt from the AC",
			breakIt:  func(s *sim, a *acDouble) { a.padt() },
			reason:   "PADT from the AC: Generic-Error: admin reset",
			maxDelay: 3 * time.Second,
		},
		{
			name:     "echo failure",
			breakIt:  func(s *sim, a *acDouble) { a.silent = true },
			repair:   func(a *acDouble) { a.silent, a.session = false, 0 },
			reason:   "lcp echo timeout",
			maxDelay: 3 * time.Second,
		},
		{
			name: "lcp terminate from the peer",
			breakIt: func(s *sim, a *acDouble) {
				a.sendPPP(protoLCP, termReq, 77, []byte("bye"))
			},
			reason:   "peer terminated LCP",
			maxDelay: 3 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ac := newAC("isp", 1)
			s := newSim(t, testConfig(), ac)
			s.up()
			first := ac.session
			tt.breakIt(s, ac)
			if !s.runFor(time.Minute, func() bool { return s.phase() == PhaseDown }) {
				t.Fatalf("not down: phase %v", s.phase())
			}
			downAt := s.now
			if got := s.e.st.LastDownReason; got != tt.reason {
				t.Errorf("down reason %q, want %q", got, tt.reason)
			}
			if ev := s.events[len(s.events)-1]; ev.Up || ev.Status.LastDownReason != tt.reason {
				t.Errorf("last event %+v, want a Down with the reason", ev)
			}
			if tt.repair != nil {
				tt.repair(ac)
			}
			s.up()
			if d := s.now.Sub(downAt); d > tt.maxDelay {
				t.Errorf("back up after %v, want within %v", d, tt.maxDelay)
			}
			st := s.e.status()
			if st.Reconnects != 1 || st.SessionID == first || st.LastDownReason != tt.reason {
				t.Errorf("after reconnect: reconnects %d, session %#x (first %#x), reason %q", st.Reconnects, st.SessionID, first, st.LastDownReason)
			}
		})
	}
}

// TestEchoTiming: echoes every interval measure the round trip; the link
// is declared dead after EchoFailures unanswered ones.
func TestEchoTiming(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	s.latency = 5 * time.Millisecond
	s.up()
	s.runFor(35*time.Second, nil)
	if ac.echoes != 3 {
		t.Errorf("%d echoes in 35 s, want 3", ac.echoes)
	}
	if got := s.e.st.EchoRTT; got != 10*time.Millisecond {
		t.Errorf("echo RTT %v, want 10ms", got)
	}
	ac.silent = true
	start := s.now
	s.runFor(time.Minute, func() bool { return s.phase() == PhaseDown })
	// The next echo goes out within 10 s; three more intervals without
	// answers make it dead.
	if d := s.now.Sub(start); d < 30*time.Second || d > 40*time.Second {
		t.Errorf("dead after %v, want 30..40 s", d)
	}
}

func TestAuthFailureBacksOff(t *testing.T) {
	for _, auth := range []uint16{protoPAP, protoCHAP} {
		t.Run(map[uint16]string{protoPAP: "pap", protoCHAP: "chap"}[auth], func(t *testing.T) {
			cfg := testConfig()
			cfg.Password = "wrong"
			ac := newAC("isp", 1)
			ac.auth = auth
			s := newSim(t, cfg, ac)
			var downs []time.Time
			for len(downs) < 3 {
				if !s.runFor(10*time.Minute, func() bool { return s.phase() == PhaseDown }) {
					t.Fatalf("no auth failure: phase %v", s.phase())
				}
				downs = append(downs, s.now)
				if r := s.e.st.LastDownReason; !strings.Contains(r, "authentication refused: bad login") {
					t.Fatalf("down reason %q", r)
				}
				s.runFor(10*time.Minute, func() bool { return s.phase() != PhaseDown })
			}
			// 30 s, then 60 s between the attempts (plus the attempt itself).
			for i, want := range []time.Duration{30 * time.Second, 60 * time.Second} {
				if d := downs[i+1].Sub(downs[i]); d < want || d > want+2*time.Second {
					t.Errorf("attempt %d after %v, want %v", i+2, d, want)
				}
			}
			if ac.padts < 3 {
				t.Errorf("%d PADTs, want one per failure", ac.padts)
			}
		})
	}
}

func TestCHAPRechallenge(t *testing.T) {
	ac := newAC("isp", 1)
	ac.auth = protoCHAP
	s := newSim(t, testConfig(), ac)
	s.up()
	ac.challenge()
	s.runFor(time.Second, nil)
	if ac.authOKs != 2 || s.phase() != PhaseUp {
		t.Fatalf("after re-challenge: %d successes, phase %v", ac.authOKs, s.phase())
	}
	ac.pass = "changed" // the next response fails
	ac.challenge()
	s.runFor(time.Second, func() bool { return s.phase() == PhaseDown })
	if r := s.e.st.LastDownReason; r != "chap: authentication refused: bad login" {
		t.Errorf("down reason %q", r)
	}
}

// TestShutdown: closing sends the AC an LCP Terminate-Request and a PADT.
func TestShutdown(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	s.up()
	s.e.shutdown(s.now, "closed")
	s.collect()
	s.deliver()
	if ac.padts != 1 || ac.terms != 1 || ac.session != 0 {
		t.Errorf("AC saw %d PADTs, %d Terminate-Requests; session %#x", ac.padts, ac.terms, ac.session)
	}
	if ev := s.events[len(s.events)-1]; ev.Up || ev.Status.LastDownReason != "closed" {
		t.Errorf("last event %+v", ev)
	}
	s.runFor(time.Hour, nil)
	if ac.padis != 1 {
		t.Errorf("%d PADIs after shutdown", ac.padis-1)
	}
}
