package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/pppoeac"
	"e1kbox/internal/vlanpeer"
)

// box is a configured path; Close undoes the configuration.
type box struct {
	close func() error
	// appliance is the running e1kbox process (e1kbox paths only).
	appliance *exec.Cmd
	logPath   string
}

func (b *box) Close() error {
	if b == nil || b.close == nil {
		return nil
	}
	return b.close()
}

// steer sets the receive CPUs of a placement: b0's receive work (by the
// topo's stand-in: RPS, or its NAPI kthreads' affinity) to the box's
// receive CPU, the sink veths' (RPS) to the sink CPU.
func (t *topo) steer(ctx context.Context, pl cpuPlace) error {
	switch t.rx {
	case rxNAPI:
		if err := setRPS(ctx, t.box, "b0", -1); err != nil {
			return err
		}
		if pl.RX < 0 {
			break // no box on the path (the direct row): b0 carries nothing
		}
		pids, err := t.napiOn(ctx)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			var set unix.CPUSet
			set.Set(pl.RX)
			if err := unix.SchedSetaffinity(pid, &set); err != nil {
				return fmt.Errorf("pin napi kthread %d to cpu %d: %w", pid, pl.RX, err)
			}
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: rxNAPIPrio}
			if err := unix.SchedSetAttr(pid, &attr, 0); err != nil {
				return fmt.Errorf("napi kthread %d to SCHED_FIFO: %w", pid, err)
			}
		}
	default:
		if err := setRPS(ctx, t.box, "b0", pl.RX); err != nil {
			return err
		}
	}
	for _, s := range []string{"s0", "s1"} {
		if err := setRPS(ctx, t.sink, s, pl.Sink); err != nil {
			return err
		}
	}
	return nil
}

// setup configures path p in the box namespace with placement pl.
func (h *harness) setup(ctx context.Context, p Path, pl cpuPlace) (*box, error) {
	if err := h.t.steer(ctx, pl); err != nil {
		return nil, err
	}
	if !p.NAT {
		return h.setupPath(ctx, p)
	}
	if err := h.t.natSink(ctx, true); err != nil {
		return nil, err
	}
	undo := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return h.t.natSink(ctx, false)
	}
	if p.WANVLAN != 0 {
		peer, err := sinkVLAN(h.t.sink, p.WANVLAN)
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		undoNAT := undo
		undo = func() error { return errors.Join(peer.Close(), undoNAT()) }
	}
	if p.WANPPPoE {
		ac, err := sinkAC(h.t.sink)
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		undoAC := undo
		undo = func() error { return errors.Join(ac.Close(), undoAC()) }
	}
	if p.IPv6 {
		undo4 := undo
		undo = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			return errors.Join(h.t.ipv6Ends(ctx, p, false), undo4())
		}
		if err := h.t.ipv6Ends(ctx, p, true); err != nil {
			return nil, errors.Join(err, undo())
		}
	}
	b, err := h.setupPath(ctx, p)
	if err != nil {
		return nil, errors.Join(err, undo())
	}
	inner := b.close
	b.close = func() error {
		var err error
		if inner != nil {
			err = inner()
		}
		return errors.Join(err, undo())
	}
	return b, nil
}

func (h *harness) setupPath(ctx context.Context, p Path) (*box, error) {
	switch p.Kind {
	case kindDirect:
		return &box{}, nil
	case kindKernel:
		if p.IPv6 {
			return h.kernelIPv6(ctx, p)
		}
		if p.NAT {
			return h.kernelNAT(ctx, p)
		}
		return h.kernelBridge(ctx, p)
	case kindE1kbox:
		return h.e1kbox(ctx, p)
	}
	return nil, fmt.Errorf("path %q: unknown kind %d", p.Name, p.Kind)
}

// kernelBox readies the box namespace for a kernel path: it runs the setup
// commands there and loads the path's nftables rules, if any. The box's
// Close runs every teardown command, whatever fails, and a failed setup
// is torn down.
func (h *harness) kernelBox(ctx context.Context, p Path, setup, teardown [][]string) (*box, error) {
	ns := h.t.box
	b := &box{close: func() error {
		var errs []error
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, s := range teardown {
			if _, err := nsRun(ctx, ns, s...); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}}
	for _, s := range setup {
		if _, err := nsRun(ctx, ns, s...); err != nil {
			b.Close()
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	if script := nftRules(p); script != "" {
		if err := nftLoad(ctx, ns, script); err != nil {
			b.Close()
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return b, nil
}

// kernelBridge builds br0 over b0 and b1 with br_netfilter's hooks off
// (when the module is there) and loads the path's nftables rules into a
// bridge-family forward chain.
func (h *harness) kernelBridge(ctx context.Context, p Path) (*box, error) {
	setup := [][]string{
		{"ip", "link", "add", "br0", "type", "bridge"},
		{"ip", "link", "set", "b0", "master", "br0"},
		{"ip", "link", "set", "b1", "master", "br0"},
		{"ip", "link", "set", "br0", "up"},
	}
	if h.brNetfilter {
		setup = append(setup, []string{"sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0",
			"net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"})
	}
	return h.kernelBox(ctx, p, setup, [][]string{
		{"nft", "flush", "ruleset"},
		{"ip", "link", "del", "br0"},
	})
}

// kernelNAT makes the box namespace a router between b0 (LAN) and b1
// (WAN) with an nftables masquerade rule (and the path's forward rules).
// The gateway's neighbour entry is static: the sink answers no ARP
// unless the sink's ARP is on (natSink), and the kernel path does not
// need it.
func (h *harness) kernelNAT(ctx context.Context, p Path) (*box, error) {
	return h.kernelBox(ctx, p, [][]string{
		{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
			"net.ipv4.conf." + natLANPort + ".rp_filter=0", "net.ipv4.conf." + natWANPort + ".rp_filter=0"},
		{"ip", "addr", "add", natLAN.String(), "dev", natLANPort},
		{"ip", "addr", "add", natWAN.String(), "dev", natWANPort},
		{"ip", "route", "add", "default", "via", natGatewayIP.String(), "dev", natWANPort},
		{"ip", "neigh", "replace", natGatewayIP.String(), "lladdr", macS0.String(), "dev", natWANPort, "nud", "permanent"},
	}, [][]string{
		{"nft", "flush", "ruleset"},
		{"sysctl", "-q", "-w", "net.ipv4.ip_forward=0"},
		{"ip", "route", "flush", "table", "main"},
		{"ip", "neigh", "flush", "dev", natWANPort},
		{"ip", "addr", "flush", "dev", natLANPort},
		{"ip", "addr", "flush", "dev", natWANPort},
	})
}

// kernelIPv6 makes the box namespace an IPv6 router between b0 (LAN,
// ipv6RouterIP) and b1 (WAN, its link-local address; the default route
// via the sink's link-local address) with the stateful nftables ruleset.
// The neighbours (the sink as the gateway, the generator for the
// replies) are static, as the IPv4 kernel NAT's gateway is.
func (h *harness) kernelIPv6(ctx context.Context, p Path) (*box, error) {
	return h.kernelBox(ctx, p, [][]string{
		{"sysctl", "-q", "-w", "net.ipv6.conf." + natLANPort + ".accept_dad=0", "net.ipv6.conf." + natWANPort + ".accept_dad=0",
			"net.ipv6.conf." + natLANPort + ".disable_ipv6=0", "net.ipv6.conf." + natWANPort + ".disable_ipv6=0",
			"net.ipv6.conf.all.forwarding=1"},
		{"ip", "-6", "addr", "add", ipv6RouterIP.String(), "dev", natLANPort, "nodad"},
		{"ip", "-6", "neigh", "replace", ipv6Gateway.String(), "lladdr", macS0.String(), "dev", natWANPort, "nud", "permanent"},
		{"ip", "-6", "neigh", "replace", ipv6GenIP.String(), "lladdr", macG0.String(), "dev", natLANPort, "nud", "permanent"},
		{"ip", "-6", "route", "add", "default", "via", ipv6Gateway.String(), "dev", natWANPort},
	}, [][]string{
		{"nft", "flush", "ruleset"},
		// Turning IPv6 off drops the ports' addresses, routes and
		// neighbours.
		{"sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=0", "net.ipv6.conf." + natLANPort + ".disable_ipv6=1",
			"net.ipv6.conf." + natWANPort + ".disable_ipv6=1"},
	})
}

// ipv6Ends turns IPv6 on (off: off again) where the IPv6 paths need the
// kernel's: on the generator's g0 with ipv6GenIP (it answers the
// appliance's neighbour solicitations for the replies of establish), on
// the sink's s0 (its link-local address is the WAN next hop, and its
// counting chain lets neighbour discovery through to the stack so that
// it answers the appliance's), and, for the appliance, for the box
// namespace's new interfaces: the host port's TAP, where its router
// advertisement daemon runs (b0 and b1 keep IPv6 off: the appliance
// answers on them).
func (t *topo) ipv6Ends(ctx context.Context, p Path, on bool) error {
	v := map[bool]string{true: "0", false: "1"}[on]
	var errs []error
	runs := [][]string{
		{t.gen, "sysctl", "-q", "-w", "net.ipv6.conf.g0.accept_dad=0", "net.ipv6.conf.g0.disable_ipv6=" + v},
		{t.sink, "sysctl", "-q", "-w", "net.ipv6.conf.s0.accept_dad=0", "net.ipv6.conf.s0.disable_ipv6=" + v},
	}
	if p.Kind == kindE1kbox {
		runs = append(runs, []string{t.box, "sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.default.disable_ipv6=" + v})
	}
	if on {
		runs = append(runs, []string{t.gen, "ip", "-6", "addr", "add", netip.PrefixFrom(ipv6GenIP, 64).String(), "dev", "g0", "nodad"})
	}
	for _, r := range runs {
		if _, err := nsRun(ctx, r[0], r[1:]...); err != nil {
			errs = append(errs, fmt.Errorf("ipv6: %w", err))
		}
	}
	script := "flush chain netdev sink in0\nadd rule netdev sink in0 ether type arp accept\n"
	if on {
		script += "add rule netdev sink in0 meta protocol ip6 icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n"
	}
	script += "add rule netdev sink in0 counter name \"rx\" drop\n"
	if err := nftLoad(ctx, t.sink, script); err != nil {
		errs = append(errs, fmt.Errorf("ipv6 sink: %w", err))
	}
	return errors.Join(errs...)
}

// natSink makes the sink the NAT paths' gateway: s0 gets the gateway
// address and its counting chain lets ARP through to the stack (so that
// the appliance can resolve the gateway); off undoes it.
func (t *topo) natSink(ctx context.Context, on bool) error {
	script := "flush chain netdev sink in0\n"
	if on {
		script += "add rule netdev sink in0 ether type arp accept\n"
	}
	script += "add rule netdev sink in0 counter name \"rx\" drop\n"
	if err := nftLoad(ctx, t.sink, script); err != nil {
		return fmt.Errorf("nat sink: %w", err)
	}
	args := []string{"ip", "addr", "flush", "dev", "s0"}
	if on {
		args = []string{"ip", "addr", "replace", netip.PrefixFrom(natGatewayIP, natWAN.Bits()).String(), "dev", "s0"}
	}
	if _, err := nsRun(ctx, t.sink, args...); err != nil {
		return fmt.Errorf("nat sink: %w", err)
	}
	return nil
}

// e1kbox starts the appliance binary in the box namespace in bridge mode
// over b0 and b1. By default it runs with -tune=false: the harness owns
// the veths' steering, and the appliance still pins its workers by the
// placement's CPU plan. With applianceTune it applies its tuning plan
// (which turns RPS off), and the harness steers again once it forwards.
func (h *harness) e1kbox(ctx context.Context, p Path) (*box, error) {
	if h.appliance == "" {
		return nil, errors.New("no appliance binary")
	}
	cfg, err := applianceConfig(p)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(h.tmp, "appliance-*")
	if err != nil {
		return nil, fmt.Errorf("e1kbox: %w", err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("e1kbox: %w", err)
	}
	pwPath := filepath.Join(dir, "gokr-pw.txt")
	if err := os.WriteFile(pwPath, []byte(dashboardPassword), 0o600); err != nil {
		return nil, fmt.Errorf("e1kbox: %w", err)
	}
	logPath := filepath.Join(dir, "appliance.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("e1kbox: %w", err)
	}
	cmd := exec.Command("ip", "netns", "exec", h.t.box, h.appliance,
		"-config", cfgPath, "-factory", filepath.Join(dir, "factory.json"),
		"-state", filepath.Join(dir, "state"), "-listen", applianceListen, "-password-files", pwPath, "-tune="+strconv.FormatBool(h.applianceTune),
		"-rx-ring="+p.RxRing)
	cmd.Stdout, cmd.Stderr = logf, logf
	// No Pdeathsig: it fires when the forking OS thread exits, and inNetns
	// ends threads. Close (also run on ^C) stops the process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("e1kbox: start %s: %w", h.appliance, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	b := &box{appliance: cmd, logPath: logPath}
	h.appPID.Store(int64(cmd.Process.Pid))
	b.close = func() error {
		h.appPID.Store(0)
		select {
		case err := <-exited:
			return fmt.Errorf("e1kbox exited early: %v: %s", err, tail(logPath, 5))
		default:
		}
		// ip netns exec execs the appliance, so the PID is the appliance's.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("e1kbox did not stop within 5 s of SIGTERM (killed): %s", tail(logPath, 5))
		}
	}
	// Let the process come up (or fail fast on a bad flag).
	select {
	case err := <-exited:
		exited <- err
		return nil, fmt.Errorf("e1kbox exited at start: %v: %s", err, tail(logPath, 10))
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
	return b, nil
}

// alive reports an error if the appliance has exited.
func (b *box) alive() error {
	if b.appliance == nil {
		return nil
	}
	if err := b.appliance.Process.Signal(syscall.Signal(0)); err != nil {
		return fmt.Errorf("e1kbox is not running: %s", tail(b.logPath, 10))
	}
	return nil
}

// tail returns the last n lines of a log file joined by " | "; from a Go
// crash, the panic line and the n lines after it instead.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return logTail(string(b), n)
}

// benchSession is the PPPoE session of the paths with WANPPPoE.
const benchSession = 0x0b0e

// sinkAC makes the sink's s0 the access concentrator of the paths with
// WANPPPoE: it hands the box natWAN's address with natGatewayIP as the
// peer in session benchSession.
func sinkAC(sink string) (*pppoeac.Server, error) {
	var s *pppoeac.Server
	err := inNetns(sink, func() error {
		var err error
		s, err = pppoeac.Serve("s0", pppoeac.Config{MAC: [6]byte(macS0), Name: "e1kbench", Session: benchSession,
			Addr: natWAN.Addr().As4(), Peer: natGatewayIP.As4(), DNS: natGatewayIP.As4()})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sink as PPPoE AC: %w", err)
	}
	return s, nil
}

// sinkVLAN makes the sink's s0 speak VLAN vid (the WAN link of a path with
// WANVLAN): it tags what the sink sends and takes only that VLAN's frames,
// untagged.
func sinkVLAN(sink string, vid uint16) (*vlanpeer.Peer, error) {
	var peer *vlanpeer.Peer
	err := inNetns(sink, func() error {
		var err error
		peer, err = vlanpeer.Attach("s0", vid, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sink on VLAN %d: %w", vid, err)
	}
	return peer, nil
}
