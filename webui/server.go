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
