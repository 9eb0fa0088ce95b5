package webui

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	f := newFixture(t, nil)
	paths := []string{"/", "/api/info", "/api/stats/history", "/metrics", "/static/app.css", "/api/config", "/api/nope"}
	tests := []struct {
		name       string
		user, pass string // "" user: no Authorization header
		want       int
	}{
		{name: "no credentials", want: http.StatusUnauthorized},
		{name: "wrong password", user: User, pass: "wrong", want: http.StatusUnauthorized},
		{name: "password prefix", user: User, pass: testPassword[:4], want: http.StatusUnauthorized},
		{name: "password with suffix", user: User, pass: testPassword + "x", want: http.StatusUnauthorized},
		{name: "wrong user", user: "root", pass: testPassword, want: http.StatusUnauthorized},
		{name: "right", user: User, pass: testPassword, want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range paths {
				r, _ := http.NewRequest("GET", f.ts.URL+p, nil)
				if tt.user != "" {
					r.SetBasicAuth(tt.user, tt.pass)
				}
				res, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, res)
				res.Body.Close()
				want := tt.want
				if p == "/api/nope" && want == http.StatusOK {
					want = http.StatusNotFound
				}
				if res.StatusCode != want {
					t.Errorf("GET %s: status %d, want %d", p, res.StatusCode, want)
				}
				if want == http.StatusUnauthorized {
					if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
						t.Errorf("GET %s: WWW-Authenticate %q", p, got)
					}
					if bytes.Contains(body, []byte("port1")) || bytes.Contains(body, []byte("<html")) {
						t.Errorf("GET %s: 401 leaks content: %s", p, body)
					}
				}
			}
		})
	}
}

func TestPasswordFiles(t *testing.T) {
	dir := t.TempDir()
	perm, etc := filepath.Join(dir, "perm-pw.txt"), filepath.Join(dir, "etc-pw.txt")
	missing := filepath.Join(dir, "missing")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(perm, []byte("from-perm\n"), 0o600)
	os.WriteFile(etc, []byte("from-etc"), 0o600)
	os.WriteFile(empty, []byte(" \n"), 0o600)
	tests := []struct {
		name    string
		files   []string
		want    string
		wantErr bool
	}{
		{name: "first wins", files: []string{perm, etc}, want: "from-perm"},
		{name: "fallback", files: []string{missing, etc}, want: "from-etc"},
		{name: "none", files: []string{missing, missing + "2"}, wantErr: true},
		{name: "empty file", files: []string{empty, etc}, wantErr: true},
		{name: "no files configured", files: []string{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readPassword(tt.files)
			if (err != nil) != tt.wantErr {
				t.Fatalf("readPassword: %q, %v; want error %v", got, err, tt.wantErr)
			}
			if tt.wantErr {
				if !errors.Is(err, ErrNoPassword) {
					t.Errorf("error %v is not ErrNoPassword", err)
				}
				_, nerr := New(Options{PasswordFiles: tt.files, CertFile: "-", KeyFile: "-"})
				if !errors.Is(nerr, ErrNoPassword) {
					t.Errorf("New: %v, want ErrNoPassword", nerr)
				}
				return
			}
			if got != tt.want {
				t.Errorf("password %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, nil)
	valid := []byte(factoryConfig)
	tests := []struct {
		name    string
		headers []string
		want    int
	}{
		{name: "no CSRF header", headers: []string{CSRFHeader, "-"}, want: http.StatusForbidden},
		{name: "foreign origin", headers: []string{"Origin", "http://evil.example"}, want: http.StatusForbidden},
		{name: "null origin", headers: []string{"Origin", "null"}, want: http.StatusForbidden},
		{name: "cross-site fetch", headers: []string{"Sec-Fetch-Site", "cross-site"}, want: http.StatusForbidden},
		{name: "same-site other host", headers: []string{"Sec-Fetch-Site", "same-site"}, want: http.StatusForbidden},
		{name: "foreign referer", headers: []string{"Referer", "http://evil.example/page"}, want: http.StatusForbidden},
		{name: "same origin", headers: []string{"Origin", f.ts.URL, "Sec-Fetch-Site", "same-origin"}, want: http.StatusOK},
		{name: "same referer", headers: []string{"Referer", f.ts.URL + "/#/config"}, want: http.StatusOK},
		{name: "non-browser client", want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.on(t).req("POST", "/api/config/validate", valid, tt.headers...)
			body := readAll(t, res)
			if res.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.want, body)
			}
		})
	}
	// A refused apply changes nothing.
	_, before := f.store.Current()
	res := f.req("POST", "/api/config/apply", []byte(strings.Replace(factoryConfig, `"nat"`, `"bridge"`, 1)), "Origin", "http://evil.example")
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin apply: status %d", res.StatusCode)
	}
	if _, after := f.store.Current(); after != before || f.store.applies != 0 {
		t.Errorf("cross-origin apply changed the config: %v -> %v", before, after)
	}
	// The same for connection deletes.
	if res := f.req("DELETE", "/api/conntrack/1", nil, CSRFHeader, "-"); res.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE without CSRF header: status %d", res.StatusCode)
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t, nil)
	_, before := f.store.Current()
	big := []byte(`{"mode":"bridge","pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	for _, path := range []string{"/api/config/apply", "/api/config/validate", "/api/config/restore"} {
		res := f.req("POST", path, big)
		body := readAll(t, res)
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with %d bytes: status %d, want 413: %s", path, len(big), res.StatusCode, body)
		}
	}
	if res := f.req("PUT", "/api/rules", big); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT /api/rules: status %d, want 413", res.StatusCode)
	}
	if _, after := f.store.Current(); after != before {
		t.Errorf("config changed: %v -> %v", before, after)
	}
}
