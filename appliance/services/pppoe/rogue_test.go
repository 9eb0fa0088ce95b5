package pppoe

import (
	"encoding/binary"
	"testing"
	"time"
)

// TestRogueACs: ACs that answer every PADI first but never complete a
// session (no PADS to our PADR, or a PADS with an error tag) do not keep
// the client from the AC that does: after a failed PADR it passes them
// over for the next discoveries.
func TestRogueACs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rogue func(a *acDouble, drop map[[6]byte]bool)
	}{
		{"no PADS", func(a *acDouble, drop map[[6]byte]bool) { drop[a.mac] = true }},
		{"PADS error", func(a *acDouble, _ map[[6]byte]bool) { a.padsErr = tagACSystemErr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r1, r2, real := newAC("rogue1", 1), newAC("rogue2", 2), newAC("isp", 3)
			noPADS := map[[6]byte]bool{}
			tc.rogue(r1, noPADS)
			tc.rogue(r2, noPADS)
			s := newSim(t, testConfig(), r1, r2, real) // the rogues answer first
			s.drop = func(f []byte, toClient bool) bool {
				if !toClient || len(f) < ethHeaderLen+2 || binary.BigEndian.Uint16(f[12:]) != EtherTypeDiscovery {
					return false
				}
				return f[ethHeaderLen+1] == codePADS && noPADS[[6]byte(f[6:12])]
			}
			if !s.runFor(2*time.Minute, func() bool { return s.e.phase == PhaseUp }) {
				t.Fatalf("no session in 2 minutes: phase %v, last down %q; PADRs: rogue1 %d, rogue2 %d, isp %d",
					s.e.phase, s.e.st.LastDownReason, r1.padrs, r2.padrs, real.padrs)
			}
			if got := s.e.status().ACName; got != "isp" {
				t.Errorf("AC %q, want isp", got)
			}
			t.Logf("up at %v; PADRs: rogue1 %d, rogue2 %d, isp %d", s.now.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), r1.padrs, r2.padrs, real.padrs)
		})
	}
}

// TestLoneACRetried: the only AC, passed over once its PADSs were lost,
// is tried again after a PADI that nothing else answered.
func TestLoneACRetried(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	lost := 0
	s.drop = func(f []byte, toClient bool) bool {
		if toClient && len(f) > ethHeaderLen+1 && binary.BigEndian.Uint16(f[12:]) == EtherTypeDiscovery && f[ethHeaderLen+1] == codePADS && lost < padrTries {
			lost++
			return true
		}
		return false
	}
	if !s.runFor(time.Minute, func() bool { return s.e.phase == PhaseUp }) {
		t.Fatalf("no session in a minute after %d lost PADSs: phase %v; %d PADIs, %d PADRs", lost, s.e.phase, ac.padis, ac.padrs)
	}
	if lost != padrTries || ac.padrs != padrTries+1 {
		t.Errorf("%d PADSs lost, %d PADRs; want %d, %d", lost, ac.padrs, padrTries, padrTries+1)
	}
}
