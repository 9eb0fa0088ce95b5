package system

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadIdentity serves gokrazy's status JSON on a unix socket, as the
// init does, and an SBOM file: the identity is gokrazy's build, whatever
// -ldflags said; without gokrazy, -ldflags or "dev".
func TestReadIdentity(t *testing.T) {
	dir := t.TempDir()
	sock, sbom := filepath.Join(dir, "http.sock"), filepath.Join(dir, "sbom.json")
	os.WriteFile(sbom, []byte(`{"sbom_hash":"abc123","sbom":{}}`), 0o644)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "gokrazy" || p != "secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			http.Error(w, "html", 500)
			return
		}
		w.Write([]byte(`{"BuildTimestamp":"2026-12-01T10:00:00Z","SBOMHash":"abc123"}`))
	}))
	srv.Listener.Close() // httptest's own; it serves ln
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("secret\n"), 0o600)
	pwFiles := []string{filepath.Join(dir, "missing"), pw}
	id := ReadIdentity("dev", sock, sbom, pwFiles, time.Second)
	if id.Build != "2026-12-01T10:00:00Z" || id.Source != "gokrazy" || id.SBOMHash != "abc123" || id.Go == "" {
		t.Errorf("on gokrazy: %+v", id)
	}
	if id := ReadIdentity("from-ldflags", sock, sbom, pwFiles, 0); id.Build != "2026-12-01T10:00:00Z" {
		t.Errorf("gokrazy's build must win over -ldflags: %+v", id)
	}
	none := filepath.Join(dir, "none.sock")
	if id := ReadIdentity("from-ldflags", none, none, nil, 0); id.Build != "from-ldflags" || id.Source != "ldflags" || id.SBOMHash != "" {
		t.Errorf("without gokrazy: %+v", id)
	}
	if id := ReadIdentity("", sock, none, nil, 300*time.Millisecond); id.Build != "dev" || id.Source != "none" {
		t.Errorf("without anything: %+v", id)
	}
}
