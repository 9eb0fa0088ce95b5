package netnstest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// netnsID is what readlink /proc/.../ns/net shows for the namespace at path.
func netnsID(t *testing.T, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Sys().(*syscall.Stat_t).Ino)
}

// threadNetns is the network namespace of the calling thread.
func threadNetns() (string, error) {
	return os.Readlink("/proc/thread-self/ns/net")
}

func TestNames(t *testing.T) {
	testenv.Require(t, "root", "ip")
	// The name New would try next is taken, as if by a dead process.
	stale := fmt.Sprintf("nstest-%d-%d", os.Getpid(), seq.Load()+1)
	Run(t, "ip", "netns", "add", stale)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	a, b := New(t, "nstest"), New(t, "nstest")
	prefix := fmt.Sprintf("nstest-%d-", os.Getpid())
	for _, ns := range []*Namespace{a, b} {
		if !strings.HasPrefix(ns.Name(), prefix) || ns.Name() == stale {
			t.Errorf("name %q: want prefix %q and not the taken %q", ns.Name(), prefix, stale)
		}
		if _, err := os.Stat(path(ns.Name())); err != nil {
			t.Errorf("namespace %s: %v", ns.Name(), err)
		}
	}
	if a.Name() == b.Name() {
		t.Errorf("two namespaces named %q", a.Name())
	}
	if netnsID(t, path(stale)) == netnsID(t, path(a.Name())) {
		t.Errorf("New reused the existing namespace %s", stale)
	}
}

func TestCommandsRunInside(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := New(t, "nstest")
	id := netnsID(t, path(ns.Name()))
	host := netnsID(t, "/proc/self/ns/net")
	out, err := ns.Output("readlink", "/proc/self/ns/net")
	for _, tc := range []struct {
		what, got, want string
	}{
		{"Run", ns.Run(t, "readlink", "/proc/self/ns/net"), id},
		{"Output", out, id},
		{"Command", func() string { b, _ := ns.Command("readlink", "/proc/self/ns/net").Output(); return string(b) }(), id},
		{"host Run", Run(t, "readlink", "/proc/self/ns/net"), host},
	} {
		if got := strings.TrimSpace(tc.got); got != tc.want {
			t.Errorf("%s: readlink /proc/self/ns/net = %q, want %q", tc.what, got, tc.want)
		}
	}
	if err != nil {
		t.Errorf("Output: %v", err)
	}
	// ip -n: a new namespace has only its loopback device.
	if links := strings.Split(strings.TrimSpace(ns.IP(t, "-o", "link", "show")), "\n"); len(links) != 1 || !strings.Contains(links[0], " lo:") {
		t.Errorf("ip -n %s link show: %q, want lo only", ns.Name(), links)
	}
	ns.Sysctl(t, "net.ipv4.ip_forward=1")
	if got := strings.TrimSpace(ns.Run(t, "cat", "/proc/sys/net/ipv4/ip_forward")); got != "1" {
		t.Errorf("ip_forward in the namespace after Sysctl = %q, want 1", got)
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	fatal []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
}

func TestFailures(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := New(t, "nstest")
	fail := []string{"sh", "-c", "echo oops; exit 3"}
	for _, tc := range []struct {
		name string
		run  func(tb testing.TB)
		want string // the start of the failure: the command, its exit status and its output
	}{
		{"Run", func(tb testing.TB) { Run(tb, fail...) }, "sh -c echo oops; exit 3: exit status 3\noops\n"},
		{"Namespace.Run", func(tb testing.TB) { ns.Run(tb, fail...) }, "ip netns exec " + ns.Name() + " sh -c echo oops; exit 3: exit status 3\noops\n"},
		{"IP", func(tb testing.TB) { ns.IP(tb, "link", "show", "nonexistent0") }, "ip -n " + ns.Name() + " link show nonexistent0: exit status 1\nDevice \"nonexistent0\" does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			tc.run(r)
			if len(r.fatal) != 1 || !strings.HasPrefix(r.fatal[0], tc.want) {
				t.Errorf("failures %q, want one that starts with %q", r.fatal, tc.want)
			}
		})
	}
	out, err := ns.Output(fail...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || out != "oops\n" || !strings.Contains(err.Error(), "sh -c echo oops; exit 3") {
		t.Errorf("Output = %q, %v; want the output, exit status 3 and the command", out, err)
	}
}

func TestVeth(t *testing.T) {
	testenv.Require(t, "root", "ip", "ethtool", "ping")
	a, b := New(t, "nstest"), New(t, "nstest")
	Veth(t,
		End{NS: a, Name: "va", MAC: "02:00:00:00:01:0a", MTU: 1400, Off: FrameOffloads, Addrs: []string{"10.201.0.1/24", "fd01::1/64"}, Up: true},
		End{NS: b, Name: "vb", MTU: 1400, Addrs: []string{"10.201.0.2/24", "fd01::2/64"}, Up: true})
	Veth(t, End{NS: a, Name: "x0"}, End{NS: a, Name: "x1"})
	for _, tc := range []struct {
		ns   *Namespace
		args []string
		want []string
		not  []string
	}{
		{a, []string{"link", "show", "va"}, []string{"mtu 1400", "02:00:00:00:01:0a", ",UP"}, nil},
		{a, []string{"addr", "show", "dev", "va"}, []string{"inet 10.201.0.1/24", "inet6 fd01::1/64 scope global nodad"}, nil},
		{b, []string{"addr", "show", "dev", "vb"}, []string{"inet 10.201.0.2/24", "inet6 fd01::2/64 scope global nodad"}, nil},
		{a, []string{"link", "show", "x1"}, []string{"x1@x0"}, []string{",UP"}},
	} {
		out := tc.ns.IP(t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("ip %s in %s lacks %q:\n%s", strings.Join(tc.args, " "), tc.ns.Name(), w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("ip %s in %s has %q:\n%s", strings.Join(tc.args, " "), tc.ns.Name(), n, out)
			}
		}
	}
	k := a.Run(t, "ethtool", "-k", "va")
	for _, line := range []string{"generic-receive-offload: off", "generic-segmentation-offload: off", "tcp-segmentation-offload: off", "tx-checksumming: off"} {
		if !strings.Contains(k, line) {
			t.Errorf("ethtool -k va lacks %q", line)
		}
	}
	a.Run(t, "ping", "-c", "1", "-W", "2", "10.201.0.2")
	a.Run(t, "ping", "-6", "-c", "1", "-W", "2", "fd01::2")
}

func TestDo(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := New(t, "nstest")
	Veth(t, End{NS: ns, Name: "dv0"}, End{NS: ns, Name: "dv1"})
	id := netnsID(t, path(ns.Name()))
	// Locked here too, this goroutine stays on Do's thread afterwards.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadNetns()
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	var ifErr error
	ns.Do(t, func() {
		inside, _ = threadNetns()
		_, ifErr = net.InterfaceByName("dv0")
	})
	if inside != id || ifErr != nil {
		t.Errorf("in Do: thread in %q, dv0: %v; want %q and the interface", inside, ifErr, id)
	}
	after, _ := threadNetns()
	if _, err := net.InterfaceByName("dv0"); after != before || err == nil {
		t.Errorf("after Do: thread in %q (was %q), dv0 visible: %v", after, before, err == nil)
	}

	// When fn ends the goroutine (as t.FailNow does), the thread is
	// switched back before the goroutine's own deferred calls run.
	type result struct{ before, after string }
	done := make(chan result, 1)
	r := &recorder{TB: t}
	go func() {
		runtime.LockOSThread() // never unlocked: this thread stays with the goroutine
		var res result
		res.before, _ = threadNetns()
		defer func() {
			res.after, _ = threadNetns()
			done <- res
		}()
		ns.Do(r, runtime.Goexit)
	}()
	if res := <-done; res.after != res.before || len(r.fatal) != 0 {
		t.Errorf("after Do's fn called runtime.Goexit: thread in %q, was %q; failures %q", res.after, res.before, r.fatal)
	}
}

// TestIn: In runs fn inside the namespace from any goroutine, returns its
// error, and leaves the thread where it was.
func TestIn(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := New(t, "nstest")
	Veth(t, End{NS: ns, Name: "iv0"}, End{NS: ns, Name: "iv1"})
	id := netnsID(t, path(ns.Name()))
	type result struct {
		inside, before, after string
		err                   error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var res result
		res.before, _ = threadNetns()
		res.err = ns.In(func() error {
			res.inside, _ = threadNetns()
			if _, err := net.InterfaceByName("iv0"); err != nil {
				return err
			}
			return errors.New("fn's own error")
		})
		res.after, _ = threadNetns()
		done <- res
	}()
	res := <-done
	if res.inside != id || res.after != res.before || res.err == nil || res.err.Error() != "fn's own error" {
		t.Errorf("In: thread in %q (want %q), after in %q (was %q), error %v (want fn's own)", res.inside, id, res.after, res.before, res.err)
	}
	gone := &Namespace{name: "nstest-absent-" + ns.Name()}
	if err := gone.In(func() error { return nil }); err == nil {
		t.Error("In of a namespace that does not exist returned no error")
	}
}

func TestCleanup(t *testing.T) {
	testenv.Require(t, "root", "ip", "sleep")
	var name string
	var loose, started *exec.Cmd
	t.Run("namespace", func(t *testing.T) {
		ns := New(t, "nstest")
		name = ns.Name()
		loose = ns.Command("sleep", "60") // not known to the helpers
		if err := loose.Start(); err != nil {
			t.Fatal(err)
		}
		// Left in the namespace once it is in it: "ip netns exec" enters
		// it after it started (on a loaded machine, after the cleanup's
		// look at the namespace's processes, if that came at once).
		pid := strconv.Itoa(loose.Process.Pid)
		WaitFor(t, 10*time.Second, "the loose process in the namespace", func() bool {
			out, err := exec.Command("ip", "netns", "pids", name).Output()
			return err == nil && slices.Contains(strings.Fields(string(out)), pid)
		})
		started = ns.Command("sleep", "61")
		Start(t, started)
	})
	if _, err := os.Stat(path(name)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("namespace %s after the test's cleanup: %v, want it gone", name, err)
	}
	if started.ProcessState == nil || started.ProcessState.Success() {
		t.Errorf("the process Start started: %v, want killed and waited for", started.ProcessState)
	}
	waited := make(chan error, 1)
	go func() { waited <- loose.Wait() }()
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("a process left in the namespace ended with %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		loose.Process.Kill()
		t.Errorf("a process left in the namespace still runs after its cleanup")
	}
}

// TestForward: a loopback server inside the namespace answers through
// Forward's port in the test's namespace; Dial reaches it from any
// goroutine and reports a refused port.
func TestForward(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := New(t, "nstest")
	ns.IP(t, "link", "set", "lo", "up")
	var ln net.Listener
	ns.Do(t, func() {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	})
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	fwd := ns.Forward(t, ln.Addr().String())
	c, err := net.Dial("tcp", fwd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(c); err != nil || string(got) != "hello" {
		t.Errorf("through Forward: %q %v, want the echo of hello", got, err)
	}
	// A connection left open does not hold up the cleanup.
	idle, err := net.Dial("tcp", fwd)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	ln.Close()
	if c, err := ns.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Errorf("Dial to a closed port inside %s: no error", ns.Name())
	}
}
