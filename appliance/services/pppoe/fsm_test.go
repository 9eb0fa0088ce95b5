package pppoe

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeLayer records the automaton's this-layer actions and judges every
// peer request with verdict.
type fakeLayer struct {
	verdict byte
	calls   []string
}

func (l *fakeLayer) addOptions(b []byte) []byte { return appendOption(b, 1, []byte{5, 220}) }
func (l *fakeLayer) checkRequest(opts, out []byte, nakOK bool) (byte, []byte) {
	if l.verdict == confNak && !nakOK {
		return confRej, append(out, opts...)
	}
	if l.verdict == confAck {
		return confAck, out
	}
	return l.verdict, append(out, opts...)
}
func (l *fakeLayer) gotAck([]byte)                 { l.calls = append(l.calls, "ack") }
func (l *fakeLayer) gotNak([]byte)                 { l.calls = append(l.calls, "nak") }
func (l *fakeLayer) gotRej([]byte)                 { l.calls = append(l.calls, "rej") }
func (l *fakeLayer) up()                           { l.calls = append(l.calls, "tlu") }
func (l *fakeLayer) down()                         { l.calls = append(l.calls, "tld") }
func (l *fakeLayer) started()                      { l.calls = append(l.calls, "tls") }
func (l *fakeLayer) finished()                     { l.calls = append(l.calls, "tlf") }
func (l *fakeLayer) extra(byte, byte, []byte) bool { return false }

var codeNames = map[byte]string{confReq: "CR", confAck: "CA", confNak: "CN", confRej: "CJ", termReq: "TR", termAck: "TA", codeRej: "CodeRej"}

type fsmRig struct {
	f    *fsm
	l    *fakeLayer
	sent []string
	now  time.Time
}

func newRig() *fsmRig {
	r := &fsmRig{l: &fakeLayer{verdict: confAck}, now: time.Unix(1000, 0)}
	r.f = newFSM(protoLCP, r.l, func(_ uint16, p []byte) { r.sent = append(r.sent, codeNames[p[0]]) }, defaultFSMParams())
	return r
}

// Peer events.
func (r *fsmRig) rcr()     { r.f.input(r.now, []byte{confReq, 50, 0, 8, 1, 4, 5, 220}) }
func (r *fsmRig) rca()     { r.f.input(r.now, append([]byte{confAck, r.f.reqID, 0, 8}, r.f.lastReq...)) }
func (r *fsmRig) rcn()     { r.f.input(r.now, []byte{confNak, r.f.reqID, 0, 8, 1, 4, 5, 0}) }
func (r *fsmRig) rtr()     { r.f.input(r.now, []byte{termReq, 60, 0, 4}) }
func (r *fsmRig) rta()     { r.f.input(r.now, []byte{termAck, r.f.reqID, 0, 4}) }
func (r *fsmRig) timeout() { r.now = r.f.deadline(); r.f.tick(r.now) }
func (r *fsmRig) opened()  { r.f.open(r.now); r.f.up(r.now); r.rcr(); r.rca() }
func (r *fsmRig) reset()   { r.sent, r.l.calls = nil, nil }
func (r *fsmRig) staleAck() {
	r.f.input(r.now, append([]byte{confAck, r.f.reqID - 1, 0, 8}, r.f.lastReq...))
}
func (r *fsmRig) badCodeRej() { r.f.input(r.now, []byte{codeRej, 1, 0, 8, confReq, 1, 0, 4}) }

func TestFSM(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(r *fsmRig) // before the recording starts
		steps     func(r *fsmRig)
		want      fsmState
		wantSent  []string
		wantCalls []string
	}{
		{name: "open then up sends a request", steps: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) }, want: stReqSent, wantSent: []string{"CR"}, wantCalls: []string{"tls"}},
		{name: "up then open", steps: func(r *fsmRig) { r.f.up(r.now); r.f.open(r.now) }, want: stReqSent, wantSent: []string{"CR"}},
		{name: "req-sent RCR+ then RCA", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) }, steps: func(r *fsmRig) { r.rcr(); r.rca() }, want: stOpened, wantSent: []string{"CA"}, wantCalls: []string{"ack", "tlu"}},
		{name: "req-sent RCA then RCR+", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) }, steps: func(r *fsmRig) { r.rca(); r.rcr() }, want: stOpened, wantSent: []string{"CA"}, wantCalls: []string{"ack", "tlu"}},
		{name: "req-sent RCR- naks", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now); r.l.verdict = confNak }, steps: func(r *fsmRig) { r.rcr() }, want: stReqSent, wantSent: []string{"CN"}},
		{name: "ack-rcvd RCR- stays", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now); r.rca(); r.l.verdict = confRej }, steps: func(r *fsmRig) { r.rcr() }, want: stAckRcvd, wantSent: []string{"CJ"}},
		{name: "stale ack ignored", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now); r.timeout() }, steps: func(r *fsmRig) { r.staleAck() }, want: stReqSent},
		{name: "ack-rcvd timeout resends", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now); r.rca() }, steps: func(r *fsmRig) { r.timeout() }, want: stReqSent, wantSent: []string{"CR"}},
		{name: "RCN resends", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) }, steps: func(r *fsmRig) { r.rcn() }, want: stReqSent, wantSent: []string{"CR"}, wantCalls: []string{"nak"}},
		{
			name:  "max-configure exhausted",
			setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) },
			steps: func(r *fsmRig) {
				for range 10 {
					r.timeout()
				}
			},
			want: stStopped, wantSent: []string{"CR", "CR", "CR", "CR", "CR", "CR", "CR", "CR", "CR"}, wantCalls: []string{"tlf"},
		},
		{
			name:  "max-failure turns naks into rejects",
			setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now); r.l.verdict = confNak },
			steps: func(r *fsmRig) {
				for range 6 {
					r.rcr()
				}
			},
			want: stReqSent, wantSent: []string{"CN", "CN", "CN", "CN", "CN", "CJ"},
		},
		{name: "opened RCR renegotiates", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.rcr() }, want: stAckSent, wantSent: []string{"CR", "CA"}, wantCalls: []string{"tld"}},
		{name: "opened RCA renegotiates", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.rca() }, want: stReqSent, wantSent: []string{"CR"}, wantCalls: []string{"ack", "tld"}},
		{name: "opened RTR", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.rtr() }, want: stStopping, wantSent: []string{"TA"}, wantCalls: []string{"tld"}},
		{name: "opened RTR then timeout", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.rtr(); r.timeout() }, want: stStopped, wantSent: []string{"TA"}, wantCalls: []string{"tld", "tlf"}},
		{name: "opened close then RTA", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.f.close(r.now); r.rta() }, want: stClosed, wantSent: []string{"TR"}, wantCalls: []string{"tld", "tlf"}},
		{
			name: "closing retransmits terminate then gives up", setup: (*fsmRig).opened,
			steps: func(r *fsmRig) { r.f.close(r.now); r.timeout(); r.timeout() },
			want:  stClosed, wantSent: []string{"TR", "TR"}, wantCalls: []string{"tld", "tlf"},
		},
		{name: "opened down", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.f.down(r.now) }, want: stStarting, wantCalls: []string{"tld"}},
		{name: "opened catastrophic code-reject", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.badCodeRej() }, want: stStopping, wantSent: []string{"TR"}, wantCalls: []string{"tld"}},
		{name: "req-sent catastrophic code-reject", setup: func(r *fsmRig) { r.f.open(r.now); r.f.up(r.now) }, steps: func(r *fsmRig) { r.badCodeRej() }, want: stStopped, wantCalls: []string{"tlf"}},
		{name: "closed answers requests with terminate-ack", setup: func(r *fsmRig) { r.f.up(r.now) }, steps: func(r *fsmRig) { r.rcr() }, want: stClosed, wantSent: []string{"TA"}},
		{name: "stopped RCR+ restarts", setup: func(r *fsmRig) { r.opened(); r.rtr(); r.timeout() }, steps: func(r *fsmRig) { r.rcr() }, want: stAckSent, wantSent: []string{"CR", "CA"}},
		{name: "initial discards", steps: func(r *fsmRig) { r.rcr() }, want: stInitial},
		{name: "unknown code rejected", setup: (*fsmRig).opened, steps: func(r *fsmRig) { r.f.input(r.now, []byte{42, 1, 0, 4}) }, want: stOpened, wantSent: []string{"CodeRej"}},
		{name: "starting close", setup: func(r *fsmRig) { r.f.open(r.now) }, steps: func(r *fsmRig) { r.f.close(r.now) }, want: stInitial, wantCalls: []string{"tlf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig()
			if tt.setup != nil {
				tt.setup(r)
			}
			r.reset()
			tt.steps(r)
			got := struct {
				State       string
				Sent, Calls []string
			}{r.f.state.String(), r.sent, r.l.calls}
			want := struct {
				State       string
				Sent, Calls []string
			}{tt.want.String(), tt.wantSent, tt.wantCalls}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFSMTimerOnlyInWaitingStates(t *testing.T) {
	r := newRig()
	r.opened()
	if !r.f.deadline().IsZero() {
		t.Errorf("timer running in Opened: %v", r.f.deadline())
	}
	if got := fmt.Sprint(fsmState(42)); got != "state(42)" {
		t.Errorf("String of a bad state: %q", got)
	}
}
