package dashboard

import (
	"context"
	"fmt"
	"io"
	"time"

	"e1kbox/appliance/capture"
	"e1kbox/appliance/config"
	"e1kbox/appliance/diag"
	"e1kbox/appliance/system"
	"e1kbox/webui"
)

// The dashboard's own features: diagnostics, packet capture, the NIC
// list, reboot, and the management ports' watcher.

// Tools are the supervisor's implementations of the dashboard's
// diagnostics and admin interfaces (Diagnostics, Capture, NICs, Power).
type Tools struct {
	cfg     func() *config.Config // the running config
	sysNet  string                // /sys/class/net
	gokrazy string                // gokrazy's HTTP unix socket
	// pwFiles are the password files; bootPW keeps the password gokrazy
	// read at boot once the dashboard changed it (gokrazy wants it on its
	// socket until the next boot; /run is a tmpfs, gone at the reboot).
	pwFiles []string
	bootPW  string
}

// NewTools returns the tools for the box: cfg is the running config,
// pwFiles the dashboard's password files.
func NewTools(cfg func() *config.Config, pwFiles []string) *Tools {
	return &Tools{cfg: cfg, sysNet: "/sys/class/net", gokrazy: system.GokrazySocket, pwFiles: pwFiles,
		bootPW: "/run/e1kbox/gokrazy-boot-pw"}
}

func (d *Tools) Sources() []webui.DiagSource {
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
func (d *Tools) checkSource(id string) error {
	for _, s := range d.Sources() {
		if s.ID == id {
			return nil
		}
	}
	return fmt.Errorf("source %q: not one of the box's test sources", id)
}

func (d *Tools) Ping(ctx context.Context, req webui.PingRequest, reply func(webui.PingReply)) (webui.PingSummary, error) {
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

func (d *Tools) Traceroute(ctx context.Context, req webui.TraceRequest, hop func(webui.TraceHop)) error {
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

func (d *Tools) Lookup(ctx context.Context, req webui.LookupRequest) (webui.LookupResult, error) {
	if err := d.checkSource(req.Source); err != nil {
		return webui.LookupResult{}, err
	}
	r, err := diag.Lookup(ctx, diag.LookupOptions{Name: req.Name, Type: req.Type, Server: req.Server, Device: req.Source})
	return webui.LookupResult{Server: r.Server, RCode: r.RCode, RTT: webui.Duration(r.RTT), Answer: r.Answer, Authority: r.Authority}, err
}

func (d *Tools) Capture(ctx context.Context, req webui.CaptureRequest, w io.Writer) (webui.CaptureResult, error) {
	res, err := capture.Run(ctx, capture.Request{Interface: req.Interface,
		Filter:     capture.Filter{Host: req.Host, Proto: req.Proto, Port: req.L4},
		MaxPackets: req.MaxPackets, MaxBytes: req.MaxBytes, Duration: time.Duration(req.Duration), Snaplen: req.Snaplen}, w)
	return webui.CaptureResult{Packets: res.Packets, Bytes: res.Bytes, Ended: res.Ended}, err
}
