package pppoe

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"time"
)

// engine is the client's protocol state: discovery, the PPP phases and the
// reconnect schedule. It is synchronous: every entry point takes the time,
// and it sends through out. One goroutine owns it.
type engine struct {
	cfg Config
	log *slog.Logger
	out func([]byte)
	rnd io.Reader
	mac [6]byte
	now time.Time

	phase  Phase
	st     Status
	events []Event

	// Discovery (RFC 2516 section 5).
	hostUniq []byte
	padrSent bool // waiting for PADS, not PADO
	discNext time.Time
	discWait time.Duration
	padrN    int
	ac       acOffer
	skipped  skippedACs // ACs whose offers led nowhere (skipac.go)
	session  uint16
	linkMax  uint16 // the largest PPP payload the session carries

	lcp, ipcp, ipv6cp *fsm
	lcpL              *lcpLayer
	ipcpL             *ipcpLayer
	ipv6L             *ipv6cpLayer
	auth              authState
	termReason        string

	started              bool
	stopped              bool
	announced            bool      // an event went out since the session began
	negDeadline          time.Time // the session must be up by then (negotiateTimeout)
	reconnectAt          time.Time
	backoff, authBackoff time.Duration
}

// acOffer is the access concentrator we chose from its PADO.
type acOffer struct {
	mac               [6]byte
	name              string
	cookie, relay     []byte
	hasCookie, hasRel bool
}

func newEngine(cfg Config, out func([]byte)) *engine {
	e := &engine{cfg: cfg, log: cfg.Log, out: out, rnd: cfg.Rand}
	if e.rnd == nil {
		e.rnd = rand.Reader
	}
	copy(e.mac[:], cfg.MAC)
	e.backoff, e.authBackoff = cfg.Backoff, cfg.AuthBackoff
	return e
}

func (e *engine) random(b []byte) {
	if _, err := io.ReadFull(e.rnd, b); err != nil {
		panic("pppoe: random source failed: " + err.Error())
	}
}

func (e *engine) random32() uint32 {
	var b [4]byte
	for b == [4]byte{} {
		e.random(b[:])
	}
	return binary.BigEndian.Uint32(b[:])
}

// randomIID is a random non-zero interface identifier other than avoid.
func (e *engine) randomIID(avoid [8]byte) []byte {
	var b [8]byte
	for b == [8]byte{} || b == avoid {
		e.random(b[:])
	}
	return b[:]
}

func (e *engine) emit() {
	e.announced = true
	e.events = append(e.events, Event{Up: e.phase == PhaseUp, Status: e.status()})
}

// status is a copy of the published status.
func (e *engine) status() Status {
	s := e.st
	s.Phase = e.phase
	s.ACMAC = append(net.HardwareAddr(nil), s.ACMAC...)
	return s
}

// start begins the first discovery.
func (e *engine) start(now time.Time) {
	e.now = now
	e.started = true
	e.startDiscovery()
}

// wake is the next deadline, zero for none.
func (e *engine) wake() time.Time {
	var w time.Time
	min := func(t time.Time) {
		if !t.IsZero() && (w.IsZero() || t.Before(w)) {
			w = t
		}
	}
	if e.stopped || !e.started {
		return w
	}
	switch e.phase {
	case PhaseDown:
		min(e.reconnectAt)
	case PhaseDiscovery:
		min(e.discNext)
	default:
		for _, f := range []*fsm{e.lcp, e.ipcp, e.ipv6cp} {
			if f != nil {
				min(f.deadline())
			}
		}
		min(e.authWake())
		min(e.negDeadline)
		if e.lcpOpened() {
			min(e.lcpL.nextEcho)
		}
	}
	return w
}

// tick acts on the deadlines that have passed.
func (e *engine) tick(now time.Time) {
	e.now = now
	defer e.watchNegotiation()
	if e.stopped || !e.started {
		return
	}
	switch e.phase {
	case PhaseDown:
		if !e.reconnectAt.IsZero() && !now.Before(e.reconnectAt) {
			e.st.Reconnects++
			e.startDiscovery()
		}
	case PhaseDiscovery:
		e.discTick()
	default:
		sess := e.session
		for _, f := range []*fsm{e.lcp, e.ipcp, e.ipv6cp} {
			if f != nil && e.session == sess {
				f.tick(now)
			}
		}
		if e.session == sess {
			e.authTick()
		}
		if e.session == sess && e.lcpOpened() && !e.lcpL.echoTick(now) {
			e.drop("lcp echo timeout", true, false)
		}
		if e.session == sess && !e.negDeadline.IsZero() && !now.Before(e.negDeadline) {
			e.drop("negotiation timed out in phase "+e.phase.String(), true, false)
		}
	}
}

// input takes a received Ethernet frame (untagged).
func (e *engine) input(now time.Time, frame []byte) {
	e.now = now
	defer e.watchNegotiation()
	if e.stopped || !e.started || len(frame) < ethHeaderLen || [6]byte(frame[0:6]) != e.mac {
		e.st.Ignored++
		return
	}
	switch binary.BigEndian.Uint16(frame[12:]) {
	case EtherTypeDiscovery:
		e.discoveryInput(frame)
	case EtherTypeSession:
		e.sessionInput(frame)
	default:
		e.st.Ignored++
	}
}

// sessionInput dispatches a session frame by PPP protocol (RFC 1661
// section 3.2 for what each phase accepts).
func (e *engine) sessionInput(frame []byte) {
	id, proto, p, ok := ParseSessionHeader(frame[ethHeaderLen:])
	if !ok || e.session == 0 || id != e.session || [6]byte(frame[6:12]) != e.ac.mac {
		e.st.Ignored++
		return
	}
	switch proto {
	case protoLCP:
		if len(p) >= 1 && p[0] == termReq {
			e.termReason = "peer terminated LCP"
		}
		if err := e.lcp.input(e.now, p); err != nil {
			e.st.Ignored++
		}
		if e.lcpL != nil && e.lcpL.loops > maxLoops { // nil: the packet ended the session
			e.looped()
		}
	case protoPAP:
		e.papInput(p)
	case protoCHAP:
		e.chapInput(p)
	case protoIPCP:
		e.ncpInput(e.ipcp, p)
	case protoIPv6CP:
		if e.ipv6cp == nil {
			e.protocolReject(proto, p)
			return
		}
		e.ncpInput(e.ipv6cp, p)
	case ProtoIPv4, ProtoIPv6:
		// The dataplane's; not for us.
		e.st.Ignored++
	default:
		e.protocolReject(proto, p)
	}
}

// ncpInput hands an NCP packet on in the network phase; earlier it is
// silently discarded (RFC 1661 section 3.5).
func (e *engine) ncpInput(f *fsm, p []byte) {
	if e.phase < PhaseNetwork {
		e.st.Ignored++
		return
	}
	if err := f.input(e.now, p); err != nil {
		e.st.Ignored++
	}
}

// protocolReject answers an unknown protocol with LCP's Protocol-Reject
// (RFC 1661 section 5.7), only while LCP is open.
func (e *engine) protocolReject(proto uint16, p []byte) {
	if !e.lcpOpened() {
		e.st.Ignored++
		return
	}
	data := binary.BigEndian.AppendUint16(nil, proto)
	data = append(data, truncate(p, int(e.linkMax)-10)...)
	e.sendPPP(protoLCP, e.lcp.packet(protoRej, e.lcp.nextID, data))
	e.lcp.nextID++
}

// protocolRejected is the peer refusing one of our protocols.
func (e *engine) protocolRejected(proto uint16) {
	switch proto {
	case protoLCP:
		e.lcp.rxjBad(e.now)
	case protoIPCP:
		if e.ipcp != nil {
			e.ipcp.rxjBad(e.now)
		}
	case protoIPv6CP:
		if e.ipv6cp != nil {
			e.ipv6cp.rxjBad(e.now)
		}
	}
}

func (e *engine) lcpOpened() bool { return e.lcp != nil && e.lcp.state == stOpened }

// sendPPP sends a PPP packet in the session.
func (e *engine) sendPPP(proto uint16, pkt []byte) {
	if e.session == 0 {
		return
	}
	e.out(sessionFrame(e.ac.mac, e.mac, e.session, proto, pkt))
}

// startSession runs LCP on the session a PADS gave.
func (e *engine) startSession(id uint16, maxPayload uint16) {
	e.session = id
	e.linkMax = defaultMRU
	e.st.RFC4638 = false
	if e.cfg.MRU > defaultMRU && maxPayload > defaultMRU {
		e.linkMax = min(uint16(e.cfg.MRU), maxPayload)
		e.st.RFC4638 = true
	}
	e.lcpL = &lcpLayer{e: e, maxMRU: e.linkMax, wantMRU: e.linkMax, sendMRU: true, sendMag: true, peerMRU: 1500}
	e.lcpL.magic = e.random32()
	e.ipcpL = newIPCP(e)
	p := defaultFSMParams()
	e.lcp = newFSM(protoLCP, e.lcpL, e.sendPPP, p)
	e.ipcp = newFSM(protoIPCP, e.ipcpL, e.sendPPP, p)
	e.ipv6cp, e.ipv6L = nil, nil
	if e.cfg.IPv6 {
		iid := e.cfg.InterfaceID
		if iid == [8]byte{} {
			iid = eui64(e.mac)
		}
		e.ipv6L = &ipv6cpLayer{e: e, local: iid, sendIID: true}
		e.ipv6cp = newFSM(protoIPv6CP, e.ipv6L, e.sendPPP, p)
	}
	e.termReason = ""
	e.announced = false
	e.st.ACName, e.st.ACMAC, e.st.SessionID = e.ac.name, net.HardwareAddr(e.ac.mac[:]), id
	e.phase = PhaseLCP
	e.log.Info("pppoe: session", "ac", e.ac.name, "acmac", e.st.ACMAC.String(), "id", id, "rfc4638", e.st.RFC4638)
	e.lcp.open(e.now)
	e.lcp.up(e.now)
}

// lcpUp enters authentication (or the network phase when the peer asked
// for none) and starts the echo keepalive.
func (e *engine) lcpUp() {
	l := e.lcpL
	e.st.MRU = int(min(max(l.ackedMRU, minMRU), e.linkMax))
	e.st.MTU = int(min(l.peerMRU, e.linkMax))
	if e.cfg.EchoInterval > 0 {
		l.nextEcho = e.now.Add(e.cfg.EchoInterval)
	}
	l.echoPending, l.echoFails = false, 0
	if l.auth != 0 {
		e.phase = PhaseAuth
		e.startAuth()
		return
	}
	e.startNetwork()
}

// lcpDown takes the network protocols down with LCP (RFC 1661 section
// 3.7's "tld"), back to the LCP phase.
func (e *engine) lcpDown() {
	e.lcpL.nextEcho = time.Time{}
	e.auth = authState{}
	wasUp := e.phase == PhaseUp
	e.phase = PhaseLCP
	e.ipcp.down(e.now)
	if e.ipv6cp != nil {
		e.ipv6cp.down(e.now)
	}
	if wasUp && e.phase != PhaseUp {
		e.st.UpSince = time.Time{}
		e.emit()
	}
}

func (e *engine) lcpFinished() {
	r := e.termReason
	if r == "" {
		r = "lcp negotiation failed"
	}
	e.drop(r, true, false)
}

// startNetwork opens IPCP (and IPv6CP).
func (e *engine) startNetwork() {
	e.phase = PhaseNetwork
	for _, f := range []*fsm{e.ipcp, e.ipv6cp} {
		if f != nil {
			f.open(e.now)
			f.up(e.now)
		}
	}
}

// ncpChanged follows an NCP opening or closing: the session is up while
// one is open.
func (e *engine) ncpChanged() {
	open := e.ipcp.state == stOpened || (e.ipv6cp != nil && e.ipv6cp.state == stOpened)
	switch {
	case open:
		if e.phase != PhaseUp {
			e.phase = PhaseUp
			e.st.UpSince = e.now
			e.backoff, e.authBackoff = e.cfg.Backoff, e.cfg.AuthBackoff
			e.log.Info("pppoe: up", "ipv4", e.st.LocalIPv4, "peer", e.st.PeerIPv4, "mtu", e.st.MTU)
		}
		e.emit()
	case e.phase == PhaseUp:
		e.phase = PhaseNetwork
		e.st.UpSince = time.Time{}
		e.emit()
	}
}

// ncpFinished ends the session when no network protocol is left.
func (e *engine) ncpFinished() {
	done := func(f *fsm) bool { return f == nil || f.state == stStopped || f.state == stClosed }
	if done(e.ipcp) && done(e.ipv6cp) {
		e.drop("no network protocol came up", true, false)
	}
}

func (e *engine) looped() { e.drop("looped-back link (own magic number seen)", true, false) }

// drop ends the session or attempt and schedules the reconnect: with a
// PADT (and an LCP Terminate-Request) when sendPADT, with the longer
// backoff after an authentication failure.
func (e *engine) drop(reason string, sendPADT, authFail bool) {
	if e.phase == PhaseDown {
		return
	}
	wasUp := e.phase == PhaseUp || e.announced
	e.endSession(sendPADT)
	d := e.backoff
	e.backoff = min(2*e.backoff, e.cfg.MaxBackoff)
	if authFail {
		d = max(d, e.authBackoff)
		e.authBackoff = min(2*e.authBackoff, maxAuthWait)
	}
	e.reconnectAt = e.now.Add(d)
	e.st.LastDownReason = reason
	e.log.Warn("pppoe: down", "reason", reason, "reconnect_in", d)
	if wasUp {
		e.emit()
	}
}

// endSession leaves the session for PhaseDown.
func (e *engine) endSession(sendPADT bool) {
	if e.session != 0 && sendPADT {
		if e.lcpOpened() {
			e.sendPPP(protoLCP, e.lcp.packet(termReq, e.lcp.nextID, nil))
		}
		e.out(newDiscovery(e.ac.mac, e.mac, codePADT, e.session).frame())
	}
	e.session = 0
	e.lcp, e.ipcp, e.ipv6cp, e.lcpL, e.ipcpL, e.ipv6L = nil, nil, nil, nil, nil, nil
	e.auth = authState{}
	e.phase = PhaseDown
	e.announced = false
	reasons, n := e.st.LastDownReason, e.st.Reconnects
	e.st = Status{LastDownReason: reasons, Reconnects: n, Ignored: e.st.Ignored}
}

// shutdown ends the session for good (Close, or before a new config):
// Terminate-Request and PADT to the AC, no reconnect.
func (e *engine) shutdown(now time.Time, reason string) {
	e.now = now
	wasUp := e.phase == PhaseUp || e.announced
	e.endSession(true)
	e.stopped = true
	e.st.LastDownReason = reason
	if wasUp {
		e.emit()
	}
}

// negotiateTimeout bounds the time from a session (or its fall from up)
// to up: whatever a peer fails to answer, the client starts over.
const negotiateTimeout = time.Minute

// watchNegotiation runs the negotiation deadline while the session is not
// up. It runs after every event.
func (e *engine) watchNegotiation() {
	switch {
	case e.phase == PhaseUp || e.phase == PhaseDown || e.phase == PhaseDiscovery:
		e.negDeadline = time.Time{}
	case e.negDeadline.IsZero():
		e.negDeadline = e.now.Add(negotiateTimeout)
	}
}

// takeEvents returns the events since the last call.
func (e *engine) takeEvents() []Event {
	ev := e.events
	e.events = nil
	return ev
}
