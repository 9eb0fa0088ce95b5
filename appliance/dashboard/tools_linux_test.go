package dashboard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestRebootUsesGokrazysPassword: gokrazy's socket wants the password it
// booted with, also after the dashboard changed the file.
func TestRebootUsesGokrazysPassword(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gokrazy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	reboots := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "gokrazy" || p != "boot-pw" || r.Method != http.MethodPost || r.URL.Path != "/reboot" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		reboots++
	}))
	srv.Listener.Close() // httptest's own; it serves ln
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	pw := filepath.Join(dir, "gokr-pw.txt")
	os.WriteFile(pw, []byte("boot-pw\n"), 0o600)
	d := &Tools{gokrazy: sock, pwFiles: []string{pw}, bootPW: filepath.Join(dir, "run", "boot-pw")}
	if err := d.Reboot(); err != nil || reboots != 1 {
		t.Fatalf("reboot: %v (%d)", err, reboots)
	}
	// The dashboard changes the password twice; gokrazy still has the first.
	os.WriteFile(pw, []byte("second\n"), 0o600)
	d.PasswordChanged("boot-pw", "second")
	os.WriteFile(pw, []byte("third\n"), 0o600)
	d.PasswordChanged("second", "third")
	if err := d.Reboot(); err != nil || reboots != 2 {
		t.Fatalf("reboot after the changes: %v (%d)", err, reboots)
	}
	os.Remove(d.bootPW) // a new boot: gokrazy read "third"
	if err := d.Reboot(); err == nil {
		t.Error("reboot with a password gokrazy does not have: no error")
	}
}
