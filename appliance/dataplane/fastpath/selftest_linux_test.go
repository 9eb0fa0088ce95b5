package fastpath

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/internal/testenv"
)

// TestSampleFrames: the self-test's frames parse, carry correct checksums
// and are the flows the sample installs.
func TestSampleFrames(t *testing.T) {
	s := SampleTraffic()
	for _, tc := range []struct {
		name     string
		b        []byte
		dst, src [6]byte
		sport    uint16
	}{
		{"nat", s.NATFrame(), s.RouterLAN, s.Host, s.SrcPort},
		{"pair", s.PairFrame(), s.Peer, s.Host, s.SrcPort},
		{"miss", s.MissFrame(), s.RouterLAN, s.Host, s.SrcPort + 1},
		{"reply", s.ReplyFrame(1234), s.RouterWAN, s.Gateway, s.DstPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f frame.Frame
			if err := frame.Parse(tc.b, &f); err != nil {
				t.Fatal(err)
			}
			if err := frame.VerifyChecksums(tc.b, &f); err != nil {
				t.Error(err)
			}
			if len(tc.b) != frame.MinFrameLen || f.Proto != frame.ProtoUDP || f.Dst != tc.dst || f.Src != tc.src || f.UDP.SrcPort != tc.sport {
				t.Errorf("frame of %d bytes, proto %d, %x from %x, source port %d; want %d bytes of UDP, %x from %x, port %d",
					len(tc.b), f.Proto, f.Dst, f.Src, f.UDP.SrcPort, frame.MinFrameLen, tc.dst, tc.src, tc.sport)
			}
		})
	}
}

// TestMeasureSelf measures this kernel's programs in both modes: every
// path has a number above zero and the verdict of its path.
func TestMeasureSelf(t *testing.T) {
	testenv.Require(t, "root")
	for _, tc := range []struct {
		mode Mode
		want map[string][]string // path → program:verdict
	}{
		{ModeTCX, map[string][]string{
			PathBridge: {"filter:kept out", "tcx:redirect"},
			PathNAT:    {"filter:kept out", "tcx:redirect"},
			PathMiss:   {"filter:to the ring", "tcx:next"},
		}},
		{ModeXDP, map[string][]string{
			PathBridge: {"xdp:redirect"},
			PathNAT:    {"xdp:redirect"},
			PathMiss:   {"xdp:pass"},
		}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			st, err := MeasureSelf(tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode != tc.mode || st.Frames != SelfTestFrames || st.Rounds != SelfTestRounds {
				t.Errorf("measured %s, %d×%d frames; want %s, %d×%d", st.Mode, st.Rounds, st.Frames, tc.mode, SelfTestRounds, SelfTestFrames)
			}
			// This machine's kernel has its JIT always on (docs/design: the
			// kernel table).
			if !st.JITed {
				t.Error("the programs were not JIT-compiled")
			}
			got := map[string][]string{}
			for _, p := range st.Paths {
				if p.Error != "" {
					t.Errorf("%s: %s", p.Path, p.Error)
				}
				sum := 0.0
				for _, pr := range p.Programs {
					got[p.Path] = append(got[p.Path], pr.Program+":"+pr.Verdict)
					if pr.NsPerFrame <= 0 {
						t.Errorf("%s/%s: %v ns per frame", p.Path, pr.Program, pr.NsPerFrame)
					}
					sum += pr.NsPerFrame
				}
				if ns, ok := st.Cost(p.Path); !ok || math.Abs(ns-sum) > 0.05 || ns <= 0 {
					t.Errorf("%s: Cost = %v, %v; the programs sum to %v", p.Path, ns, ok, sum)
				}
				t.Logf("%s %s: %.1f ns/frame %v", tc.mode, p.Path, p.NsPerFrame, p.Programs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMeasureWrongPath: a frame that takes another path than the one
// measured gives an error and no number.
func TestMeasureWrongPath(t *testing.T) {
	p := load(t, ModeTCX)
	s := SampleTraffic()
	if err := s.putNAT(p, 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		slot  int
		want  string
	}{
		{"a miss measured as a hit", s.MissFrame(), 0, `the filter program returned "to the ring", want "kept out"`},
		{"a hit measured as a miss", s.NATFrame(), -1, `the filter program returned "kept out", want "to the ring"`},
		{"a hit of another slot", s.NATFrame(), 1, "want each counted in flow slot 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := p.measurePath(p.chain(), PathNAT, tc.frame, tc.slot)
			if !strings.Contains(pc.Error, tc.want) || pc.NsPerFrame != 0 || pc.Programs != nil {
				t.Errorf("got %+v, want an error containing %q and no number", pc, tc.want)
			}
			if _, ok := (&SelfTest{Paths: []PathCost{pc}}).Cost(PathNAT); ok {
				t.Errorf("Cost of a failed measurement: ok")
			}
		})
	}
}
