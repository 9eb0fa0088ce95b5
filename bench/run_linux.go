package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"e1kbox/appliance/dataplane/fastpath"
)

// Tools the harness runs, and the Debian packages that hold them.
var tools = map[string]string{"ip": "iproute2", "nft": "nftables", "ethtool": "ethtool", "sh": "dash"}

// ensureTools checks for the tools and, as root, installs missing ones.
func ensureTools(ctx context.Context, extra map[string]string) error {
	var pkgs []string
	check := func(m map[string]string) {
		for tool, pkg := range m {
			if _, err := exec.LookPath(tool); err != nil {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	check(tools)
	check(extra)
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing tools; install: apt-get install -y %s", strings.Join(pkgs, " "))
	}
	slog.Info("installing missing tools", "packages", pkgs)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// buildAppliance builds the appliance binary into dir.
func buildAppliance(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "appliance")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "e1kbox/appliance")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the appliance: %w: %s", err, lastLines(string(out), 10))
	}
	return bin, nil
}

func hostInfo() HostInfo {
	var h HostInfo
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		h.Kernel = cString(u.Release[:])
	}
	h.BPFJIT = fastpath.ReadKernel().JIT
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

func cString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// benchMain runs the whole benchmark and prints the report.
func benchMain(o *options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, nftables, AF_PACKET)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	extra := map[string]string{}
	if o.profile != "" {
		extra["perf"] = "linux-perf"
	}
	if err := ensureTools(ctx, extra); err != nil {
		return err
	}
	if removed := cleanStale(ctx); len(removed) > 0 {
		slog.Info("removed namespaces of earlier runs", "namespaces", removed)
	}
	rep, err := runBench(ctx, o, os.Stderr)
	if rep != nil {
		var md bytes.Buffer
		if werr := WriteMarkdown(&md, rep); werr != nil {
			return werr
		}
		os.Stdout.Write(md.Bytes())
		if o.out != "" {
			if werr := writeOut(o.out, rep, md.Bytes()); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	return err
}

func writeOut(path string, rep *Report, md []byte) error {
	data := md
	if strings.HasSuffix(path, ".json") {
		var err error
		if data, err = json.MarshalIndent(rep, "", "  "); err != nil {
			return fmt.Errorf("results: %w", err)
		}
		data = append(data, '\n')
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// runBench sets up the namespaces, measures every path and returns the
// report (also when interrupted or partly failed: then with an error).
func runBench(ctx context.Context, o *options, progress io.Writer) (rep *Report, err error) {
	start := time.Now()
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	paths := selectPaths(buildPaths(o.rules, o.placements), o.paths)
	if len(paths) == 0 {
		return nil, errors.New("-paths matches no path")
	}
	tmp, err := os.MkdirTemp("", "e1kbench-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	h := &harness{cpus: cpus, tmp: tmp, flows: o.flows, applianceTune: o.applianceTune, genRing: o.genRing, latencyDump: o.latencyDump, capacity: map[string]float64{}, rx: -1}
	if o.latencyDump != "" {
		if err := os.MkdirAll(o.latencyDump, 0o755); err != nil {
			return nil, fmt.Errorf("-latency-dump: %w", err)
		}
	}
	for _, p := range paths {
		if p.Kind == kindE1kbox {
			if h.appliance = o.appliance; h.appliance == "" {
				fmt.Fprintln(progress, "building the appliance ...")
				if h.appliance, err = buildAppliance(ctx, tmp); err != nil {
					return nil, err
				}
			}
			break
		}
	}
	rep = &Report{Started: start, Host: hostInfo(), Settings: Settings{
		Reps: o.reps, Warmup: o.warmup.String(), Duration: o.duration.String(), CPUWindow: o.cpuWindow.String(),
		Sizes: o.sizes, Rules: o.rules, Flows: o.flows, Rate: o.rate,
		Generator: "Go AF_PACKET generator (sendmmsg of " + strconv.Itoa(genBatch) + " frames from process memory, qdisc bypass), one thread pinned to its CPU",
	}}
	if o.genRing {
		rep.Settings.Generator = "Go AF_PACKET TX-ring generator (tpacket_snd, qdisc bypass), one thread pinned to its CPU"
	}
	rep.Host.CPUs = cpus.String()
	if rep.Host.IdleBusy, err = idleBusy(ctx, time.Second, len(cpus)); err != nil {
		return nil, err
	}

	h.t, err = newTopo(ctx, os.Getpid(), 1)
	if err != nil {
		return nil, err
	}
	h.t.rx = o.rx
	rep.Settings.RxStandIn = o.rx
	defer func() {
		if cerr := h.t.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	if _, err := nsRun(ctx, h.t.box, "test", "-e", "/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		h.brNetfilter = true
		rep.Notes = append(rep.Notes, "br_netfilter is loaded: its bridge-nf-call-{ip,ip6,arp}tables sysctls are set to 0 in the box namespace for every kernel bridge row")
	}

	placements := map[string]string{}
	errs := map[string]string{}
	for _, p := range paths {
		pl, err := placeFor(p, cpus)
		if err != nil {
			errs[p.Name] = err.Error()
			continue
		}
		placements[p.Name] = pl.String()
	}
	cw := window{Warmup: o.warmup, Count: o.cpuWindow}
	tw := window{Warmup: o.warmup, Count: o.duration}
	for r := 1; r <= o.reps && ctx.Err() == nil; r++ {
		busy, err := waitIdle(ctx, o.waitIdle, len(cpus), progress)
		if err != nil {
			break
		}
		rep.Host.RepIdleBusy = append(rep.Host.RepIdleBusy, busy)
		for _, p := range paths {
			if errs[p.Name] != "" || ctx.Err() != nil {
				continue
			}
			samples, err := h.runPath(ctx, p, o, r, tw, cw, progress)
			for i := range samples {
				samples[i].Rep = r
			}
			rep.Samples = append(rep.Samples, samples...)
			if err != nil && ctx.Err() == nil {
				errs[p.Name] = err.Error()
				fmt.Fprintf(progress, "rep %d/%d %s: FAILED: %v\n", r, o.reps, p.Name, err)
			}
		}
	}
	if worst := slices.Max(append(rep.Host.RepIdleBusy, rep.Host.IdleBusy)); worst > idleThreshold {
		rep.Notes = append(rep.Notes, fmt.Sprintf("other load on the machine: up to %.0f%% of all CPUs busy with no traffic (before a repetition: %s); "+
			"it skews the numbers, the CPU table most (see -wait-idle)", 100*worst, busyText(rep.Host.RepIdleBusy)))
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p.Name
	}
	rep.Rows, rep.CPURows = Summarize(rep.Samples, names, o.sizes, kernelName, directName, placements, errs)
	Rebase(rep.Rows, rep.CPURows, baselines(paths))
	rep.LatencyRows, rep.ConnRows = SummarizeLatency(rep.Samples, names)
	rep.Targets = EvalTargets(rep)
	if o.rate > 0 && len(rep.CPURows) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("CPU runs use %dB frames; /proc/stat counts in %d ms units, so a %s window resolves about %.0f ns/pkt. "+
			"Busy time is wall time minus idle: the kernel accounts idle exactly (NO_HZ), while user+nice+system+irq+softirq+steal "+
			"(the tick-sampled column) are sampled at the scheduler tick and miss short bursts between idle periods",
			o.sizes[0], 1000/userHZ, o.cpuWindow, 1e9/userHZ/(o.rate*o.cpuWindow.Seconds())))
	}
	if slices.ContainsFunc(paths, func(p Path) bool { return p.IPv6 }) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("IPv6 rows: UDP/IPv6 from the LAN (%v) to a server beyond the WAN next hop (the sink, %v); frames of at least %d B "+
			"(the smallest UDP/IPv6 frame: Ethernet, IPv6 and UDP headers and the FCS), so their 64 B rows send %d B frames. "+
			"Every flow is answered once by the sink before the measurement, as on the NAT rows, so the kernel's conntrack and e1kbox's IPv6 firewall "+
			"both see them established, and e1kbox's fast path then takes them",
			ipv6GenIP, ipv6Gateway, minFrame6, minFrame6))
	}
	tune := "run with -tune=false so that the harness owns the steering"
	if o.applianceTune {
		tune = "run with -tune=true, the harness restoring its steering after the appliance's tuning"
	}
	rep.Notes = append(rep.Notes, "placement: \"box rx\" is the CPU where b0's receive work runs (the veth's stand-in for a NIC IRQ: "+standIn(o.rx)+"); "+
		"the e1kbox worker is pinned by the appliance from the tuning package's CPU plan ("+tune+"); "+
		"the sink hop is steered off the box's receive CPU: to the generator's CPU, or the worker's when the generator shares the receive CPU; "+
		"the harness's own floating threads (its Go runtime's sysmon and idle threads) are kept off the box's receive CPU during every run, "+
		"so that their wake-ups are not counted as the box's")
	if o.profile != "" && ctx.Err() == nil {
		if perr := h.profile(ctx, o, paths, progress); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	for _, p := range paths {
		if e := errs[p.Name]; e != "" {
			err = errors.Join(err, fmt.Errorf("%s: %s", p.Name, e))
		}
	}
	if ctx.Err() != nil {
		err = errors.Join(err, fmt.Errorf("interrupted: %w", ctx.Err()))
	}
	return rep, err
}

// idleThreshold is the busy fraction (with no traffic) below which the
// machine counts as quiet.
const idleThreshold = 0.10

// waitIdle measures the background load over a second; with limit > 0 it
// repeats until the machine is quiet or limit has passed. It returns the
// last measurement.
func waitIdle(ctx context.Context, limit time.Duration, ncpu int, progress io.Writer) (float64, error) {
	deadline := time.Now().Add(limit)
	for {
		busy, err := idleBusy(ctx, time.Second, ncpu)
		if err != nil || busy <= idleThreshold || limit <= 0 || time.Now().After(deadline) {
			return busy, err
		}
		fmt.Fprintf(progress, "waiting for the machine to be quiet (%.0f%% busy without traffic)\n", 100*busy)
	}
}

// runPath configures one path, measures it at every size (and its CPU
// cost at the first size) and undoes the configuration.
func (h *harness) runPath(ctx context.Context, p Path, o *options, r int, tw, cw window, progress io.Writer) (samples []Sample, err error) {
	pl, err := placeFor(p, h.cpus)
	if err != nil {
		return nil, err
	}
	b, err := h.setup(ctx, p, pl)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := b.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := h.ready(ctx, p, pl, b); err != nil {
		return nil, err
	}
	if p.NAT {
		if err := h.establishChecked(ctx, p, pl, fmt.Sprintf("rep %d/%d %s", r, o.reps, p.Name), progress); err != nil {
			return nil, err
		}
	}
	if st, err := h.warmFast(ctx, p, pl); err != nil {
		return nil, err
	} else if fs := st.FastPath; fs != nil {
		fmt.Fprintf(progress, "rep %d/%d %s: fast path %s holds %d NAT flows, %d pairs, %d microflows, %d IPv6 flows\n", r, o.reps, p.Name,
			fs.Mode, fs.NATFlows, fs.Pairs, fs.Microflows, fs.IPv6Flows)
	}
	if p.WSClients > 0 {
		ws, err := startWSClients(ctx, h.t.box, applianceListen, p.WSClients, 15*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		defer func() {
			msgs := ws.Messages()
			cerr := ws.Close()
			fmt.Fprintf(progress, "rep %d/%d %s: %d stream messages received\n", r, o.reps, p.Name, msgs)
			if msgs < uint64(p.WSClients) && err == nil {
				err = fmt.Errorf("%s: only %d stream messages for %d clients", p.Name, msgs, p.WSClients)
			}
			if cerr != nil && err == nil {
				err = fmt.Errorf("%s: closing the stream clients: %w", p.Name, cerr)
			}
		}()
	}
	capacity := 0.0
	for _, size := range o.sizes {
		s, err := h.measure(ctx, p, pl, size, 0, tw)
		if err != nil {
			return samples, err
		}
		if capacity == 0 {
			capacity = s.PPS
		}
		samples = append(samples, s)
		fmt.Fprintf(progress, "rep %d/%d %-44s %s (offered %s)\n", r, o.reps, RowName(p.Name, size), FormatPPS(s.PPS), FormatPPS(s.Offered))
	}
	if o.rate > 0 {
		s, err := h.measure(ctx, p, pl, o.sizes[0], o.rate, cw)
		if err != nil {
			return samples, err
		}
		samples = append(samples, s)
		fmt.Fprintf(progress, "rep %d/%d %-44s %s at %s: %.0f ns/pkt (tick-sampled %.0f, box %.0f), cpu busy %s, box rx cpu %.0f IPIs/s of %.0f interrupts/s\n", r, o.reps, RowName(p.Name, o.sizes[0]),
			FormatPPS(s.PPS), FormatPPS(o.rate), s.NsPerPacket, s.TickNsPerPacket, s.BoxNsPerPacket, busyText(s.CPUBusy), s.RxIPIs, s.RxIRQs)
	}
	if p.Kind == kindE1kbox && p.FastPath != "off" {
		// Also for IPv6, whose frames the fast path leaves to the rings
		// (the punts say so).
		var st fastState
		if err := h.applianceGet(ctx, "/api/dataplane", &st); err == nil && st.FastPath != nil {
			fmt.Fprintf(progress, "rep %d/%d %s: the fast path forwarded %d frames (%d flows installed, %d evicted); left to the rings: %v\n", r, o.reps, p.Name,
				st.FastPath.Packets, st.FastPath.Installed, st.FastPath.Evicted, st.FastPath.Punts)
		}
	}
	if p.Kind == kindE1kbox && p.IPv6 {
		var st ipv6State
		if err := h.applianceGet(ctx, "/api/dataplane", &st); err != nil {
			return samples, fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := st.check(h.flows); err != nil {
			return samples, fmt.Errorf("%s: %w", p.Name, err)
		}
		fmt.Fprintf(progress, "rep %d/%d %s: IPv6 router: %d connections, gateway %s, actions %v, drops %v\n", r, o.reps, p.Name,
			st.IPv6.Conns, st.IPv6.Gateway, st.IPv6.Actions, st.IPv6.Drops)
	}
	h.capacity[p.Name] = capacity
	if b := latencyBaseline(p.Name); b != p.Name && p.Kind != kindKernel {
		// Both are offered the same rates: the lower capacity's shares.
		// Where the generator sets the rates (both rows marked *), a
		// path's "capacity" is the generator's rate beside it, and the
		// path that costs less gets a higher one: its shares would load
		// the generator and the sink, on the same CPUs, harder.
		if c, ok := h.capacity[b]; ok && c > 0 && c < capacity {
			capacity = c
		}
	}
	lat, err := h.latencyRuns(ctx, p, pl, o, r, capacity, progress)
	samples = append(samples, lat...)
	if err != nil {
		return samples, err
	}
	return samples, b.alive()
}

// latencyRuns runs the latency and connection-rate measurements of p
// (capacity is its throughput at the first size in this repetition, or
// its latency baseline's when that is lower).
func (h *harness) latencyRuns(ctx context.Context, p Path, pl cpuPlace, o *options, r int, capacity float64, progress io.Writer) ([]Sample, error) {
	var out []Sample
	size := o.sizes[0]
	if p.Latency && o.latency && capacity > 0 {
		for _, load := range latencyLoads {
			before := h.fastCounts(ctx, p)
			s, err := h.latency(ctx, p, pl, size, load*capacity, false)
			if err != nil {
				return out, err
			}
			s.Load = load
			out = append(out, s)
			fmt.Fprintf(progress, "rep %d/%d %-44s latency at %.0f%% (%s): p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs (%d samples)%s\n",
				r, o.reps, RowName(p.Name, size), 100*load, FormatPPS(s.Rate), s.P50, s.P99, s.P999, s.Samples, h.fastCounts(ctx, p).since(before, s.Sent))
		}
	}
	if p.ConnRate && o.connRate {
		// Every frame of these opens a connection: the worker forwards
		// them all, so they get the placement of a path whose worker
		// forwards (the sink's CPU stays).
		pl := slowPlace(p, pl, h.cpus)
		s, err := h.latency(ctx, p, pl, size, newFlowRate, true)
		if err != nil {
			return out, err
		}
		out = append(out, s)
		fmt.Fprintf(progress, "rep %d/%d %-44s new flows' first packets: p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs\n",
			r, o.reps, RowName(p.Name, size), s.P50, s.P99, s.P999)
		cs, err := h.connRate(ctx, p, pl, size)
		out = append(out, cs...)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(progress, "rep %d/%d %-44s new connections: %.0f/s with under %.0f%% loss\n", r, o.reps, p.Name, connRateOf(cs), 100*connLoss)
		if p.Kind == kindE1kbox {
			var st struct {
				Drops map[string]uint64 `json:"drops"`
				NAT   map[string]any    `json:"nat"`
			}
			if err := h.applianceGet(ctx, "/api/dataplane", &st); err == nil {
				for k, v := range st.Drops {
					if v == 0 {
						delete(st.Drops, k)
					}
				}
				fmt.Fprintf(progress, "rep %d/%d %s: drops %v, router %v\n", r, o.reps, p.Name, st.Drops, st.NAT)
			}
		}
	}
	return out, nil
}

func busyText(fracs []float64) string {
	parts := make([]string, len(fracs))
	for i, f := range fracs {
		parts[i] = fmt.Sprintf("%.0f%%", 100*f)
	}
	return strings.Join(parts, "/")
}
