package dashboard

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
	"e1kbox/appliance/mgmtnet"
	"e1kbox/appliance/system"
	"e1kbox/webui"
)

// The box's NICs and what the config uses each for, and the watcher of the
// management ports among them.

// NICs lists /sys/class/net: driver, MAC, carrier, speed, and what the
// config uses each for.
func (d *Tools) NICs() []webui.NIC {
	ents, err := os.ReadDir(d.sysNet)
	if err != nil {
		return nil
	}
	c := d.cfg()
	var out []webui.NIC
	for _, e := range ents {
		name := e.Name()
		if name == "lo" {
			continue
		}
		dir := filepath.Join(d.sysNet, name)
		n := webui.NIC{Name: name, MAC: readSys(dir, "address"), Up: readSys(dir, "carrier") == "1"}
		if link, err := os.Readlink(filepath.Join(dir, "device", "driver")); err == nil {
			n.Driver = filepath.Base(link)
		} else if _, err := os.Stat(filepath.Join(dir, "tun_flags")); err == nil {
			n.Driver = "tun"
		}
		if s, err := strconv.Atoi(readSys(dir, "speed")); err == nil && s > 0 && n.Up {
			n.SpeedMbps = s
		}
		n.Use, n.Port = nicUse(c, name, n.Driver)
		out = append(out, n)
	}
	return out
}

// nicUse says what the config uses an interface for; a physical NIC the
// config does not use counts as a management port.
func nicUse(c *config.Config, name, driver string) (use, port string) {
	if c != nil {
		for _, p := range c.Ports {
			if p.Interface == name {
				return "data", p.Name
			}
		}
		if c.HostPort != nil && c.HostPort.Interface == name {
			return "host", c.HostPort.Name
		}
	}
	if driver != "" && driver != "tun" && driver != "veth" && driver != "bridge" {
		return "management", ""
	}
	return "", ""
}

func readSys(dir, file string) string {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// MgmtWatcher keeps the management ports' routes (mgmtnet): every 5 s,
// in the box's network namespace; under gokrazy it has gokrazy's DHCP
// client apply its lease again after a repair.
func MgmtWatcher(log *slog.Logger, d *Tools) *mgmtnet.Watcher {
	w := &mgmtnet.Watcher{Interval: 5 * time.Second, Log: log,
		Links: func() []string {
			var out []string
			for _, n := range d.NICs() {
				if n.Use == "management" {
					out = append(out, n.Name)
				}
			}
			return out
		},
		Check: func(name string) (mgmtnet.Repair, error) { return mgmtnet.CheckLink(netlinkHandle, name) },
	}
	if system.UnderGokrazy() {
		w.Reapply = func(ctx context.Context) error {
			return mgmtnet.RestartGokrazyDHCP(ctx, d.gokrazy, d.gokrazyPassword())
		}
	}
	return w
}

// netlinkHandle is netlink in the process's network namespace.
var netlinkHandle = &netlink.Handle{}
