package mgmtnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DHCPService is the path of gokrazy's DHCP client among its services.
const DHCPService = "/gokrazy/dhcp"

// RestartGokrazyDHCP asks gokrazy, over its HTTP unix socket with its
// password, to restart its DHCP client: the new one asks for the lease and
// applies it (address, routes, resolv.conf). gokrazy's /restart wants a
// POST whose xsrftoken form value matches its gokrazy_xsrf cookie.
func RestartGokrazyDHCP(ctx context.Context, socket, password string) error {
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	token := strconv.Itoa(int(time.Now().UnixNano()%(1<<30)) + 1)
	form := url.Values{"path": {DHCPService}, "xsrftoken": {token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gokrazy/restart", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "gokrazy_xsrf", Value: token})
	req.SetBasicAuth("gokrazy", password)
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("restarting %s: %w", DHCPService, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("restarting %s: %s: %s", DHCPService, res.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
