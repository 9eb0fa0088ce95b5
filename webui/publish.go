package webui

import (
	"time"

	"github.com/gorilla/websocket"
)

// routerRefresh is how often the publisher asks the router for its status.
const routerRefresh = 5 * time.Second

// snapshot reads the counters (an empty snapshot without Stats).
func (s *Server) snapshot(now time.Time) Snapshot {
	var snap Snapshot
	if s.opts.Stats != nil {
		snap = s.opts.Stats.Snapshot()
	}
	if snap.Time.IsZero() {
		snap.Time = now
	}
	return snap
}

// configState is the running version and pending change, nil without a
// config store.
func (s *Server) configState() *ConfigState {
	if s.opts.Config == nil {
		return nil
	}
	return &ConfigState{Version: s.opts.Config.Version(), Pending: s.opts.Config.Pending()}
}

// publish takes one snapshot, encodes it once and fans it out.
func (s *Server) publish(now time.Time) {
	snap := s.snapshot(now)
	s.mu.Lock()
	s.seq++
	msg := buildMessage(s.seq, s.prev, &snap)
	s.prev = &snap
	s.mu.Unlock()
	msg.Config = s.configState()
	msg.Router = s.routerStatus(now)
	msg.Alarms = s.alarmState.alarms(&msg, msg.Router, s.hangReports(), now)
	b, err := marshalMessage(&msg)
	if err != nil {
		s.log.Error("dashboard publisher", "err", err)
		return
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		s.log.Error("dashboard publisher", "err", err)
		return
	}
	s.mu.Lock()
	s.lastJSON = b
	s.lastAlarms = msg.Alarms
	s.history.add(&msg)
	s.mu.Unlock()
	s.hub.publish(pm)
}

// routerStatus returns the router's status, asked every routerRefresh
// (publisher only).
func (s *Server) routerStatus(now time.Time) *RouterStatus {
	if s.opts.Router == nil {
		return nil
	}
	if now.Sub(s.routerAt) >= routerRefresh || now.Before(s.routerAt) {
		s.router, s.routerAt = nil, now
		if st, ok := s.opts.Router.RouterStatus(); ok {
			fillNil(&st)
			s.router = &st
		}
	}
	return s.router
}

// hangReports are the tuning reports of e1000e hang mitigations.
func (s *Server) hangReports() []TuningReport {
	if s.opts.Tuning == nil {
		return nil
	}
	var out []TuningReport
	for _, r := range s.opts.Tuning.Reports() {
		if r.Knob == "hang-mitigation" {
			out = append(out, r)
		}
	}
	return out
}
