package system

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

// Identity says which build runs, from what every gokrazy packer gives a
// program: gokrazy's BuildTimestamp (the init's, asked over gokrazy's unix
// socket) and SBOM hash (/etc/gokrazy/sbom.json), and Go's embedded build
// info. No -ldflags are needed.
type Identity struct {
	// Build is gokrazy's BuildTimestamp of the running build ("dev" when
	// it cannot be learned: not on gokrazy).
	Build string `json:"build"`
	// Source says where Build came from: "gokrazy", "ldflags" or "none".
	Source   string `json:"source"`
	SBOMHash string `json:"sbom_hash,omitempty"`
	// Module and Revision come from the program's Go build info.
	Module   string `json:"module,omitempty"`
	Revision string `json:"revision,omitempty"`
	Go       string `json:"go"`
}

// Where gokrazy serves its status (no password needed: the socket is
// root's) and keeps the SBOM.
const (
	GokrazySocket = "/run/gokrazy-http.sock"
	SBOMFile      = "/etc/gokrazy/sbom.json"
)

// ReadIdentity learns the running build. ldflags is a -ldflags -X value
// ("" or "dev" if none); it is used only when gokrazy cannot be asked.
// wait bounds the retries while gokrazy's socket comes up. gokrazy asks
// for its password on the socket too (when it has one): the first
// non-empty of passwordFiles.
func ReadIdentity(ldflags, socket, sbomFile string, passwordFiles []string, wait time.Duration) Identity {
	id := Identity{Build: "dev", Source: "none", Go: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		id.Go, id.Module = bi.GoVersion, bi.Main.Path
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			id.Module += "@" + bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				id.Revision = s.Value
			}
		}
	}
	if b, err := os.ReadFile(sbomFile); err == nil {
		var s struct {
			SBOMHash string `json:"sbom_hash"`
		}
		if json.Unmarshal(b, &s) == nil {
			id.SBOMHash = s.SBOMHash
		}
	}
	deadline := time.Now().Add(wait)
	for {
		ts, err := gokrazyBuild(socket, password(passwordFiles))
		if err == nil && ts != "" {
			id.Build, id.Source = ts, "gokrazy"
			return id
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ldflags != "" && ldflags != "dev" {
		id.Build, id.Source = ldflags, "ldflags"
	}
	return id
}

// gokrazyBuild asks gokrazy's status JSON for BuildTimestamp.
func gokrazyBuild(socket, password string) (string, error) {
	if _, err := os.Stat(socket); err != nil {
		return "", err
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
	req, err := http.NewRequest(http.MethodGet, "http://gokrazy/", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	if password != "" {
		req.SetBasicAuth("gokrazy", password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("gokrazy status: %s", resp.Status)
	}
	var st struct{ BuildTimestamp string }
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&st); err != nil {
		return "", err
	}
	return st.BuildTimestamp, nil
}

func password(files []string) string {
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if pw := strings.TrimSpace(string(b)); pw != "" {
				return pw
			}
		}
	}
	return ""
}
