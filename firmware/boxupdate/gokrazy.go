package boxupdate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Gokrazy talks to the box's gokrazy init over its unix socket (root only;
// the password is sent as gokrazy reads it, /perm first).
type Gokrazy struct {
	Socket        string   // default /run/gokrazy-http.sock
	PasswordFiles []string // default /perm/gokr-pw.txt, /etc/gokr-pw.txt
}

func (g Gokrazy) client() *http.Client {
	sock := g.Socket
	if sock == "" {
		sock = "/run/gokrazy-http.sock"
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

func (g Gokrazy) do(req *http.Request) (*http.Response, error) {
	files := g.PasswordFiles
	if files == nil {
		files = []string{"/perm/gokr-pw.txt", "/etc/gokr-pw.txt"}
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) != "" {
			req.SetBasicAuth("gokrazy", strings.TrimSpace(string(b)))
			break
		}
	}
	return g.client().Do(req)
}

// Status returns gokrazy's BuildTimestamp and SBOMHash.
func (g Gokrazy) Status(ctx context.Context) (Build, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gokrazy/", nil)
	if err != nil {
		return Build{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.do(req)
	if err != nil {
		return Build{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Build{}, fmt.Errorf("gokrazy status: %s", resp.Status)
	}
	var st struct{ BuildTimestamp, SBOMHash string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&st); err != nil {
		return Build{}, err
	}
	return Build{Timestamp: st.BuildTimestamp, SBOMHash: st.SBOMHash}, nil
}

// Reboot asks gokrazy to stop the services, unmount /perm and reboot (with
// kexec of what the boot partition names, as gokrazy does by default).
func (g Gokrazy) Reboot() error {
	req, err := http.NewRequest(http.MethodPost, "http://gokrazy/reboot?wait_per_signal=10s", nil)
	if err != nil {
		return err
	}
	resp, err := g.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /reboot: %s", resp.Status)
	}
	return nil
}

// ApplianceHealthy checks the appliance's /healthz: status ok on build b
// (and b's SBOM hash, when both know one).
func ApplianceHealthy(ctx context.Context, url string, b Build) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("appliance health: %w", err)
	}
	defer resp.Body.Close()
	var h struct {
		Status   string `json:"status"`
		Build    string `json:"build"`
		SBOMHash string `json:"sbom_hash"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil {
		return fmt.Errorf("appliance health (HTTP %d): %w", resp.StatusCode, err)
	}
	return CompareHealth(h.Status, h.Build, h.SBOMHash, b)
}

// CompareHealth is the health gate both update clients apply: the
// appliance says "ok", on gokrazy's build, with the same SBOM when both
// report one.
func CompareHealth(status, build, sbom string, b Build) error {
	switch {
	case status != "ok":
		return fmt.Errorf("appliance health: status %q", status)
	case build != b.Timestamp:
		return fmt.Errorf("appliance reports build %q, gokrazy %q", build, b.Timestamp)
	case sbom != "" && b.SBOMHash != "" && sbom != b.SBOMHash:
		return fmt.Errorf("appliance reports SBOM %s, gokrazy %s", sbom, b.SBOMHash)
	}
	return nil
}
