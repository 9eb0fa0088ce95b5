// Command appliance is the e1kbox supervisor that gokrazy starts at boot.
package main

import (
	"context"
	"encoding/json"
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
	"e1kbox/appliance/system"
	"e1kbox/webui"
)

// buildTimestamp is set by firmware build (-ldflags -X).
var buildTimestamp = "dev"

func main() {
	if err := run(); err != nil {
		slog.Error("appliance failed", "err", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		livePath    = flag.String("config", "/perm/e1kbox/config.json", "live runtime config")
		factoryPath = flag.String("factory", "/etc/e1kbox/factory.json", "factory runtime config (from the image)")
		listen      = flag.String("listen", ":8080", "dashboard and API address")
		stateDir    = flag.String("state", "/perm/e1kbox", "directory for persistent state")
		interfaces  = flag.String("interfaces", "", "comma-separated data interfaces: run a bridge over them (ports named after them), "+
			"overriding the config's ports; with no config file at all, a default bridge config is used")
		tune          = flag.Bool("tune", true, "apply the config's NIC and kernel tuning plan before starting the dataplane")
		passwordFiles = flag.String("password-files", strings.Join(webui.DefaultPasswordFiles, ","), "dashboard password files, tried in order (gokrazy's)")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	log.Info("e1kbox appliance starting", "build", buildTimestamp, "go", goVersion())

	_, source, _ := loadConfig(*livePath, *factoryPath)
	env, err := config.SystemEnv()
	if err != nil {
		return err
	}
	store := config.NewStore(config.Paths{Factory: *factoryPath, Live: *livePath}, env)
	cfg, warnings, err := store.Load()
	for _, w := range warnings {
		log.Warn("config", "warning", w)
	}
	switch {
	case err != nil && *interfaces == "":
		return fmt.Errorf("config: %w", err)
	case err != nil:
		log.Warn("no usable config; running a default bridge over -interfaces", "err", err)
		if cfg, err = config.Parse([]byte(`{"version": 2, "mode": "bridge"}`)); err != nil {
			return fmt.Errorf("default config: %w", err)
		}
		source = "default"
	}
	if *interfaces != "" {
		cfg.Mode = config.ModeBridge
		cfg.Ports = nil
		for _, name := range strings.Split(*interfaces, ",") {
			cfg.Ports = append(cfg.Ports, config.Port{Name: name, Interface: name})
		}
		cfg.ApplyDefaults()
	}
	log.Info("config loaded", "source", source, "mode", cfg.Mode, "ports", len(cfg.Ports))

	perm := system.CheckPerm(*stateDir)
	if !perm.Writable {
		log.Warn("persistent storage is not writable: changes will not survive a reboot", "dir", perm.Dir, "err", perm.Error)
	}
	boots, err := system.RecordBoot(filepath.Join(*stateDir, "boots.json"), buildTimestamp, time.Now())
	if err != nil {
		log.Warn("boot history not saved", "err", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	dp := &plane{log: log, tune: *tune}
	if err := dp.Apply(ctx, cfg); err != nil {
		// Keep serving: /healthz reports the dataplane as down.
		log.Error("dataplane not started", "err", err)
	}
	defer dp.Close()
	var dataIfaces []string
	for _, port := range cfg.Ports {
		dataIfaces = append(dataIfaces, port.Interface)
	}
	go dp.watchHangs(ctx, dataIfaces)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("dashboard listener: %w", err)
	}
	started := time.Now()
	public := http.NewServeMux()
	public.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{
			"status": "ok", "build": buildTimestamp, "config_source": source,
			"uptime_seconds": int(time.Since(started).Seconds()), "perm": perm,
		}
		code := http.StatusOK
		if e, err := dp.Engine(); err != nil {
			body["status"], body["dataplane_error"] = "degraded", err.Error()
			code = http.StatusServiceUnavailable
		} else {
			h := e.Health()
			body["dataplane"] = h
			if !h.OK {
				body["status"] = "degraded"
				code = http.StatusServiceUnavailable
			}
		}
		writeJSON(w, code, body)
	})
	public.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"build_timestamp": buildTimestamp, "go": goVersion(), "boots": boots})
	})
	raw := http.NewServeMux() // the engine's own JSON, behind the dashboard's auth
	raw.HandleFunc("GET /api/dataplane/stats", func(w http.ResponseWriter, r *http.Request) {
		e, err := dp.Engine()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, e.Snapshot())
	})
	raw.HandleFunc("GET /api/dataplane/fdb", func(w http.ResponseWriter, r *http.Request) {
		e, err := dp.Engine()
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": e.FDBEntries(), "agingTime": e.FDB().AgingTime().String()})
	})
	raw.HandleFunc("GET /api/dataplane/irqs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"irqs": readIRQCPUs("/")})
	})
	natAPI(raw, dp)

	adapter := newStoreAdapter(store, dp)
	store.OnRollback(func(c *config.Config) {
		adapter.rolledBack()
		if err := dp.Apply(context.Background(), c); err != nil {
			log.Error("dataplane: rolled-back config not applied", "err", err)
		}
		log.Warn("config change not confirmed in time: rolled back")
	})
	view := &boxView{dp: dp, started: started, hostname: hostname(), procRoot: "/"}
	web, err := webui.New(webui.Options{
		Stats: view, Config: adapter, Rules: view, Conntrack: view, FDB: view, Tuning: view, System: view,
		PasswordFiles:  strings.Split(*passwordFiles, ","),
		ConfirmTimeout: time.Duration(cfg.Dashboard.ConfirmTimeout),
		Logger:         log,
		Public:         []webui.Route{{Pattern: "GET /healthz", Handler: public}, {Pattern: "GET /version", Handler: public}},
		Protected:      []webui.Route{{Pattern: "/api/dataplane/", Handler: raw}},
	})
	errc := make(chan error, 1)
	if err != nil {
		// Without a password the dashboard stays closed; the box still
		// forwards and answers /healthz for the update health gate.
		log.Error("dashboard disabled", "err", err)
		srv := &http.Server{Handler: public, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.Serve(ln) }()
		go func() { <-ctx.Done(); srv.Close() }()
	} else {
		go func() { errc <- web.Serve(ctx, ln) }()
	}
	log.Info("dashboard listening", "addr", ln.Addr().String())

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
loop:
	for {
		select {
		case err := <-errc:
			if ctx.Err() == nil {
				return fmt.Errorf("dashboard: %w", err)
			}
			break loop
		case <-hup:
			reload(ctx, log, store, dp)
		case <-ctx.Done():
			break loop
		}
	}
	log.Info("stopping")
	select { // the dashboard shuts down with ctx
	case <-errc:
	case <-time.After(3 * time.Second):
	}
	dp.Close()
	log.Info("stopped")
	return nil
}

func hostname() string {
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return h
}

// reload re-reads the config from disk (SIGHUP) and applies it; a config
// that fails to load keeps the running one.
func reload(ctx context.Context, log *slog.Logger, store *config.Store, dp *plane) {
	cfg, warnings, err := store.Load()
	for _, w := range warnings {
		log.Warn("config", "warning", w)
	}
	if err != nil {
		log.Error("SIGHUP: config not reloaded; the running config stays", "err", err)
		return
	}
	if err := dp.Apply(ctx, cfg); err != nil {
		log.Error("SIGHUP: reloaded config not applied", "err", err)
		return
	}
	log.Info("SIGHUP: config reloaded from disk")
}

// loadConfig returns the live config if it exists, else the factory one,
// and its path (reported as the config source; the Store may still pick a
// saved version instead).
func loadConfig(live, factory string) ([]byte, string, error) {
	for _, p := range []string{live, factory} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading config: %w", err)
		}
		if !json.Valid(b) {
			return nil, "", fmt.Errorf("config %s is not valid JSON", p)
		}
		return b, p, nil
	}
	return nil, "", fmt.Errorf("no config: neither %s nor %s exists", live, factory)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}
