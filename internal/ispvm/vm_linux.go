package ispvm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// BootTimeout bounds a boot to a running pppoe-server (measured ~8 s under TCG).
const BootTimeout = 60 * time.Second

// Event is a line "ISPVM-EVENT kind args..." the VM printed on its console:
// ready IF (pppoe-server runs on IF), up IF LOCAL REMOTE and down … (IPCP),
// up6 IF … and down6 … (IPv6CP; the DHCPv6 server runs on IF), fail WHAT.
type Event struct {
	Kind string
	Args []string
	At   time.Time
}

// VM is a running ISP VM.
type VM struct {
	Config Config
	Image  *Image
	// BootTime is from starting QEMU to pppoe-server running and the
	// control port open.
	BootTime time.Duration

	cmd     *exec.Cmd
	exited  chan struct{}
	console strings.Builder // guarded by mu

	mu     sync.Mutex
	cond   *sync.Cond
	events []Event
	seen   map[string]int // WaitEvent's cursor per kind

	ctlMu sync.Mutex
	ctl   net.Conn
	ctlR  *bufio.Reader
}

// Needs are what Start needs on the host.
var Needs = []string{"root", "qemu-system-x86_64", "apt-get", "dpkg-deb", "xz", "ip", "/dev/net/tun"}

// Start builds the image (cached in DefaultCacheDir), boots the VM on
// cfg.Tap and returns once pppoe-server runs. The VM is killed at the
// test's cleanup; its console is logged if the test failed. A missing
// tool or root skips the test, or fails it under CI=true.
func Start(t testing.TB, cfg Config) *VM {
	t.Helper()
	testenv.Require(t, Needs...)
	img, err := Build(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Boot(img, cfg, t.TempDir())
	if vm != nil {
		t.Cleanup(func() {
			vm.Stop()
			if t.Failed() {
				t.Logf("ISP VM console:\n%s", vm.Console())
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// Boot boots the VM from img with its run files in dir and waits until
// pppoe-server runs. On an error after QEMU started it returns the VM too
// (for its console); the caller stops it.
func Boot(img *Image, cfg Config, dir string) (*VM, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	initrd := filepath.Join(dir, "initrd")
	if err := writeInitrd(initrd, img.Initrd, &cfg); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "ctl.sock")
	if len(sock) > 100 { // a unix socket's path has at most 107 bytes
		short, err := os.MkdirTemp("", "ispvm-")
		if err != nil {
			return nil, fmt.Errorf("ispvm: %w", err)
		}
		defer os.RemoveAll(short) // QEMU has connected by then, or failed
		sock = filepath.Join(short, "ctl.sock")
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ispvm: control socket: %w", err)
	}
	defer ln.Close()
	args := []string{"qemu-system-x86_64", "-M", "pc,accel=tcg", "-m", "256", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", img.Kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1 loglevel=3",
		"-netdev", "tap,id=wan,ifname=" + cfg.Tap + ",script=no,downscript=no",
		"-device", "e1000,netdev=wan,mac=" + cfg.MAC,
		"-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
		"-chardev", "socket,id=ctl,path=" + sock, "-serial", "chardev:ctl"}
	if cfg.Netns != "" {
		args = append([]string{"ip", "netns", "exec", cfg.Netns}, args...)
	}
	vm := &VM{Config: cfg, Image: img, seen: map[string]int{}, exited: make(chan struct{})}
	vm.cond = sync.NewCond(&vm.mu)
	vm.cmd = exec.Command(args[0], args[1:]...)
	vm.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := vm.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ispvm: %w", err)
	}
	vm.cmd.Stderr = vm.cmd.Stdout
	start := time.Now()
	if err := vm.startPinned(); err != nil {
		return nil, fmt.Errorf("ispvm: starting QEMU: %w", err)
	}
	go vm.readConsole(out)
	type accept struct {
		c   net.Conn
		err error
	}
	accepted := make(chan accept, 1)
	go func() {
		c, err := ln.Accept()
		accepted <- accept{c, err}
	}()
	abandon := func() { // closes a connection accepted too late
		go func() {
			if a := <-accepted; a.c != nil {
				a.c.Close()
			}
		}()
	}
	select {
	case a := <-accepted:
		if a.err != nil {
			return vm, fmt.Errorf("ispvm: QEMU's control connection: %w", a.err)
		}
		vm.ctl, vm.ctlR = a.c, bufio.NewReader(a.c)
	case <-vm.exited:
		abandon()
		return vm, fmt.Errorf("ispvm: QEMU exited: %s", vm.Console())
	case <-time.After(10 * time.Second):
		abandon()
		return vm, fmt.Errorf("ispvm: QEMU did not connect its control port")
	}
	ev, err := vm.waitKinds(BootTimeout, "ready", "fail")
	if err != nil {
		return vm, err
	}
	if ev.Kind == "fail" {
		return vm, fmt.Errorf("ispvm: the VM failed: %s", strings.Join(ev.Args, " "))
	}
	if err := vm.ctlReady(10 * time.Second); err != nil {
		return vm, err
	}
	vm.BootTime = time.Since(start)
	return vm, nil
}

// startPinned starts QEMU from a goroutine locked to its OS thread until
// QEMU exits. Pdeathsig fires when the thread that forked the child ends,
// not the process: Go ends a thread whose goroutine exits locked to it (a
// dataplane worker stopping at a port restart, a netns helper), and a
// QEMU forked from such a thread was killed with it, the tap losing its
// carrier mid-test (TestEnginePPPoESwitchOn: 1 in ~5 runs before).
func (vm *VM) startPinned() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := vm.cmd.Start()
		started <- err
		if err == nil {
			<-vm.exited
		}
	}()
	return <-started
}

// writeInitrd writes the base initramfs with the run's archive appended.
func writeInitrd(path, base string, cfg *Config) error {
	run, err := runArchive(cfg)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(base)
	if err != nil {
		return fmt.Errorf("ispvm: %w", err)
	}
	if err := os.WriteFile(path, append(b, run...), 0o644); err != nil {
		return fmt.Errorf("ispvm: %w", err)
	}
	return nil
}

func (vm *VM) readConsole(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := strings.TrimRight(s.Text(), "\r")
		if vm.Config.Console != nil {
			fmt.Fprintln(vm.Config.Console, line)
		}
		vm.mu.Lock()
		vm.console.WriteString(line + "\n")
		if ev, ok := parseEvent(line); ok {
			ev.At = time.Now()
			vm.events = append(vm.events, ev)
		}
		vm.cond.Broadcast()
		vm.mu.Unlock()
	}
	err := vm.cmd.Wait() // how it ended, in the console (killed: see startPinned)
	if err == nil {
		err = errors.New("exit status 0")
	}
	vm.mu.Lock()
	fmt.Fprintf(&vm.console, "ispvm: QEMU exited: %v\n", err)
	close(vm.exited)
	vm.cond.Broadcast()
	vm.mu.Unlock()
}

// parseEvent parses a console line holding "ISPVM-EVENT kind args...".
func parseEvent(line string) (Event, bool) {
	i := strings.Index(line, "ISPVM-EVENT ")
	if i < 0 {
		return Event{}, false
	}
	f := strings.Fields(line[i+len("ISPVM-EVENT "):])
	if len(f) == 0 {
		return Event{}, false
	}
	return Event{Kind: f[0], Args: f[1:]}, true
}

// Console returns the console output so far.
func (vm *VM) Console() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.console.String()
}

// Events returns the events so far.
func (vm *VM) Events() []Event {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return append([]Event(nil), vm.events...)
}

// WaitEvent returns the next event of kind that no earlier WaitEvent for
// kind returned, waiting up to timeout for it.
func (vm *VM) WaitEvent(timeout time.Duration, kind string) (Event, error) {
	return vm.waitKinds(timeout, kind)
}

func (vm *VM) waitKinds(timeout time.Duration, kinds ...string) (Event, error) {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		vm.mu.Lock()
		vm.cond.Broadcast()
		vm.mu.Unlock()
	})
	defer timer.Stop()
	key := strings.Join(kinds, ",")
	vm.mu.Lock()
	defer vm.mu.Unlock()
	for {
		for i := vm.seen[key]; i < len(vm.events); i++ {
			for _, k := range kinds {
				if vm.events[i].Kind == k {
					vm.seen[key] = i + 1
					return vm.events[i], nil
				}
			}
		}
		vm.seen[key] = len(vm.events)
		select {
		case <-vm.exited:
			return Event{}, fmt.Errorf("ispvm: waiting for %s: QEMU exited", key)
		default:
		}
		if !time.Now().Before(deadline) {
			return Event{}, fmt.Errorf("ispvm: no %s event within %v", key, timeout)
		}
		vm.cond.Wait()
	}
}

// ctlReady waits for the VM's control loop to hold its port open.
func (vm *VM) ctlReady(timeout time.Duration) error {
	vm.ctlMu.Lock()
	defer vm.ctlMu.Unlock()
	vm.ctl.SetDeadline(time.Now().Add(timeout))
	defer vm.ctl.SetDeadline(time.Time{})
	for {
		line, err := vm.ctlR.ReadString('\n')
		if err != nil {
			return fmt.Errorf("ispvm: the VM's control port: %w", err)
		}
		if strings.TrimSpace(line) == "@@ISPVM-CTL-READY" {
			return nil
		}
	}
}

// ErrExit is wrapped by Run's error when the command exited non-zero.
var ErrExit = errors.New("ispvm: command failed")

// Run runs a shell command in the VM (busybox sh) through the control
// port and returns its output; a non-zero exit wraps ErrExit.
func (vm *VM) Run(command string, timeout time.Duration) (string, error) {
	if strings.Contains(command, "\n") {
		return "", fmt.Errorf("ispvm: Run: one line only: %q", command)
	}
	vm.ctlMu.Lock()
	defer vm.ctlMu.Unlock()
	vm.ctl.SetDeadline(time.Now().Add(timeout))
	defer vm.ctl.SetDeadline(time.Time{})
	if _, err := io.WriteString(vm.ctl, command+"\n"); err != nil {
		return "", fmt.Errorf("ispvm: Run %q: %w", command, err)
	}
	var out strings.Builder
	for {
		line, err := vm.ctlR.ReadString('\n')
		if err != nil {
			return out.String(), fmt.Errorf("ispvm: Run %q: %w", command, err)
		}
		if strings.TrimSpace(line) == "@@ISPVM-CTL-READY" { // the loop restarted
			continue
		}
		if rc, ok := strings.CutPrefix(line, "@@ISPVM-DONE "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rc))
			if n != 0 {
				return out.String(), fmt.Errorf("%w: %q exited %d: %s", ErrExit, command, n, out.String())
			}
			return out.String(), nil
		}
		out.WriteString(line)
	}
}

// Disconnect ends the PPP session from the ISP's side: pppd gets SIGTERM,
// sends an LCP Terminate-Request and exits; the relay sends a PADT
// (TestSession sees both sides go down and the PADT on the wire).
func (vm *VM) Disconnect() error {
	_, err := vm.Run("killall -TERM pppd", 10*time.Second)
	return err
}

// Freeze stops pppd (SIGSTOP): the session stays, but nothing answers LCP
// echo requests, as when an ISP's server dies. Thaw resumes it.
func (vm *VM) Freeze() error {
	_, err := vm.Run("killall -STOP pppd", 10*time.Second)
	return err
}

// Thaw resumes a frozen pppd (SIGCONT).
func (vm *VM) Thaw() error {
	_, err := vm.Run("killall -CONT pppd", 10*time.Second)
	return err
}

// SetPrefix makes p the prefix delegated from the next session on (as an
// ISP hands out a new one after a forced reconnect): the route over the
// session and dibbler-server's pool change (it starts afresh with each
// session).
func (vm *VM) SetPrefix(p netip.Prefix) error {
	if !p.Addr().Is6() {
		return fmt.Errorf("ispvm: SetPrefix(%v): not an IPv6 prefix", p)
	}
	p = p.Masked()
	_, err := vm.Run(fmt.Sprintf("sed -i 's|^PD=.*|PD=%s|' /etc/ispvm/env && "+
		"sed -i 's|pd-pool .*|pd-pool %s|; s|pd-length .*|pd-length %d|' /etc/ispvm/dibbler.conf", p, p, p.Bits()), 10*time.Second)
	return err
}

// Stop kills QEMU's process group and waits for it to exit.
func (vm *VM) Stop() {
	if vm.cmd.Process == nil {
		return
	}
	pgid := vm.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-vm.exited:
	case <-time.After(3 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-vm.exited
	}
	if vm.ctl != nil {
		vm.ctl.Close()
	}
}
