package webui

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Default paths of gokrazy's web certificate (present when the instance
// config enables TLS).
const (
	DefaultCertFile = "/etc/ssl/gokrazy-web.pem"
	DefaultKeyFile  = "/etc/ssl/gokrazy-web.key.pem"
)

// Options configure a Server. Every interface may be nil.
type Options struct {
	Stats     Stats
	Config    ConfigStore
	Rules     Rules
	Conntrack Conntrack
	FDB       FDB
	Tuning    Tuning
	System    System
	// Health serves the unauthenticated /healthz and /version.
	Health     Health
	Dataplane  Dataplane
	Neighbours Neighbours
	// Router and Devices are the router's services (NAT mode).
	Router      Router
	Devices     Devices
	Logs        Logs
	Diagnostics Diagnostics
	Capture     Capture
	NICs        NICs
	Power       Power
	// Updater installs firmware updates from the System page.
	Updater Updater

	// HistoryFile keeps the 24-hour and 7-day history across restarts
	// ("" keeps it in memory); it is written every HistorySave (default
	// 5 min) and when Run ends.
	HistoryFile string
	HistorySave time.Duration
	// SyslogTargetFile is gokrazy's remote syslog target; default
	// DefaultSyslogTargetFile.
	SyslogTargetFile string
	// GokrazyPort is the port of gokrazy's web UI (for the link to it);
	// default 80.
	GokrazyPort int

	// PasswordFiles are tried in order; default DefaultPasswordFiles. A
	// password change writes the first.
	PasswordFiles []string
	// PasswordChanged, if set, is called after a password change with the
	// old and the new password (gokrazy keeps the old one until a reboot).
	PasswordChanged func(old, new string)
	// CertFile and KeyFile enable TLS in Serve when both exist; default
	// DefaultCertFile and DefaultKeyFile. Set them to "-" to disable TLS.
	CertFile, KeyFile string
	// TrustedOrigins ("https://box.example:8443") may send mutations and
	// open the stream besides the origin of the request's Host (for a
	// reverse proxy).
	TrustedOrigins []string

	// Interval between published samples; default 1 s.
	Interval time.Duration
	// History is how far back the charts reach; default 5 min.
	History time.Duration
	// ConfirmTimeout is the default time to confirm an applied change;
	// default 60 s.
	ConfirmTimeout time.Duration
	// MaxBody limits request bodies; default 1 MiB. MaxUpdate limits a
	// firmware update's; default DefaultMaxUpdate.
	MaxBody, MaxUpdate int64
	// RulesKey is the top-level key of the runtime config that holds the
	// rule set (rules.Ruleset JSON); default "rules".
	RulesKey string
	// ConfigForm describes the config page's form; default
	// DefaultConfigForm.
	ConfigForm []FormSection

	// SendQueue is how many messages a WebSocket client may fall behind
	// before it is dropped; default 4. WriteTimeout bounds one write to a
	// client; default 5 s.
	SendQueue    int
	WriteTimeout time.Duration

	Logger *slog.Logger
}

// Server is the dashboard: an http.Handler plus the 1 Hz publisher.
type Server struct {
	opts    Options
	log     *slog.Logger
	auth    atomic.Pointer[authenticator] // swapped by a password change
	guard   *loginGuard
	tickets *tickets
	origins *originChecker
	hub     *hub
	tls     *tls.Config
	handler http.Handler
	started time.Time

	runOnce sync.Once
	stopped chan struct{} // closed when Run returns

	mu       sync.Mutex
	seq      uint64
	prev     *Snapshot
	lastJSON []byte
	history  *history
	// lastAlarms are the alarms of the newest message.
	lastAlarms []Alarm

	// Owned by the publisher.
	alarmState alarmState
	router     *RouterStatus
	routerAt   time.Time

	diagSlots chan struct{}
	captureMu sync.Mutex
}

// routerRefresh is how often the publisher asks the router for its status.
const routerRefresh = 5 * time.Second

// New checks the options, reads the password and, when the certificate
// files exist, loads them. It fails with ErrNoPassword when there is no
// password file: the dashboard never runs without a password.
func New(opts Options) (*Server, error) {
	if opts.PasswordFiles == nil {
		opts.PasswordFiles = DefaultPasswordFiles
	}
	if opts.CertFile == "" {
		opts.CertFile = DefaultCertFile
	}
	if opts.KeyFile == "" {
		opts.KeyFile = DefaultKeyFile
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.History <= 0 {
		opts.History = 5 * time.Minute
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = 60 * time.Second
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.MaxUpdate <= 0 {
		opts.MaxUpdate = DefaultMaxUpdate
	}
	if opts.RulesKey == "" {
		opts.RulesKey = "rules"
	}
	if opts.ConfigForm == nil {
		opts.ConfigForm = DefaultConfigForm
	}
	if opts.SendQueue <= 0 {
		opts.SendQueue = 4
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HistorySave <= 0 {
		opts.HistorySave = 5 * time.Minute
	}
	if opts.SyslogTargetFile == "" {
		opts.SyslogTargetFile = DefaultSyslogTargetFile
	}
	if opts.GokrazyPort <= 0 {
		opts.GokrazyPort = 80
	}
	pw, err := readPassword(opts.PasswordFiles)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	origins, err := newOriginChecker(opts.TrustedOrigins)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	tcfg, err := loadTLS(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	samples := int(opts.History/opts.Interval) + 1
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		guard:     newLoginGuard(opts.Logger),
		tickets:   newTickets(30 * time.Second),
		origins:   origins,
		hub:       newHub(opts.Logger, opts.SendQueue, opts.WriteTimeout),
		tls:       tcfg,
		started:   time.Now(),
		stopped:   make(chan struct{}),
		history:   newHistory(samples, opts.Interval),
		diagSlots: make(chan struct{}, maxDiagRunning),
	}
	s.loadHistory()
	s.auth.Store(newAuthenticator(pw))
	s.handler = s.routes()
	return s, nil
}

// loadTLS returns nil when the certificate files are absent (plain HTTP).
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "-" || keyFile == "-" {
		return nil, nil
	}
	_, cerr := os.Stat(certFile)
	_, kerr := os.Stat(keyFile)
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist) {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// TLS reports whether Serve speaks HTTPS.
func (s *Server) TLS() bool { return s.tls != nil }

// Handler returns the dashboard, API, stream and metrics. /healthz is not
// part of it: the supervisor serves that without authentication.
func (s *Server) Handler() http.Handler { return s.handler }

// Clients returns the number of connected WebSocket clients.
func (s *Server) Clients() int { return s.hub.count() }

// Run publishes a sample every interval until ctx is done, then disconnects
// the WebSocket clients. It takes one Snapshot per interval however many
// clients there are. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	ran := false
	s.runOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("dashboard publisher already ran")
	}
	defer func() {
		close(s.stopped)
		s.hub.closeAll()
	}()
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	save := time.NewTicker(s.opts.HistorySave)
	defer save.Stop()
	s.publish(time.Now())
	for {
		select {
		case <-ctx.Done():
			s.saveHistory(time.Now())
			return nil
		case now := <-t.C:
			s.publish(now)
		case now := <-save.C:
			s.saveHistory(now)
		}
	}
}

// Serve runs the publisher and serves the handler on ln (with TLS when the
// certificate was found) until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		if err := s.Run(ctx); err != nil {
			s.log.Error("dashboard publisher", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	cancel()
	<-runDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	return nil
}

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
