package webui

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes builds the handler: security headers, then authentication, CSRF
// checks and body limits around the API and the static files.
func (s *Server) routes() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /api/info", s.handleInfo)
	api.HandleFunc("GET /api/stats", s.handleStats)
	api.HandleFunc("GET /api/stats/history", s.handleHistory)
	api.HandleFunc("GET /api/stream/ticket", s.handleTicket)
	api.HandleFunc("GET /api/rules", s.handleRules)
	api.HandleFunc("PUT /api/rules", s.handlePutRules)
	api.HandleFunc("GET /api/conntrack", s.handleConntrack)
	api.HandleFunc("DELETE /api/conntrack/{id}", s.handleConntrackDelete)
	api.HandleFunc("DELETE /api/conntrack", s.handleConntrackDeleteMatching)
	api.HandleFunc("GET /api/neighbours", s.handleNeighbours)
	api.HandleFunc("GET /api/dataplane", s.handleDataplane)
	api.HandleFunc("GET /api/fdb", s.handleFDB)
	api.HandleFunc("GET /api/tuning", s.handleTuning)
	api.HandleFunc("GET /api/system", s.handleSystem)
	api.HandleFunc("GET /api/system/update", s.handleUpdateStatus)
	api.HandleFunc("POST /api/system/update", s.handleUpdate)
	api.HandleFunc("GET /api/config", s.handleConfig)
	api.HandleFunc("GET /api/config/form", s.handleConfigForm)
	api.HandleFunc("POST /api/config/validate", s.handleValidate)
	api.HandleFunc("POST /api/config/apply", s.handleApply)
	api.HandleFunc("POST /api/config/restore", s.handleApply)
	api.HandleFunc("GET /api/config/pending", s.handlePending)
	api.HandleFunc("GET /api/config/changes/{id}", s.handleChange)
	api.HandleFunc("POST /api/config/changes/{id}/confirm", s.handleConfirm)
	api.HandleFunc("POST /api/config/changes/{id}/rollback", s.handleRollback)
	api.HandleFunc("GET /api/config/history", s.handleConfigHistory)
	api.HandleFunc("GET /api/config/history/{id}", s.handleConfigVersion)
	api.HandleFunc("GET /api/config/backup", s.handleBackup)
	api.HandleFunc("GET /api/router", s.handleRouter)
	api.HandleFunc("GET /api/devices", s.handleDevices)
	api.HandleFunc("POST /api/devices/{mac}/static", s.handleMakeStatic)
	api.HandleFunc("DELETE /api/devices/{mac}", s.handleForget)
	api.HandleFunc("GET /api/logs", s.handleLogs)
	api.HandleFunc("GET /api/diag", s.handleDiagSources)
	api.HandleFunc("POST /api/diag/ping", s.handlePing)
	api.HandleFunc("POST /api/diag/traceroute", s.handleTraceroute)
	api.HandleFunc("POST /api/diag/lookup", s.handleLookup)
	api.HandleFunc("POST /api/capture", s.handleCapture)
	api.HandleFunc("GET /api/nics", s.handleNICs)
	api.HandleFunc("GET /api/admin", s.handleAdmin)
	api.HandleFunc("POST /api/admin/password", s.handlePassword)
	api.HandleFunc("POST /api/admin/reboot", s.handleReboot)
	api.HandleFunc("PUT /api/admin/syslog", s.handleSyslog)
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(s), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}))
	api.Handle("/", s.staticHandler())

	protected := s.protect(api)
	root := http.NewServeMux()
	root.HandleFunc("GET /api/stream", s.handleWS) // authenticates itself (Basic or ticket)
	root.HandleFunc("GET /logout", s.handleLogout) // takes only the user "logout"
	if s.opts.Health != nil {
		root.HandleFunc("GET /healthz", s.handleHealth) // unauthenticated: the update health gate
		root.HandleFunc("GET /version", s.handleVersion)
	}
	root.Handle("/", protected)
	return securityHeaders(root)
}

// protect requires Basic auth on every request, the CSRF checks on
// mutations, and limits request bodies.
func (s *Server) protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.check(w, r, nil) {
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if err := s.origins.checkMutation(r); err != nil {
				writeError(w, http.StatusForbidden, err.Error())
				return
			}
		}
		if r.Body != nil && !(r.Method == http.MethodPost && r.URL.Path == "/api/system/update") { // limited by MaxUpdate
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="e1kbox", charset="UTF-8"`)
	writeError(w, http.StatusUnauthorized, "authentication required")
}

// securityHeaders keeps the pages from being framed or fed foreign scripts.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) currentAuth() *authenticator { return s.auth.Load() }
