package pppoe

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// startDiscovery begins a discovery attempt with a fresh Host-Uniq: PADI
// broadcast, repeated with a doubling timeout up to padiCap (RFC 2516
// section 5.1 and 7).
func (e *engine) startDiscovery() {
	e.phase = PhaseDiscovery
	e.announced = false
	if e.cfg.HostUniq != nil {
		e.hostUniq = append([]byte(nil), e.cfg.HostUniq...)
	} else {
		e.hostUniq = make([]byte, 8)
		e.random(e.hostUniq)
	}
	e.padrSent = false
	e.discWait = padiFirst
	e.sendPADI()
}

// maxPayloadTag is RFC 4638's PPP-Max-Payload, offered when the configured
// MRU is above 1492.
func (e *engine) maxPayloadTag(d *discoveryBuilder) {
	if e.cfg.MRU > defaultMRU {
		d.tag(tagPPPMaxPayload, binary.BigEndian.AppendUint16(nil, uint16(e.cfg.MRU)))
	}
}

func (e *engine) sendPADI() {
	d := newDiscovery(broadcast, e.mac, codePADI, 0).
		tag(tagServiceName, []byte(e.cfg.Service)).
		tag(tagHostUniq, e.hostUniq)
	e.maxPayloadTag(d)
	e.out(d.frame())
	e.discNext = e.now.Add(e.discWait)
	e.skipped.padiSent()
}

// sendPADR requests a session from the chosen AC, echoing its AC-Cookie and
// Relay-Session-Id (RFC 2516 section 5.3).
func (e *engine) sendPADR() {
	d := newDiscovery(e.ac.mac, e.mac, codePADR, 0).
		tag(tagServiceName, []byte(e.cfg.Service)).
		tag(tagHostUniq, e.hostUniq)
	if e.ac.hasCookie {
		d.tag(tagACCookie, e.ac.cookie)
	}
	if e.ac.hasRel {
		d.tag(tagRelaySessionID, e.ac.relay)
	}
	e.maxPayloadTag(d)
	e.out(d.frame())
	e.discNext = e.now.Add(e.discWait)
}

// discTick retransmits: PADI with a doubling timeout; PADR a few times
// before a new attempt starts over with PADI.
func (e *engine) discTick() {
	if e.discNext.IsZero() || e.now.Before(e.discNext) {
		return
	}
	e.discWait = min(2*e.discWait, padiCap)
	if !e.padrSent {
		e.skipped.padiUnanswered()
		e.sendPADI()
		return
	}
	e.padrN++
	if e.padrN >= padrTries {
		e.log.Info("pppoe: no PADS; discovery starts over", "ac", e.ac.name)
		e.skipped.add(e.ac.mac)
		e.startDiscovery()
		return
	}
	e.sendPADR()
}

// discoveryInput takes a discovery frame addressed to us.
func (e *engine) discoveryInput(frame []byte) {
	d, err := parseDiscovery(frame)
	if err != nil {
		e.st.Ignored++
		return
	}
	switch d.code {
	case codePADO:
		if e.phase != PhaseDiscovery || e.padrSent || !e.acceptable(&d) || e.skipped.skip(d.src) {
			e.st.Ignored++
			return
		}
		e.ac = acOffer{
			mac:       d.src,
			name:      printable(d.acName),
			cookie:    append([]byte(nil), d.cookie...),
			hasCookie: d.hasCookie,
			relay:     append([]byte(nil), d.relay...),
			hasRel:    d.hasRelay,
		}
		e.padrSent, e.padrN, e.discWait = true, 0, padiFirst
		e.log.Info("pppoe: PADO", "ac", e.ac.name, "mac", fmt.Sprintf("% x", d.src[:]))
		e.sendPADR()
	case codePADS:
		if e.phase != PhaseDiscovery || !e.padrSent || d.src != e.ac.mac || !bytes.Equal(d.hostUniq, e.hostUniq) {
			e.st.Ignored++
			return
		}
		switch {
		case d.errTag != 0:
			e.skipped.add(e.ac.mac)
			e.drop(fmt.Sprintf("PADS: %s: %s", errTagName(d.errTag), printable(d.errMsg)), false, false)
		case d.sessionID == 0:
			e.drop("PADS without a session ID", false, false)
		default:
			e.startSession(d.sessionID, d.maxPayload)
		}
	case codePADT:
		if e.session == 0 || d.src != e.ac.mac || d.sessionID != e.session {
			e.st.Ignored++
			return
		}
		r := "PADT from the AC"
		if d.errTag != 0 {
			r += fmt.Sprintf(": %s: %s", errTagName(d.errTag), printable(d.errMsg))
		}
		e.drop(r, false, false)
	default:
		e.st.Ignored++
	}
}

// acceptable checks a PADO: our Host-Uniq, an AC-Name (the configured one
// if any), the Service-Name we asked for, no error tag and a unicast
// source (RFC 2516 section 5.2).
func (e *engine) acceptable(d *discovery) bool {
	switch {
	case !d.hasHostUniq || !bytes.Equal(d.hostUniq, e.hostUniq):
		return false
	case !d.hasACName || d.errTag != 0:
		return false
	case e.cfg.ACName != "" && string(d.acName) != e.cfg.ACName:
		return false
	case d.src[0]&1 != 0 || d.src == [6]byte{}:
		return false
	}
	return e.cfg.Service == "" || hasService(d.tags, e.cfg.Service)
}

// hasService reports whether a discovery payload lists the Service-Name.
func hasService(tags []byte, name string) bool {
	found := false
	_ = walkTags(tags, func(typ uint16, val []byte) error {
		if typ == tagServiceName && string(val) == name {
			found = true
		}
		return nil
	})
	return found
}
