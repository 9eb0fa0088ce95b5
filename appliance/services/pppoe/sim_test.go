package pppoe

import (
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// sim runs an engine and access concentrator doubles on a virtual clock:
// frames are delivered in rounds (latency apart) and, when none are in
// flight, time jumps to the next deadline.
type sim struct {
	t       *testing.T
	now     time.Time
	latency time.Duration
	e       *engine
	acs     []*acDouble
	toAC    [][]byte
	toCli   [][]byte
	sent    [][]byte // every frame the client sent
	events  []Event
	drop    func(frame []byte, toClient bool) bool
}

var clientMAC = net.HardwareAddr{0x02, 0xc1, 0x1e, 0x47, 0, 1}

// testConfig is a config with a deterministic random source.
func testConfig() Config {
	return Config{User: "user", Password: "secret", MAC: clientMAC, Rand: rand.NewChaCha8([32]byte{1})}
}

func newSim(t *testing.T, cfg Config, acs ...*acDouble) *sim {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), latency: time.Millisecond, acs: acs}
	s.e = newEngine(cfg, func(f []byte) {
		s.sent = append(s.sent, f)
		s.toAC = append(s.toAC, f)
	})
	for _, a := range acs {
		a.send = func(f []byte) { s.toCli = append(s.toCli, f) }
		a.now = s.now
	}
	s.e.start(s.now)
	s.collect()
	return s
}

func (s *sim) collect() { s.events = append(s.events, s.e.takeEvents()...) }

// inject delivers a frame to the client now.
func (s *sim) inject(f []byte) {
	s.e.input(s.now, f)
	s.collect()
}

func (s *sim) deliver() {
	toAC, toCli := s.toAC, s.toCli
	s.toAC, s.toCli = nil, nil
	for _, f := range toAC {
		if s.drop != nil && s.drop(f, false) {
			continue
		}
		for _, a := range s.acs {
			a.input(s.now, f)
		}
	}
	for _, f := range toCli {
		if s.drop != nil && s.drop(f, true) {
			continue
		}
		s.e.input(s.now, f)
		s.collect()
	}
}

func (s *sim) nextWake() time.Time {
	w := s.e.wake()
	for _, a := range s.acs {
		if aw := a.wake(); !aw.IsZero() && (w.IsZero() || aw.Before(w)) {
			w = aw
		}
	}
	return w
}

// runFor advances the virtual clock by d, or until cond holds (checked
// between steps); it reports whether cond held (always true without one).
func (s *sim) runFor(d time.Duration, cond func() bool) bool {
	s.t.Helper()
	end := s.now.Add(d)
	for range 1_000_000 {
		if cond != nil && cond() {
			return true
		}
		if len(s.toAC)+len(s.toCli) > 0 {
			s.now = s.now.Add(s.latency)
			s.deliver()
			continue
		}
		w := s.nextWake()
		if w.IsZero() || w.After(end) {
			s.now = end
			return cond == nil || cond()
		}
		if w.After(s.now) {
			s.now = w
		}
		s.e.tick(s.now)
		s.collect()
		for _, a := range s.acs {
			a.tick(s.now)
		}
	}
	s.t.Fatal("simulation does not settle")
	return false
}

func (s *sim) phase() Phase { return s.e.phase }

// up runs until the session is up, failing the test after a minute.
func (s *sim) up() {
	s.t.Helper()
	if !s.runFor(time.Minute, func() bool { return s.e.phase == PhaseUp }) {
		st := s.e.status()
		s.t.Fatalf("session not up after a minute: phase %v, last down %q", st.Phase, st.LastDownReason)
	}
	// Let the other NCP settle too.
	s.runFor(100*time.Millisecond, nil)
}
