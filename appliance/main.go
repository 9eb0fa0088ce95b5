// Command appliance is the e1kbox supervisor that gokrazy starts at boot.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/system"
	"e1kbox/webui"
)

// buildTimestamp may be set with -ldflags -X; on gokrazy the build is
// gokrazy's BuildTimestamp, whichever packer built the image (see
// system.ReadIdentity).
var buildTimestamp = "dev"

func main() {
	if err := run(); err != nil {
		slog.Error("appliance failed", "err", err)
		os.Exit(1)
	}
}

// flags are the supervisor's command line.
type flags struct {
	live, factory, listen, state, interfaces, passwordFiles string
	tune                                                    bool
	rxRing                                                  string
}

func parseFlags() flags {
	var f flags
	flag.StringVar(&f.live, "config", "/perm/e1kbox/config.json", "live runtime config")
	flag.StringVar(&f.factory, "factory", "/etc/e1kbox/factory.json", "factory runtime config (from the image)")
	flag.StringVar(&f.listen, "listen", "", "dashboard and API address, exactly (\":8080\": every address); empty: the runtime config's dashboard.listen")
	flag.StringVar(&f.state, "state", "/perm/e1kbox", "directory for persistent state")
	flag.StringVar(&f.interfaces, "interfaces", "", "comma-separated data interfaces: run a bridge over them (ports named after them), "+
		"overriding the config's ports; with no config file at all, a default bridge config is used")
	flag.BoolVar(&f.tune, "tune", true, "apply the config's NIC and kernel tuning plan before starting the dataplane")
	flag.StringVar(&f.rxRing, "rx-ring", "", "RX ring layout, for measurements: frames (TPACKET_V2) or blocks (TPACKET_V3); empty: the dataplane's default")
	flag.StringVar(&f.passwordFiles, "password-files", strings.Join(webui.DefaultPasswordFiles, ","), "dashboard password files, tried in order (gokrazy's)")
	flag.Parse()
	return f
}

func run() error {
	f := parseFlags()
	book := webui.NewLogBook(0) // the dashboard's Logs page
	log := slog.New(book.Handler(slog.NewTextHandler(os.Stderr, nil)))
	slog.SetDefault(log)
	wait := time.Duration(0)
	if underGokrazy() {
		wait = 10 * time.Second // gokrazy's socket is up before services start; this is a margin
	}
	id := system.ReadIdentity(buildTimestamp, system.GokrazySocket, system.SBOMFile, strings.Split(f.passwordFiles, ","), wait)
	log.Info("e1kbox appliance starting", "build", id.Build, "from", id.Source, "sbom", id.SBOMHash, "go", id.Go)

	store, cfg, source, err := loadConfig(log, f)
	if err != nil {
		return err
	}
	perm := system.CheckPerm(f.state)
	if !perm.Writable {
		perm.Problem = system.PermProblem(perm, system.PermMounted("/proc/self/mountinfo", "/perm"))
		log.Warn("persistent storage is not writable: changes will not survive a reboot", "dir", perm.Dir, "err", perm.Error, "problem", perm.Problem)
	}
	boots := newBootLog(log, filepath.Join(f.state, "boots.json"), id.Build, time.Now())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dp := newPlane(log, f.tune)
	dp.ring = dataplane.RingKind(f.rxRing)
	defer dp.Close()
	if err := dp.Apply(ctx, cfg); err != nil {
		log.Error("dataplane not started", "err", err) // keep serving: /healthz reports it
	}
	var dataIfaces []string
	for _, port := range cfg.Ports {
		dataIfaces = append(dataIfaces, port.Interface)
	}
	go dp.watchHangs(ctx, dataIfaces)
	rt := newRouter(log, f.state, hostname(), dp.SetLease)
	rt.v6.onPrefixes, rt.v6.onWAN = dp.SetIPv6, dp.SetIPv6WAN
	defer rt.Close()
	if err := rt.Apply(cfg); err != nil {
		log.Error("services not all started", "err", err)
	}
	go boots.correctWhenClockSet(ctx, rt.WaitClock)
	go pollRuleLogs(ctx, log, dp)

	ml := newMgmtListener(log)
	spec, err := specFor(f.listen, cfg)
	if err != nil {
		return err
	}
	if err := ml.Configure(spec); err != nil {
		return err
	}
	go ml.Watch(ctx)
	// Every later change runs through the store: saved, run and rolled
	// back as one serialized step.
	store.Run(func(c *config.Config) error {
		err := dp.Apply(context.Background(), c)
		spec, serr := specFor(f.listen, c)
		if serr == nil {
			serr = ml.Configure(spec)
		}
		return errors.Join(err, rt.Apply(c), serr)
	})
	adapter := newStoreAdapter(store)
	store.OnRollback(func(*config.Config) {
		adapter.rolledBack()
		log.Warn("config change rolled back")
	})
	view := &boxView{dp: dp, source: source, build: id.Build, identity: id, started: time.Now(), hostname: hostname(),
		procRoot: "/", perm: perm, boots: boots}
	opts, parts := dashboardOptions(f, log, store, cfg, book, rt, dp)
	go mgmtWatcher(log, parts).Run(ctx)
	opts.Stats, opts.Config, opts.Rules, opts.Conntrack, opts.FDB, opts.Tuning = view, adapter, view, view, view, view
	opts.System, opts.Health, opts.Dataplane, opts.Neighbours = view, view, view, view
	opts.Updater = newUpdater(log, f.state, store, id)
	errc := serveDashboard(ctx, log, ml, opts)
	return supervise(ctx, log, errc, store, rt, dp)
}

// dashboardOptions are the dashboard's parts beyond the box's view: logs,
// diagnostics, the router's services, password and history files.
func dashboardOptions(f flags, log *slog.Logger, store *config.Store, cfg *config.Config, book *webui.LogBook, rt *router, dp *plane) (webui.Options, *dashParts) {
	parts := &dashParts{cfg: func() *config.Config { c, _ := store.Current(); return c },
		sysNet: "/sys/class/net", gokrazy: system.GokrazySocket, pwFiles: strings.Split(f.passwordFiles, ","),
		bootPW: "/run/e1kbox/gokrazy-boot-pw"}
	rv := &routerView{rt: rt, conns: connsOf(dp), v6: ipv6Of(dp)}
	opts := webui.Options{
		Logs: book, Diagnostics: parts, Capture: parts, NICs: parts, Router: rv, Devices: rv,
		PasswordFiles:   strings.Split(f.passwordFiles, ","),
		ConfirmTimeout:  cfg.Dashboard.ConfirmTimeout.D(),
		PasswordChanged: parts.passwordChanged,
		HistoryFile:     filepath.Join(f.state, "history.json"),
		GokrazyPort:     gokrazyPort(),
		Logger:          log,
	}
	if underGokrazy() {
		opts.Power = parts // only under gokrazy (its socket comes up after the services start)
	}
	return opts, parts
}

// loadConfig loads the running config from the store; -interfaces
// replaces its ports (or, with no usable config at all, runs a default
// bridge). source says for /healthz where the running config came from.
func loadConfig(log *slog.Logger, f flags) (*config.Store, *config.Config, func() string, error) {
	env, err := config.SystemEnv()
	if err != nil {
		return nil, nil, nil, err
	}
	store := config.NewStore(config.Paths{Factory: f.factory, Live: f.live}, env)
	cfg, warnings, err := store.Load()
	for _, w := range warnings {
		log.Warn("config", "warning", w)
	}
	source := store.Source
	switch {
	case err != nil && f.interfaces == "":
		return nil, nil, nil, fmt.Errorf("config: %w", err)
	case err != nil:
		log.Warn("no usable config; running a default bridge over -interfaces", "err", err)
		if cfg, err = config.Parse([]byte(`{"version": 2, "mode": "bridge"}`)); err != nil {
			return nil, nil, nil, fmt.Errorf("default config: %w", err)
		}
		source = func() string { return "default" }
	}
	if f.interfaces != "" {
		cfg.Mode = config.ModeBridge
		cfg.Ports = nil
		for _, name := range strings.Split(f.interfaces, ",") {
			cfg.Ports = append(cfg.Ports, config.Port{Name: name, Interface: name})
		}
		cfg.ApplyDefaults()
		inner := source
		source = func() string { return "-interfaces over " + inner() }
	}
	log.Info("config loaded", "source", source(), "mode", cfg.Mode, "ports", len(cfg.Ports))
	return store, cfg, source, nil
}

// serveDashboard serves the dashboard on ln until ctx ends; without a
// password it serves only the unauthenticated /healthz and /version, so
// that the box still answers the update health gate.
func serveDashboard(ctx context.Context, log *slog.Logger, ln net.Listener, opts webui.Options) <-chan error {
	errc := make(chan error, 1)
	web, err := webui.New(opts)
	if err != nil {
		log.Error("dashboard disabled", "err", err)
		srv := newHTTPServer(webui.PublicHandler(opts.Health))
		go func() { errc <- srv.Serve(ln) }()
		go func() { <-ctx.Done(); srv.Close() }()
	} else {
		go func() { errc <- web.Serve(ctx, ln) }()
	}
	return errc
}

// supervise runs until a signal or a dashboard failure: SIGHUP reloads
// the config from disk.
func supervise(ctx context.Context, log *slog.Logger, errc <-chan error, store *config.Store, rt *router, dp *plane) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for {
		select {
		case err := <-errc:
			if ctx.Err() == nil {
				return fmt.Errorf("dashboard: %w", err)
			}
			return stopAll(log, errc, rt, dp)
		case <-hup:
			reload(log, store)
		case <-ctx.Done():
			return stopAll(log, errc, rt, dp)
		}
	}
}

func stopAll(log *slog.Logger, errc <-chan error, rt *router, dp *plane) error {
	log.Info("stopping")
	select { // the dashboard shuts down with ctx
	case <-errc:
	case <-time.After(3 * time.Second):
	}
	rt.Close()
	dp.Close()
	log.Info("stopped")
	return nil
}

// reload re-reads the config from disk (SIGHUP) and runs it; a config
// that fails to load keeps the running one.
func reload(log *slog.Logger, store *config.Store) {
	_, warnings, err := store.Reload()
	for _, w := range warnings {
		log.Warn("config", "warning", w)
	}
	if err != nil {
		log.Error("SIGHUP: config not reloaded", "err", err)
		return
	}
	log.Info("SIGHUP: config reloaded from disk")
}

func hostname() string {
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return h
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
}

// underGokrazy says whether the appliance runs on a gokrazy box (its init
// is there): its socket, boot disk and DHCP client.
func underGokrazy() bool {
	_, err := os.Stat("/gokrazy/init")
	return err == nil
}
