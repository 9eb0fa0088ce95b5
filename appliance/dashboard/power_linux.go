package dashboard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"e1kbox/webui"
)

// Reboot through gokrazy, with the password it booted with.

// PasswordChanged remembers the password gokrazy booted with (for
// webui.Options.PasswordChanged).
func (d *Tools) PasswordChanged(old, _ string) {
	if _, err := os.Stat(d.bootPW); err == nil {
		return // changed before: that file has the boot's password
	}
	os.MkdirAll(filepath.Dir(d.bootPW), 0o700)
	if err := webui.WriteFileAtomic(d.bootPW, []byte(old+"\n"), 0o600); err != nil {
		slog.Warn("the password gokrazy booted with is not kept: a reboot from the dashboard fails until the next boot", "err", err)
	}
}

// gokrazyPassword is the password gokrazy runs with.
func (d *Tools) gokrazyPassword() string {
	for _, f := range append([]string{d.bootPW}, d.pwFiles...) {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// Reboot asks gokrazy (over its unix socket, with the password it booted
// with) to stop every service, unmount /perm and reboot.
func (d *Tools) Reboot() error {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.gokrazy)
		}}}
	req, err := http.NewRequest(http.MethodPost, "http://gokrazy/reboot?async=true", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("gokrazy", d.gokrazyPassword())
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("asking gokrazy to reboot: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("asking gokrazy to reboot: %s: %s", res.Status, b)
	}
	return nil
}
