// Package netnstest builds named network namespaces, veth pairs between them and commands inside them for tests that run real traffic.
package netnstest

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// seq numbers the namespaces of this process.
var seq atomic.Int64

// Namespace is a named network namespace (as "ip netns" makes them),
// removed when the test that made it ends.
type Namespace struct {
	name string
}

// New creates a namespace named prefix-PID-N: the PID keeps the test
// processes of parallel packages apart and N, counted in the process,
// keeps one process's namespaces apart; a name that exists already (left
// by a dead process with the same PID) is passed over. At the test's
// cleanup every process still in the namespace, other than this one, is
// killed and the namespace is deleted; a failure to delete it fails the
// test. New needs root and ip (see testenv.Require).
func New(t testing.TB, prefix string) *Namespace {
	t.Helper()
	testenv.Require(t, "root", "ip")
	for range 100 {
		name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
		out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
		if err != nil {
			// ip creates the name exclusively: if it is there now, it
			// belongs to someone else.
			if _, serr := os.Stat(path(name)); serr == nil {
				continue
			}
			t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
		}
		ns := &Namespace{name: name}
		t.Cleanup(func() {
			if err := ns.remove(); err != nil {
				t.Errorf("netnstest: %v", err)
			}
		})
		return ns
	}
	t.Fatalf("netnstest: no free namespace name with prefix %q after 100 tries", prefix)
	return nil
}

func path(name string) string { return "/run/netns/" + name }

// Name is the namespace's name, as "ip netns" knows it.
func (ns *Namespace) Name() string { return ns.name }

// remove kills the processes left in the namespace and deletes it.
func (ns *Namespace) remove() error {
	// Best effort: a process that cannot be listed or killed only keeps
	// the namespace alive a while after its name is gone.
	if out, err := exec.Command("ip", "netns", "pids", ns.name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			// Never this process: a thread that could not switch back
			// may have left it listed here.
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %w: %s", ns.name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command returns the command args[0] with args[1:] to run inside the
// namespace (through "ip netns exec", which gives it the namespace's /sys
// too).
func (ns *Namespace) Command(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.name}, args...)...)
}

// Output runs args inside the namespace and returns its combined output.
// The error names the command and wraps the one from os/exec (an
// *exec.ExitError when the command ran and failed).
func (ns *Namespace) Output(args ...string) (string, error) {
	return output(ns.Command(args...))
}

// Run runs args inside the namespace and returns its combined output; if
// the command fails, the test fails with the command, its exit status and
// its output.
func (ns *Namespace) Run(t testing.TB, args ...string) string {
	t.Helper()
	return must(t, ns.Command(args...))
}

// IP runs "ip -n NAME args..." (ip switches into the namespace itself) like
// Run and returns its output.
func (ns *Namespace) IP(t testing.TB, args ...string) string {
	t.Helper()
	return must(t, exec.Command("ip", append([]string{"-n", ns.name}, args...)...))
}

// Sysctl sets each of settings ("key=value") inside the namespace, failing
// the test if one cannot be set.
func (ns *Namespace) Sysctl(t testing.TB, settings ...string) {
	t.Helper()
	ns.Run(t, append([]string{"sysctl", "-qw"}, settings...)...)
}

// Run runs args on the host like Namespace.Run.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	return must(t, exec.Command(args[0], args[1:]...))
}

// Start starts cmd (from Namespace.Command, say), failing the test if it
// cannot, and kills it and waits for it at the test's cleanup.
func Start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(cmd.Args, " "), err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// StartLogged starts cmd like Start with its output kept, and logs the
// output under name at the test's cleanup if the test failed: a daemon's
// chatter where it explains a failure, not in every run.
func StartLogged(t testing.TB, name string, cmd *exec.Cmd) {
	t.Helper()
	var buf Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	Start(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", name, buf.String())
		}
	})
}

// Buffer is a bytes.Buffer a command's output goroutines and the test
// may use at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func output(cmd *exec.Cmd) (string, error) {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return string(out), nil
}

func must(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	out, err := output(cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// FrameOffloads are the veth features that a packet tap must not see: GRO,
// GSO and TSO merge frames, TX checksum offload leaves checksums partial.
var FrameOffloads = []string{"gro", "gso", "tso", "tx"}

// End is one end of a veth pair and how Veth sets it up.
type End struct {
	NS   *Namespace
	Name string
	MAC  string   // the link address, if not empty
	MTU  int      // if not 0
	Off  []string // features "ethtool -K" turns off, such as FrameOffloads
	// Addrs are added in order (CIDR notation); IPv6 ones without
	// duplicate address detection, so they are usable at once.
	Addrs []string
	Up    bool
}

// Veth creates a veth pair between a and b (the two may share a namespace)
// and sets up a, then b: link address, MTU, offloads, addresses, then up.
// Turning offloads off needs ethtool.
func Veth(t testing.TB, a, b End) {
	t.Helper()
	args := []string{"link", "add", a.Name, "type", "veth", "peer", "name", b.Name}
	if b.NS != a.NS {
		args = append(args, "netns", b.NS.name)
	}
	a.NS.IP(t, args...)
	a.setup(t)
	b.setup(t)
	if a.Up && b.Up {
		// Frames sent before the kernel's link watch has activated a
		// device's queueing discipline (its operstate UP) are dropped
		// silently: on a loaded machine that can take long enough for a
		// test's first burst to vanish.
		for _, e := range []End{a, b} {
			WaitFor(t, 10*time.Second, e.Name+" operationally up", func() bool {
				return strings.Contains(e.NS.IP(t, "-o", "link", "show", e.Name), "state UP")
			})
		}
	}
}

func (e End) setup(t testing.TB) {
	t.Helper()
	if e.MAC != "" {
		e.NS.IP(t, "link", "set", e.Name, "address", e.MAC)
	}
	if e.MTU != 0 {
		e.NS.IP(t, "link", "set", e.Name, "mtu", strconv.Itoa(e.MTU))
	}
	if len(e.Off) > 0 {
		args := []string{"ethtool", "-K", e.Name}
		for _, f := range e.Off {
			args = append(args, f, "off")
		}
		e.NS.Run(t, args...)
	}
	for _, a := range e.Addrs {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			t.Fatalf("netnstest: address of %s: %v", e.Name, err)
		}
		args := []string{"addr", "add", a, "dev", e.Name}
		if p.Addr().Is6() {
			args = append(args, "nodad")
		}
		e.NS.IP(t, args...)
	}
	if e.Up {
		e.NS.IP(t, "link", "set", e.Name, "up")
	}
}
