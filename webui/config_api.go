package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ConfigAnswer is the answer of GET /api/config.
type ConfigAnswer struct {
	Version Version         `json:"version"`
	Pending *PendingInfo    `json:"pending"`
	Config  json.RawMessage `json:"config"`
}

// ApplyAnswer is the answer of a successful apply, restore or rule edit:
// the change is running and must be confirmed before Pending.Deadline.
type ApplyAnswer struct {
	Pending *PendingInfo `json:"pending"`
}

// ChangeAnswer is the answer of GET /api/config/changes/{id}.
type ChangeAnswer struct {
	ID      PendingID    `json:"id"`
	State   ApplyState   `json:"state"`
	Pending *PendingInfo `json:"pending,omitempty"`
}

func (s *Server) configStore(w http.ResponseWriter) (ConfigStore, bool) {
	if s.opts.Config == nil {
		notAvailable(w, "the config store")
		return nil, false
	}
	return s.opts.Config, true
}

// configBody is configStore and readBody: the store and the request's
// body, or false when it answered an error.
func (s *Server) configBody(w http.ResponseWriter, r *http.Request) (ConfigStore, []byte, bool) {
	cs, ok := s.configStore(w)
	if !ok {
		return nil, nil, false
	}
	b, ok := readBody(w, r)
	return cs, b, ok
}

// validate checks a config: JSON syntax, then the store's checks.
func validate(cs ConfigStore, cfg []byte) []FieldError {
	if errs := syntaxErrors(cfg); errs != nil {
		return errs
	}
	return cs.Validate(cfg)
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	cfg, v := cs.Current()
	writeJSON(w, http.StatusOK, ConfigAnswer{Version: v, Pending: cs.Pending(), Config: cfg})
}

func (s *Server) handleConfigForm(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"sections": s.opts.ConfigForm})
}

// syntaxErrors returns a field error when b is not one JSON object.
func syntaxErrors(b []byte) []FieldError {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return []FieldError{{Path: "", Message: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}}
	case err != nil:
		return []FieldError{{Path: "", Message: "invalid JSON: " + err.Error()}}
	}
	if _, ok := v.(map[string]any); !ok {
		return []FieldError{{Path: "", Message: "the config must be a JSON object"}}
	}
	return nil
}

func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request) {
	cs, b, ok := s.configBody(w, r)
	if !ok {
		return
	}
	if errs := validate(cs, b); len(errs) > 0 {
		writeFieldErrors(w, errs)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"valid": true, "errors": []FieldError{}})
}

// confirmTimeout reads ?confirm_timeout=SECONDS (1..3600), else the
// default.
func (s *Server) confirmTimeout(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("confirm_timeout")
	if v == "" {
		return s.opts.ConfirmTimeout, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 3600 {
		return 0, fmt.Errorf("confirm_timeout must be 1-3600 seconds, not %q", v)
	}
	return time.Duration(n) * time.Second, nil
}

// apply validates and applies a whole config and answers 202 with the
// pending change. mapErrs, if not nil, rewrites the paths of field errors.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, cs ConfigStore, cfg []byte, mapErrs func([]FieldError) []FieldError) {
	timeout, err := s.confirmTimeout(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if errs := validate(cs, cfg); len(errs) > 0 {
		if mapErrs != nil {
			errs = mapErrs(errs)
		}
		writeFieldErrors(w, errs)
		return
	}
	id, err := cs.Apply(cfg, timeout)
	var fe FieldErrors
	if mapErrs != nil && errors.As(err, &fe) {
		err = FieldErrors(mapErrs(fe))
	}
	if err != nil {
		writeStoreError(w, fmt.Errorf("applying config: %w", err))
		return
	}
	p := cs.Pending()
	if p == nil || p.ID != id {
		// Already confirmed or rolled back (a very short timeout).
		p = &PendingInfo{ID: id}
	}
	s.log.Info("config applied, waiting for confirmation", "id", string(id), "timeout", timeout)
	writeJSON(w, http.StatusAccepted, ApplyAnswer{Pending: p})
}

func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	if cs, b, ok := s.configBody(w, r); ok {
		s.apply(w, r, cs, b, nil)
	}
}

func (s *Server) handlePending(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"pending": cs.Pending()})
}

func (s *Server) handleChange(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	id := PendingID(r.PathValue("id"))
	a := ChangeAnswer{ID: id, State: cs.State(id)}
	if p := cs.Pending(); p != nil && p.ID == id {
		a.Pending = p
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) handleConfirm(w http.ResponseWriter, r *http.Request) {
	s.settle(w, r, ConfigStore.Confirm, "confirming", "config change confirmed")
}

func (s *Server) handleRollback(w http.ResponseWriter, r *http.Request) {
	s.settle(w, r, ConfigStore.Rollback, "rolling back", "config change rolled back on request")
}

// settle ends the pending change the path names with end (Confirm or
// Rollback): doing names it in an error, done in the log.
func (s *Server) settle(w http.ResponseWriter, r *http.Request, end func(ConfigStore, PendingID) error, doing, done string) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	id := PendingID(r.PathValue("id"))
	if err := end(cs, id); err != nil {
		writeStoreError(w, fmt.Errorf("%s %s: %w", doing, id, err))
		return
	}
	s.log.Info(done, "id", string(id))
	writeJSON(w, http.StatusOK, ChangeAnswer{ID: id, State: cs.State(id)})
}

func (s *Server) handleConfigHistory(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"current": cs.Version().ID, "versions": nonNil(cs.History())})
}

func (s *Server) handleConfigVersion(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	id := r.PathValue("id")
	b, err := cs.Get(id)
	if err != nil {
		writeStoreError(w, fmt.Errorf("config version %s: %w", id, err))
		return
	}
	if r.URL.Query().Has("download") {
		w.Header().Set("Content-Disposition", attachment("e1kbox-config-"+id+".json"))
	}
	writeRawJSON(w, http.StatusOK, b)
}

func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	cs, ok := s.configStore(w)
	if !ok {
		return
	}
	b, v := cs.Current()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		out.Reset()
		out.Write(b)
	}
	w.Header().Set("Content-Disposition", attachment("e1kbox-config-"+v.ID+".json"))
	writeRawJSON(w, http.StatusOK, out.Bytes())
}

// attachment builds a Content-Disposition value with a file name reduced
// to safe characters.
func attachment(name string) string {
	b := []byte(name)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	return `attachment; filename="` + string(b) + `"`
}
