package mgmtnet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeGokrazy answers /restart as gokrazy's init does (supervise.go's
// stopstartHandler behind authenticated): Basic auth, a POST, an
// xsrftoken form value equal to the gokrazy_xsrf cookie, a known service;
// then 303 to /status. It records the services restarted.
func fakeGokrazy(t *testing.T, password string) (socket string, restarted *[]string) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "gokrazy-http.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("/restart", func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "gokrazy" || p != password {
			http.Error(w, "no Basic Authorization header set", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "expected a POST request", http.StatusBadRequest)
			return
		}
		c, err := r.Cookie("gokrazy_xsrf")
		if err != nil {
			http.Error(w, "XSRF cookie missing", http.StatusBadRequest)
			return
		}
		ct, _ := strconv.ParseInt(c.Value, 0, 32)
		ft, err := strconv.ParseInt(r.FormValue("xsrftoken"), 0, 32)
		if err != nil || ct == 0 || ct != ft {
			http.Error(w, "XSRF token mismatch", http.StatusForbidden)
			return
		}
		if r.FormValue("path") != DHCPService {
			http.Error(w, "no such service", http.StatusNotFound)
			return
		}
		got = append(got, r.FormValue("path"))
		http.Redirect(w, r, "/status?path="+r.FormValue("path"), http.StatusSeeOther)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close() // httptest's own; it serves ln
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return socket, &got
}

func TestRestartGokrazyDHCP(t *testing.T) {
	socket, restarted := fakeGokrazy(t, "pw")
	if err := RestartGokrazyDHCP(context.Background(), socket, "pw"); err != nil {
		t.Fatal(err)
	}
	if len(*restarted) != 1 || (*restarted)[0] != DHCPService {
		t.Errorf("restarted %q, want [%s]", *restarted, DHCPService)
	}
	if err := RestartGokrazyDHCP(context.Background(), socket, "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with a wrong password: %v, want the 401", err)
	}
	if err := RestartGokrazyDHCP(context.Background(), filepath.Join(t.TempDir(), "none"), "pw"); err == nil {
		t.Error("no socket: no error")
	}
}
