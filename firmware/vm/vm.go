// Package vm boots an e1kbox image in QEMU with emulated e1000e NICs.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OVMF firmware files from Debian's ovmf package.
const (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// Options describe one VM.
type Options struct {
	Image string // disk image; used in place (it is the box's disk)
	UEFI  bool   // boot with OVMF instead of SeaBIOS
	// HTTPPort and DashboardPort are the host ports (on 127.0.0.1)
	// forwarded to the guest's gokrazy UI (80) and dashboard (8080).
	// 0 picks a free port.
	HTTPPort, DashboardPort int
	GuestHTTPPort           int // default 80
	GuestDashboardPort      int // default 8080
	// DataTaps names the host tap devices for eth1 and eth2. An empty name
	// leaves that port on a restricted user network (no traffic).
	DataTaps [2]string
	MemoryMB int    // default 1024
	CPUs     int    // default 2
	StateDir string // for OVMF vars; default: next to the image
	// Console receives the serial console (and is kept in a tail buffer).
	Console io.Writer
	// OneTCGThread runs all vCPUs on one host thread (-accel
	// tcg,thread=single) instead of one thread each. Boots take as long;
	// forwarding through the box is slower (docs/dataplane.md, Measured).
	// The functional QEMU tests and `firmware vm` (Flags) use it: with a
	// thread per vCPU, guests very rarely hang (an RCU stall on a
	// spinlock no CPU holds) or panic early in a boot (a cross-vCPU
	// code-patching race, an int3 oops in sched_clock_cpu), see qemu-test.
	OneTCGThread bool
	// CPU is QEMU's CPU model; default "qemu64". TCG with -cpu max and
	// two vCPUs hung early in some boots (docs/dataplane.md, QEMU tests).
	CPU string
}

// VM is a running QEMU.
type VM struct {
	Opts    Options
	cmd     *exec.Cmd
	tail    *tailBuffer
	done    chan struct{}
	waitErr error
	monitor string // QEMU's human monitor socket (see Monitor)
	events  events // from QEMU's QMP socket (see WatchdogFired)
}

// Start launches QEMU.
func Start(ctx context.Context, opts Options) (*VM, error) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errors.New("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
	}
	opts.defaults()
	for _, p := range []*int{&opts.HTTPPort, &opts.DashboardPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
	}
	if _, err := os.Stat(opts.Image); err != nil {
		return nil, fmt.Errorf("disk image: %w", err)
	}
	var vars string
	if opts.UEFI {
		if vars, err = opts.ovmfVars(); err != nil {
			return nil, err
		}
	}
	monDir, err := os.MkdirTemp("", "e1kvm")
	if err != nil {
		return nil, err
	}
	monitor, qmp := filepath.Join(monDir, "monitor.sock"), filepath.Join(monDir, "qmp.sock")
	cmd := exec.CommandContext(ctx, qemu, opts.args(monitor, qmp, vars)...)
	now := time.Now()
	v := &VM{Opts: opts, cmd: cmd, tail: &tailBuffer{max: 512 << 10, start: now}, done: make(chan struct{}), monitor: monitor,
		events: events{start: now}}
	var out io.Writer = v.tail
	if opts.Console != nil {
		out = io.MultiWriter(v.tail, opts.Console)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		os.RemoveAll(monDir)
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	exited, followed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(followed)
		v.events.follow(qmp, exited)
	}()
	go func() {
		v.waitErr = cmd.Wait()
		close(exited)
		<-followed
		os.RemoveAll(monDir)
		close(v.done)
	}()
	return v, nil
}

// defaults fills the options left zero.
func (o *Options) defaults() {
	if o.MemoryMB == 0 {
		o.MemoryMB = 1024
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.CPU == "" {
		o.CPU = "qemu64"
	}
	if o.GuestHTTPPort == 0 {
		o.GuestHTTPPort = 80
	}
	if o.GuestDashboardPort == 0 {
		o.GuestDashboardPort = 8080
	}
}

// ovmfVars returns the VM's own copy of OVMF's variable store, made on
// first use next to the image (or in StateDir).
func (o *Options) ovmfVars() (string, error) {
	if _, err := os.Stat(OVMFCode); err != nil {
		return "", errors.New("OVMF not found (apt-get install ovmf)")
	}
	dir := o.StateDir
	if dir == "" {
		dir = filepath.Dir(o.Image)
	}
	vars := filepath.Join(dir, filepath.Base(o.Image)+".ovmf-vars.fd")
	if _, err := os.Stat(vars); err == nil {
		return vars, nil
	}
	b, err := os.ReadFile(OVMFVars)
	if err != nil {
		return "", fmt.Errorf("OVMF variables: %w", err)
	}
	if err := os.WriteFile(vars, b, 0o644); err != nil {
		return "", fmt.Errorf("OVMF variables: %w", err)
	}
	return vars, nil
}

// args is QEMU's command line for the options (defaults filled, ports
// chosen), with its human monitor on the unix socket monitor, QMP on the
// unix socket qmp and, for UEFI, the OVMF variable store vars.
func (o *Options) args(monitor, qmp, vars string) []string {
	accel := "tcg"
	if o.OneTCGThread {
		accel = "tcg,thread=single"
	}
	args := []string{
		"-name", "e1kbox",
		// No default devices: in particular no empty CD-ROM, which gokrazy
		// probes on every status request (rootdev opens every block
		// device) and which, probed often under TCG, left requests hanging.
		"-nodefaults",
		"-machine", "pc", "-accel", accel, "-cpu", o.CPU,
		"-smp", strconv.Itoa(o.CPUs), "-m", strconv.Itoa(o.MemoryMB),
		"-display", "none", "-monitor", "unix:" + monitor + ",server,nowait", "-qmp", "unix:" + qmp + ",server,nowait",
		"-serial", "stdio",
		"-drive", "file=" + o.Image + ",format=raw,if=ide,index=0,media=disk,cache=unsafe",
		"-netdev", fmt.Sprintf("user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:%d,hostfwd=tcp:127.0.0.1:%d-:%d",
			o.HTTPPort, o.GuestHTTPPort, o.DashboardPort, o.GuestDashboardPort),
		"-device", "e1000e,netdev=mgmt,mac=52:54:00:e1:00:00",
	}
	for i, tap := range o.DataTaps {
		id := fmt.Sprintf("data%d", i+1)
		if tap != "" {
			args = append(args, "-netdev", "tap,id="+id+",ifname="+tap+",script=no,downscript=no")
		} else {
			args = append(args, "-netdev", "user,id="+id+",restrict=on")
		}
		args = append(args, "-device", "e1000e,netdev="+id+",mac="+DataMAC(i))
	}
	// A hardware watchdog, as a real box has (iTCO): gokrazy's init runs
	// it from boot; it resets the machine (QEMU's default action) when a
	// kernel hangs, also an update's kexec test boot (firmware/watchdog).
	// After the NICs, so that their PCI slots stay where they were.
	args = append(args, "-device", "i6300esb")
	if o.UEFI {
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	}
	return args
}

// HTTPAddr is the host address of the guest's gokrazy UI.
func (v *VM) HTTPAddr() string { return fmt.Sprintf("127.0.0.1:%d", v.Opts.HTTPPort) }

// DashboardAddr is the host address of the guest's dashboard.
func (v *VM) DashboardAddr() string { return fmt.Sprintf("127.0.0.1:%d", v.Opts.DashboardPort) }

// Done is closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Err is QEMU's exit error once Done is closed.
func (v *VM) Err() error { return v.waitErr }

// Kill stops QEMU at once, like pulling the power cord.
func (v *VM) Kill() {
	if v.cmd.Process != nil {
		v.cmd.Process.Kill()
	}
	<-v.done
}

// Console returns the last part of the serial console.
func (v *VM) Console() string { return v.tail.String() }

// ConsoleContains reports whether the retained console output contains s.
func (v *VM) ConsoleContains(s string) bool { return strings.Contains(v.tail.String(), s) }

// FreePort returns a currently unused TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Quiet is how long the console has been silent (since QEMU started, if
// it never printed). A box that is silent for minutes while unreachable has
// hung.
func (v *VM) Quiet() time.Duration { return v.tail.quiet() }

// Timeline lists the console lines that mark a boot's milestones (kernel
// start, init, reboots, kexec, panics, the test-boot guard), each with the
// host time it arrived at, since QEMU started. A failed test prints it: it
// tells a box that was slow from one that hung or rebooted twice.
func (v *VM) Timeline() string { return v.tail.timeline() }

// Event is a milestone line of the console and the host time it arrived
// at, since QEMU started.
type Event struct {
	At   time.Duration
	Line string
}

// Events are the milestones Timeline lists (the last 400).
func (v *VM) Events() []Event { return v.tail.eventList() }

// milestones are the console lines Timeline keeps.
var milestones = []string{
	"Command line:", "Run /gokrazy/init", "e1kbox init:", "Synchronous reboot requested",
	"kexec_core:", "reboot: ", "Kernel panic", "Oops", "BUG:", "hardware watchdog", "rcu_sched",
	"hung_task", "soft lockup", "now listening on /run/gokrazy-http.sock", "e1kbox update:", "NIC Link is Up",
	"Waiting for root device", "i6300ESB timer",
}

type tailBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	start   time.Time
	partial []byte    // the console line being received
	events  []Event   // at most maxEvents (oldest dropped)
	last    time.Time // when the console last printed
}

const maxEvents = 400

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scan(p)
	t.last = time.Now()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// scan keeps the milestone lines of p (with t.mu held).
func (t *tailBuffer) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(t.partial) < 4096 {
				t.partial = append(t.partial, p...)
			}
			return
		}
		line := p[:i]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		p = p[i+1:]
		s := strings.TrimRight(string(bytes.ToValidUTF8(line, nil)), "\r")
		for _, m := range milestones {
			if strings.Contains(s, m) {
				if len(s) > 160 {
					s = s[:160] + "…"
				}
				if len(t.events) == maxEvents {
					t.events = append(t.events[:0], t.events[1:]...)
				}
				t.events = append(t.events, Event{At: time.Since(t.start), Line: s})
				break
			}
		}
	}
}

func (t *tailBuffer) quiet() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last.IsZero() {
		return time.Since(t.start)
	}
	return time.Since(t.last)
}

func (t *tailBuffer) timeline() string {
	var lines []string
	for _, e := range t.eventList() {
		lines = append(lines, fmt.Sprintf("%+7.1fs %s", e.At.Seconds(), e.Line))
	}
	return strings.Join(lines, "\n")
}

func (t *tailBuffer) eventList() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, nil))
}
