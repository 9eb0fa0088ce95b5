package pppoe

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestStormAndGarbage: PADTs for other sessions or from other hosts,
// garbage, foreign PADOs and PADSs during a session neither bring it
// down nor wedge it; the AC's own PADT still does.
func TestStormAndGarbage(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	s.up()
	r := rand.New(rand.NewPCG(1, 2))
	me, other := [6]byte(clientMAC), [6]byte{0x02, 0, 0, 0, 0xbb, 1}
	frames := 0
	for i := range 3000 {
		var f []byte
		switch i % 6 {
		case 0: // PADT for another session from the AC
			f = newDiscovery(me, ac.mac, codePADT, ac.session+1+uint16(r.IntN(100))).frame()
		case 1: // PADT for our session from another host
			f = newDiscovery(me, other, codePADT, ac.session).frame()
		case 2: // PADO and PADS nobody asked for
			f = newDiscovery(me, other, codePADO, 0).tag(tagACName, []byte("x")).frame()
		case 3:
			f = newDiscovery(me, ac.mac, codePADS, 9).tag(tagHostUniq, []byte("?")).frame()
		case 4: // random bytes after a discovery or session header
			f = make([]byte, ethHeaderLen+r.IntN(100))
			putEth(f, me, ac.mac, uint16(EtherTypeDiscovery+r.IntN(2)))
			for j := ethHeaderLen; j < len(f); j++ {
				f[j] = byte(r.Uint32())
			}
		case 5: // an LCP packet in another session
			f = sessionFrame(me, ac.mac, ac.session^0x40, protoLCP, []byte{termReq, 1, 0, 4})
		}
		s.inject(f)
		frames++
		if i%100 == 0 {
			s.runFor(time.Second, nil)
		}
	}
	s.runFor(time.Minute, nil)
	st := s.e.status()
	if st.Phase != PhaseUp || st.Reconnects != 0 {
		t.Fatalf("after %d junk frames: phase %v, reconnects %d, reason %q", frames, st.Phase, st.Reconnects, st.LastDownReason)
	}
	if st.Ignored < uint64(frames)*4/6 {
		t.Errorf("ignored %d of %d junk frames", st.Ignored, frames)
	}
	ac.padt()
	s.runFor(time.Second, func() bool { return s.phase() == PhaseDown })
	if s.phase() != PhaseDown {
		t.Fatalf("the AC's PADT did not end the session")
	}
	s.up()
}

// TestPADTStormDuringDiscovery: PADTs while discovering do not stop
// discovery from reaching a session.
func TestPADTStormDuringDiscovery(t *testing.T) {
	ac := newAC("isp", 1)
	s := newSim(t, testConfig(), ac)
	for i := range 1000 {
		s.inject(newDiscovery([6]byte(clientMAC), ac.mac, codePADT, uint16(i)).frame())
	}
	s.up()
}
