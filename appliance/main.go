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
	"syscall"
	"time"

	"e1kbox/appliance/system"
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
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	log.Info("e1kbox appliance starting", "build", buildTimestamp, "go", goVersion())

	cfg, source, err := loadConfig(*livePath, *factoryPath)
	if err != nil {
		return err
	}
	log.Info("config loaded", "source", source, "bytes", len(cfg))

	perm := system.CheckPerm(*stateDir)
	if !perm.Writable {
		log.Warn("persistent storage is not writable: changes will not survive a reboot", "dir", perm.Dir, "err", perm.Error)
	}
	boots, err := system.RecordBoot(filepath.Join(*stateDir, "boots.json"), buildTimestamp, time.Now())
	if err != nil {
		log.Warn("boot history not saved", "err", err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("dashboard listener: %w", err)
	}
	started := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"status": "ok", "build": buildTimestamp, "config_source": source,
			"uptime_seconds": int(time.Since(started).Seconds()), "perm": perm,
		})
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"build_timestamp": buildTimestamp, "go": goVersion(), "boots": boots})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("dashboard listening", "addr", ln.Addr().String())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// loadConfig returns the live config if it exists, else the factory one.
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
