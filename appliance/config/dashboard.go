package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Dashboard configures the web UI.
type Dashboard struct {
	// Listen is the dashboard's TCP listen address. Default ":8080".
	Listen string `json:"listen"`
	// ConfirmTimeout is how long an applied change waits for confirmation
	// before it rolls back by itself, 5s..1h. Default 60s.
	ConfirmTimeout Duration `json:"confirmTimeout"`
	// UpdateKey is the ed25519 public key (base64 of its 32 bytes) that
	// firmware updates must be signed with (`firmware build -sign`); the
	// box refuses an unsigned or wrongly signed update. Default "": any
	// update is taken.
	UpdateKey string `json:"updateKey,omitempty"`
	// InternetProbe is a host (an IPv4 address or a name) the box pings
	// every 30 s to show on the overview whether the Internet is
	// reachable; "" (the default) probes nothing. NAT mode.
	InternetProbe string `json:"internetProbe,omitempty"`
}

// UpdatePublicKey is UpdateKey decoded (nil if unset or malformed, which
// Validate refuses).
func (d *Dashboard) UpdatePublicKey() ed25519.PublicKey {
	b, err := base64.StdEncoding.DecodeString(d.UpdateKey)
	if d.UpdateKey == "" || err != nil || len(b) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(b)
}

// Defaults of the dashboard.
const (
	DefaultListen         = ":8080"
	DefaultConfirmTimeout = 60 * time.Second
)

// Limits of the dashboard.
const (
	minConfirmTimeout = 5 * time.Second
	maxConfirmTimeout = time.Hour
)

func (d *Dashboard) applyDefaults() {
	if d.Listen == "" {
		d.Listen = DefaultListen
	}
	if d.ConfirmTimeout == 0 {
		d.ConfirmTimeout = Duration(DefaultConfirmTimeout)
	}
}

func (v *validator) dashboard() {
	d := &v.c.Dashboard
	if d.Listen != "" {
		host, port, err := net.SplitHostPort(d.Listen)
		n, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case err != nil:
			v.add("dashboard.listen", "%q is not a listen address; want \":8080\" or \"192.168.1.2:8080\"", d.Listen)
		case perr != nil || n == 0:
			v.add("dashboard.listen", "port %q: want a number 1..65535", port)
		case host != "":
			if _, err := netip.ParseAddr(host); err != nil {
				v.add("dashboard.listen", "host %q: want an IP address or nothing (all addresses)", host)
			}
		}
	}
	if t := d.ConfirmTimeout.D(); t != 0 && (t < minConfirmTimeout || t > maxConfirmTimeout) {
		v.add("dashboard.confirmTimeout", "%s out of range %s..%s", d.ConfirmTimeout, Duration(minConfirmTimeout), Duration(maxConfirmTimeout))
	}
	if d.UpdateKey != "" && d.UpdatePublicKey() == nil {
		v.add("dashboard.updateKey", "not an ed25519 public key: want the base64 of its 32 bytes (the .pub file of `firmware keygen`)")
	}
	if p := d.InternetProbe; p != "" {
		if a, err := netip.ParseAddr(p); err == nil && !a.Is4() {
			v.add("dashboard.internetProbe", "%s: the probe pings IPv4; want an IPv4 address or a host name", p)
		} else if err != nil && !isDomain(p) {
			v.add("dashboard.internetProbe", "%q is neither an IPv4 address nor a host name", p)
		}
	}
}
