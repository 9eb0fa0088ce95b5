package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding response: "+err.Error())
		return
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// errorBody is every error answer; Errors is set for an invalid config.
type errorBody struct {
	Error  string       `json:"error"`
	Errors []FieldError `json:"errors,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

func writeFieldErrors(w http.ResponseWriter, errs []FieldError) {
	writeJSON(w, http.StatusBadRequest, errorBody{Error: "invalid config", Errors: errs})
}

// writeStoreError maps an error of an implementation to a status.
func writeStoreError(w http.ResponseWriter, err error) {
	var fe FieldErrors
	switch {
	case errors.As(err, &fe):
		writeFieldErrors(w, fe)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrBusy):
		writeError(w, http.StatusConflict, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// readBody reads a size-limited body; it answers 413 (or 400) itself and
// returns false when it failed.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return nil, false
	}
	return b, true
}

// readJSON reads a size-limited body and decodes it into v; it answers
// 413 or 400 (naming what it decoded) itself and returns false when it
// failed.
func readJSON(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	b, ok := readBody(w, r)
	if !ok {
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "decoding "+what+": "+err.Error())
		return false
	}
	return true
}

// readQuery parses the request's query with parse; it answers 400 itself
// and returns false when it failed.
func readQuery[Q any](w http.ResponseWriter, r *http.Request, parse func(url.Values) (Q, error)) (Q, bool) {
	q, err := parse(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
	}
	return q, err == nil
}

// writeResult answers v, or, when err is set, the error with status
// failed.
func writeResult(w http.ResponseWriter, v any, err error, failed int) {
	if err != nil {
		writeError(w, failed, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func notAvailable(w http.ResponseWriter, what string) {
	writeError(w, http.StatusNotFound, what+" is not available on this box")
}

// nonNil returns list, or an empty list for nil: answers have [], not
// null, for none.
func nonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// Info is the answer of GET /api/info: what the box is and which pages
// have something to show.
type Info struct {
	Hostname       string   `json:"hostname"`
	Mode           string   `json:"mode"`
	Version        string   `json:"version"`
	Features       Features `json:"features"`
	CSRFHeader     string   `json:"csrf_header"`
	Interval       float64  `json:"interval_s"`
	History        float64  `json:"history_s"`
	ConfirmTimeout float64  `json:"confirm_timeout_s"`
	// GokrazyPort is the port of gokrazy's UI on the box.
	GokrazyPort int `json:"gokrazy_port"`
}

// Features says which optional parts the box has.
type Features struct {
	Config    bool `json:"config"`
	Rules     bool `json:"rules"`
	Conntrack bool `json:"conntrack"`
	FDB       bool `json:"fdb"`
	Tuning    bool `json:"tuning"`
	Router    bool `json:"router"`
	Devices   bool `json:"devices"`
	Logs      bool `json:"logs"`
	Diag      bool `json:"diagnostics"`
	Capture   bool `json:"capture"`
	NICs      bool `json:"nics"`
	Reboot    bool `json:"reboot"`
	Update    bool `json:"update"`
}

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	si := s.systemInfo()
	_, routerOn := s.routerNow()
	writeJSON(w, http.StatusOK, Info{
		Hostname: si.Hostname,
		Mode:     si.Mode,
		Version:  si.Version,
		Features: Features{
			Config:    s.opts.Config != nil,
			Rules:     s.opts.Rules != nil,
			Conntrack: s.opts.Conntrack != nil,
			FDB:       s.opts.FDB != nil,
			Tuning:    s.opts.Tuning != nil,
			Router:    routerOn,
			Devices:   s.devicesNow(),
			Logs:      s.opts.Logs != nil,
			Diag:      s.opts.Diagnostics != nil,
			Capture:   s.opts.Capture != nil,
			NICs:      s.opts.NICs != nil,
			Reboot:    s.opts.Power != nil,
			Update:    s.opts.Updater != nil,
		},
		GokrazyPort:    s.opts.GokrazyPort,
		CSRFHeader:     CSRFHeader,
		Interval:       s.opts.Interval.Seconds(),
		History:        s.opts.History.Seconds(),
		ConfirmTimeout: s.opts.ConfirmTimeout.Seconds(),
	})
}

// handleStats serves the newest published message as it went out.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b := s.lastJSON
	s.mu.Unlock()
	if b == nil {
		writeError(w, http.StatusServiceUnavailable, "no sample published yet")
		return
	}
	writeRawJSON(w, http.StatusOK, b)
}

func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	hm, err := s.history.columns(r.URL.Query().Get("range"))
	s.mu.Unlock()
	writeResult(w, hm, err, http.StatusBadRequest)
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	if s.opts.Logs == nil {
		notAvailable(w, "the log")
		return
	}
	q, ok := readQuery(w, r, ParseLogQuery)
	if !ok {
		return
	}
	wait, err := intParam(r.URL.Query(), "wait", 0, 0, 30)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := s.opts.Logs.Query(q)
	if len(p.Entries) == 0 && wait > 0 {
		// Long poll: answer when a matching entry comes, or at the deadline.
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Second)
		defer cancel()
		after := p.Last
		for len(p.Entries) == 0 && s.opts.Logs.Wait(ctx, after) {
			p = s.opts.Logs.Query(q)
			after = p.Last
		}
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleTicket(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"ticket": s.tickets.issue(time.Now())})
}

func (s *Server) handleRules(w http.ResponseWriter, r *http.Request) {
	if s.opts.Rules == nil {
		notAvailable(w, "the rule table")
		return
	}
	t := s.opts.Rules.Table()
	t.Policies, t.Rules = nonNil(t.Policies), nonNil(t.Rules)
	writeJSON(w, http.StatusOK, t)
}

// ConnPage is the answer of GET /api/conntrack.
type ConnPage struct {
	Total   int    `json:"total"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Entries []Conn `json:"entries"`
}

// connQuery reads the connection filters of a request; false when it
// answered an error (no connection tracking here, a bad filter).
func (s *Server) connQuery(w http.ResponseWriter, r *http.Request) (ConnQuery, bool) {
	if s.opts.Conntrack == nil {
		notAvailable(w, "connection tracking (NAT mode)")
		return ConnQuery{}, false
	}
	return readQuery(w, r, ParseConnQuery)
}

func (s *Server) handleConntrack(w http.ResponseWriter, r *http.Request) {
	q, ok := s.connQuery(w, r)
	if !ok {
		return
	}
	page, total := s.opts.Conntrack.Query(q)
	writeJSON(w, http.StatusOK, ConnPage{Total: total, Offset: q.Offset, Limit: q.Limit, Entries: nonNil(page)})
}

func (s *Server) handleConntrackDelete(w http.ResponseWriter, r *http.Request) {
	if s.opts.Conntrack == nil {
		notAvailable(w, "connection tracking (NAT mode)")
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad connection id: "+err.Error())
		return
	}
	if err := s.opts.Conntrack.Delete(id); err != nil {
		writeStoreError(w, fmt.Errorf("deleting connection %d: %w", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleConntrackDeleteMatching deletes the connections matching the
// filters (addr, port, proto, state, kind): at least one, or all=true.
func (s *Server) handleConntrackDeleteMatching(w http.ResponseWriter, r *http.Request) {
	q, ok := s.connQuery(w, r)
	if !ok {
		return
	}
	if !q.Addr.IsValid() && q.Port == 0 && q.Proto == "" && q.State == "" && q.Kind == "" && r.URL.Query().Get("all") != "true" {
		writeError(w, http.StatusBadRequest, "no filter: name connections with addr, port, proto, state or kind, or pass all=true")
		return
	}
	n, err := s.opts.Conntrack.DeleteMatching(q)
	if err != nil {
		writeStoreError(w, fmt.Errorf("deleting connections: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

func (s *Server) handleFDB(w http.ResponseWriter, r *http.Request) {
	if s.opts.FDB == nil {
		notAvailable(w, "the bridge forwarding database (bridge mode)")
		return
	}
	e := nonNil(s.opts.FDB.Entries())
	slices.SortStableFunc(e, func(a, b FDBEntry) int {
		if c := strings.Compare(a.Port, b.Port); c != 0 {
			return c
		}
		if a.VLAN != b.VLAN {
			return int(a.VLAN) - int(b.VLAN)
		}
		return strings.Compare(a.MAC, b.MAC)
	})
	writeJSON(w, http.StatusOK, map[string]any{"entries": e})
}

func (s *Server) handleTuning(w http.ResponseWriter, r *http.Request) {
	if s.opts.Tuning == nil {
		notAvailable(w, "tuning")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reports": nonNil(s.opts.Tuning.Reports())})
}

// systemInfo asks System and fills what it left out from the process.
func (s *Server) systemInfo() SystemInfo {
	var si SystemInfo
	if s.opts.System != nil {
		si = s.opts.System.Info()
	}
	if si.Hostname == "" {
		si.Hostname, _ = os.Hostname()
	}
	if si.GoVersion == "" {
		si.GoVersion = runtime.Version()
	}
	if si.Version == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			si.Version = bi.Main.Version
		}
	}
	if si.Started.IsZero() {
		si.Started = s.started
	}
	if si.GoHeap == 0 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		si.GoHeap = ms.HeapInuse
	}
	return si
}

// SystemAnswer is the answer of GET /api/system.
type SystemAnswer struct {
	SystemInfo
	Uptime float64 `json:"uptime_s"`
	TLS    bool    `json:"tls"`
}

func (s *Server) handleSystem(w http.ResponseWriter, r *http.Request) {
	si := s.systemInfo()
	writeJSON(w, http.StatusOK, SystemAnswer{SystemInfo: si, Uptime: time.Since(si.Started).Seconds(), TLS: s.TLS()})
}
