package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"e1kbox/appliance/capture"
	"e1kbox/appliance/config"
	"e1kbox/appliance/diag"
	"e1kbox/appliance/mgmtnet"
	"e1kbox/rules"
	"e1kbox/webui"

	"github.com/vishvananda/netlink"
)

// This file adapts the dashboard's own features to webui's interfaces:
// diagnostics, packet capture, the NIC list, reboot and the rule log.

// dashParts are the supervisor's implementations of the dashboard's
// diagnostics and admin interfaces.
type dashParts struct {
	cfg     func() *config.Config // the running config
	sysNet  string                // /sys/class/net
	gokrazy string                // gokrazy's HTTP unix socket
	// pwFiles are the password files; bootPW keeps the password gokrazy
	// read at boot once the dashboard changed it (gokrazy wants it on its
	// socket until the next boot; /run is a tmpfs, gone at the reboot).
	pwFiles []string
	bootPW  string
}

// passwordChanged remembers the password gokrazy booted with.
func (d *dashParts) passwordChanged(old, _ string) {
	if _, err := os.Stat(d.bootPW); err == nil {
		return // changed before: that file has the boot's password
	}
	os.MkdirAll(filepath.Dir(d.bootPW), 0o700)
	if err := webui.WriteFileAtomic(d.bootPW, []byte(old+"\n"), 0o600); err != nil {
		slog.Warn("the password gokrazy booted with is not kept: a reboot from the dashboard fails until the next boot", "err", err)
	}
}

// gokrazyPassword is the password gokrazy runs with.
func (d *dashParts) gokrazyPassword() string {
	for _, f := range append([]string{d.bootPW}, d.pwFiles...) {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

func (d *dashParts) Sources() []webui.DiagSource {
	out := []webui.DiagSource{{ID: "", Label: "the box's routing table"}}
	c := d.cfg()
	if c != nil && c.HostPort != nil {
		out = append(out, webui.DiagSource{ID: c.HostPort.Interface, Label: "host port " + c.HostPort.Interface + " (the box's address on the data side)"})
	}
	for _, n := range d.NICs() {
		if n.Use == "management" {
			out = append(out, webui.DiagSource{ID: n.Name, Label: "management port " + n.Name})
		}
	}
	return out
}

// checkSource allows only the sources offered.
func (d *dashParts) checkSource(id string) error {
	for _, s := range d.Sources() {
		if s.ID == id {
			return nil
		}
	}
	return fmt.Errorf("source %q: not one of the box's test sources", id)
}

func (d *dashParts) Ping(ctx context.Context, req webui.PingRequest, reply func(webui.PingReply)) (webui.PingSummary, error) {
	if err := d.checkSource(req.Source); err != nil {
		return webui.PingSummary{}, err
	}
	sum, err := diag.Ping(ctx, diag.PingOptions{Host: req.Host, Device: req.Source, Count: req.Count, Size: req.Size,
		Interval: time.Duration(req.Interval), Timeout: time.Duration(req.Timeout)}, func(r diag.Reply) {
		reply(webui.PingReply{Seq: r.Seq, From: r.From, Bytes: r.Bytes, TTL: r.TTL, RTT: webui.Duration(r.RTT), Error: r.Err})
	})
	return webui.PingSummary{Target: sum.Target, Sent: sum.Sent, Received: sum.Received,
		Min: webui.Duration(sum.Min), Avg: webui.Duration(sum.Avg), Max: webui.Duration(sum.Max)}, err
}

func (d *dashParts) Traceroute(ctx context.Context, req webui.TraceRequest, hop func(webui.TraceHop)) error {
	if err := d.checkSource(req.Source); err != nil {
		return err
	}
	return diag.Traceroute(ctx, diag.TraceOptions{Host: req.Host, Device: req.Source, MaxHops: req.MaxHops,
		Probes: req.Probes, Timeout: time.Duration(req.Timeout)}, func(h diag.Hop) {
		th := webui.TraceHop{TTL: h.TTL, Addr: h.Addr, Reached: h.Reached}
		for _, r := range h.RTTs {
			th.RTTs = append(th.RTTs, webui.Duration(r))
		}
		hop(th)
	})
}

func (d *dashParts) Lookup(ctx context.Context, req webui.LookupRequest) (webui.LookupResult, error) {
	if err := d.checkSource(req.Source); err != nil {
		return webui.LookupResult{}, err
	}
	r, err := diag.Lookup(ctx, diag.LookupOptions{Name: req.Name, Type: req.Type, Server: req.Server, Device: req.Source})
	return webui.LookupResult{Server: r.Server, RCode: r.RCode, RTT: webui.Duration(r.RTT), Answer: r.Answer, Authority: r.Authority}, err
}

func (d *dashParts) Capture(ctx context.Context, req webui.CaptureRequest, w io.Writer) (webui.CaptureResult, error) {
	res, err := capture.Run(ctx, capture.Request{Interface: req.Interface,
		Filter:     capture.Filter{Host: req.Host, Proto: req.Proto, Port: req.L4},
		MaxPackets: req.MaxPackets, MaxBytes: req.MaxBytes, Duration: time.Duration(req.Duration), Snaplen: req.Snaplen}, w)
	return webui.CaptureResult{Packets: res.Packets, Bytes: res.Bytes, Ended: res.Ended}, err
}

// NICs lists /sys/class/net: driver, MAC, carrier, speed, and what the
// config uses each for.
func (d *dashParts) NICs() []webui.NIC {
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

// Reboot asks gokrazy (over its unix socket, with the password it booted
// with) to stop every service, unmount /perm and reboot.
func (d *dashParts) Reboot() error {
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

// gokrazyPort is the port of gokrazy's web UI (http-port.txt, /perm
// first, as gokrazy reads it).
func gokrazyPort() int {
	for _, f := range []string{"/perm/http-port.txt", "/etc/http-port.txt"} {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return n
			}
		}
	}
	return 80
}

// pollRuleLogs moves the rule `log` action's records (rate-limited in the
// rule set) into the log, as records with source=rule, until ctx ends.
func pollRuleLogs(ctx context.Context, log *slog.Logger, dp *plane) {
	buf := make([]rules.LogRecord, 256)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var lost uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e, err := dp.Engine()
		if err != nil || e.Rules() == nil {
			continue
		}
		set := e.Rules()
		n := set.ReadLogs(buf)
		if n == 0 {
			continue
		}
		names := map[uint16]string{}
		for name, id := range e.Config().PortNames() {
			names[id] = name
		}
		now, enow := time.Now(), e.Now()
		t := set.Table()
		for i := range buf[:n] {
			logRule(ctx, log, &buf[i], t, names, now.Add(-time.Duration(enow-buf[i].Time)))
		}
		if l := set.LogsDropped(); l > lost {
			log.Warn("rule log records lost: the log rings were full", "lost", l-lost)
			lost = l
		}
	}
}

// logRule writes one rule log record: the rule, the verdict, the ports and
// the packet's 5-tuple.
func logRule(ctx context.Context, log *slog.Logger, r *rules.LogRecord, t *rules.Table, names map[uint16]string, at time.Time) {
	k := &r.Key
	rule := "#" + strconv.Itoa(int(r.Rule))
	if t != nil && t.Generation() == r.Table && r.Rule >= 0 && int(r.Rule) < len(t.Rules()) {
		ru := t.Rules()[r.Rule]
		rule += " " + ru.Chain.String() + ": " + ruleText(ru)
	}
	attrs := []slog.Attr{slog.String("source", webui.LogRule), slog.String("rule", rule),
		slog.String("verdict", r.Action.String()), slog.String("chain", k.Chain.String()),
		slog.String("in", names[k.InPort]), slog.String("proto", k.Proto.String())}
	if k.OutPort != 0 || names[k.OutPort] != "" {
		attrs = append(attrs, slog.String("out", names[k.OutPort]))
	}
	var src, dst netip.Addr
	switch k.EtherType {
	case rules.EtherTypeIPv4:
		src, dst = netip.AddrFrom4([4]byte(k.SrcIP[:4])), netip.AddrFrom4([4]byte(k.DstIP[:4]))
	case rules.EtherTypeIPv6:
		src, dst = netip.AddrFrom16(k.SrcIP), netip.AddrFrom16(k.DstIP)
	}
	if src.IsValid() {
		if k.Proto == rules.ProtoTCP || k.Proto == rules.ProtoUDP {
			attrs = append(attrs, slog.String("src", netip.AddrPortFrom(src, k.SrcPort).String()),
				slog.String("dst", netip.AddrPortFrom(dst, k.DstPort).String()))
		} else {
			attrs = append(attrs, slog.String("src", src.String()), slog.String("dst", dst.String()))
		}
	} else {
		attrs = append(attrs, slog.String("src", rules.MAC(k.SrcMAC).String()), slog.String("dst", rules.MAC(k.DstMAC).String()))
	}
	attrs = append(attrs, slog.Int("len", int(r.Bytes)))
	rec := slog.NewRecord(at, slog.LevelInfo, "rule log", 0)
	rec.AddAttrs(attrs...)
	log.Handler().Handle(ctx, rec)
}

// mgmtWatcher keeps the management ports' routes (mgmtnet): every 5 s,
// in the box's network namespace; under gokrazy it has gokrazy's DHCP
// client apply its lease again after a repair.
func mgmtWatcher(log *slog.Logger, d *dashParts) *mgmtnet.Watcher {
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
	if underGokrazy() {
		w.Reapply = func(ctx context.Context) error {
			return mgmtnet.RestartGokrazyDHCP(ctx, d.gokrazy, d.gokrazyPassword())
		}
	}
	return w
}

// netlinkHandle is netlink in the process's network namespace.
var netlinkHandle = &netlink.Handle{}
