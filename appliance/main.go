// Command appliance is the e1kbox supervisor that gokrazy starts at boot:
// it reads its flags and the runtime config, wires the dataplane (plane),
// the router services (router), the dashboard and its listener, and
// supervises them until a signal.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dashboard"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/listener"
	"e1kbox/appliance/plane"
	"e1kbox/appliance/router"
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
	pwFiles := strings.Split(f.passwordFiles, ",")
	book := webui.NewLogBook(0) // the dashboard's Logs page
	log := slog.New(book.Handler(slog.NewTextHandler(os.Stderr, nil)))
	slog.SetDefault(log)
	wait := time.Duration(0)
	if system.UnderGokrazy() {
		wait = 10 * time.Second // gokrazy's socket is up before services start; this is a margin
	}
	id := system.ReadIdentity(buildTimestamp, system.GokrazySocket, system.SBOMFile, pwFiles, wait)
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
	boots := system.NewBootLog(log, filepath.Join(f.state, "boots.json"), id.Build, time.Now())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dp := plane.New(log, f.tune, dataplane.RingKind(f.rxRing))
	defer dp.Close()
	if err := dp.Apply(ctx, cfg); err != nil {
		log.Error("dataplane not started", "err", err) // keep serving: /healthz reports it
	}
	go dp.WatchHangs(ctx, cfg)
	rt := router.New(router.Options{Log: log, State: f.state, Hostname: system.Hostname(),
		OnLease: dp.SetLease, OnPrefixes: dp.SetIPv6, OnWAN6: dp.SetIPv6WAN,
		LANPort: dp.LANPort, LANActivity: dp.LANActivity, PPPoELink: pppoeLink(dp), OnPPPoE: dp.SetPPPoE})
	defer rt.Close()
	if err := rt.Apply(cfg); err != nil {
		log.Error("services not all started", "err", err)
	}
	go boots.CorrectWhenClockSet(ctx, rt.WaitClock)
	go dashboard.RuleLogs(ctx, log, dp)

	ml := listener.New(log, f.listen)
	if err := ml.Configure(cfg); err != nil {
		return err
	}
	go ml.Watch(ctx)
	// Every later change runs through the store: saved, run and rolled
	// back as one serialized step.
	store.Run(func(c *config.Config) error {
		err := dp.Apply(context.Background(), c)
		lerr := ml.Configure(c)
		return errors.Join(err, rt.Apply(c), lerr)
	})
	adapter := dashboard.NewStore(store)
	store.OnRollback(func(*config.Config) {
		adapter.RolledBack()
		log.Warn("config change rolled back")
	})
	box := &dashboard.Box{Plane: dp, Source: source, Identity: id, Started: time.Now(), Hostname: system.Hostname(),
		ProcRoot: "/", Perm: perm, Boots: boots}
	tools := dashboard.NewTools(func() *config.Config { c, _ := store.Current(); return c }, pwFiles)
	rv := dashboard.NewRouter(rt.Live, dp)
	opts := webui.Options{Stats: box, Config: adapter, Rules: box, Conntrack: box, FDB: box, Tuning: box, System: box,
		Health: box, Dataplane: box, Neighbours: box, Router: rv, Devices: rv,
		Logs: book, Diagnostics: tools, Capture: tools, NICs: tools,
		PasswordFiles: pwFiles, PasswordChanged: tools.PasswordChanged, ConfirmTimeout: cfg.Dashboard.ConfirmTimeout.D(),
		HistoryFile: filepath.Join(f.state, "history.json"), GokrazyPort: system.GokrazyPort(), Logger: log,
	}
	if system.UnderGokrazy() {
		opts.Power = tools // only under gokrazy (its socket comes up after the services start)
	}
	go dashboard.MgmtWatcher(log, tools).Run(ctx)
	opts.Updater = dashboard.NewUpdater(log, f.state, store, id)
	errc := dashboard.Serve(ctx, log, ml, opts)
	return supervise(ctx, log, errc, store, rt, dp)
}

// pppoeLink returns the running engine's PPPoE endpoint, for the
// router's PPPoE client.
func pppoeLink(dp *plane.Plane) func() (router.PPPoELink, error) {
	return func() (router.PPPoELink, error) {
		e, err := dp.Engine()
		if err != nil {
			return nil, err
		}
		if l := e.PPPoE(); l != nil {
			return l, nil
		}
		return nil, errors.New("the dataplane has no PPPoE endpoint (not in NAT mode)")
	}
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

// supervise runs until a signal or a dashboard failure: SIGHUP reloads
// the config from disk (a config that fails to load keeps the running
// one); SIGTERM and SIGINT stop the parts.
func supervise(ctx context.Context, log *slog.Logger, errc <-chan error, store *config.Store, rt *router.Router, dp *plane.Plane) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for {
		select {
		case err := <-errc:
			if ctx.Err() == nil {
				return fmt.Errorf("dashboard: %w", err)
			}
			errc = nil // the dashboard has stopped
		case <-hup:
			reload(log, store)
			continue
		case <-ctx.Done():
		}
		log.Info("stopping")
		if errc != nil {
			select { // the dashboard shuts down with ctx
			case <-errc:
			case <-time.After(3 * time.Second):
			}
		}
		rt.Close()
		dp.Close()
		log.Info("stopped")
		return nil
	}
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
