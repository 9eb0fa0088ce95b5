package qemutest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// requireRoot fails under CI (or skips) when not root: taps and netns need it.
func requireRoot(t testing.TB) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ping", "iperf3", "dnsmasq", "dhclient", "curl")
}

var nameSeq atomic.Int32

// uniq returns a short unique name for interfaces and namespaces.
func uniq(prefix string) string {
	return fmt.Sprintf("%s%d%d", prefix, os.Getpid()%10000, nameSeq.Add(1))
}

func run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// host is a network namespace standing for a machine on one data port.
type host struct {
	t    testing.TB
	name string
	dev  string // its interface (the tap, moved in)
	addr string // CIDR
}

// tapHost creates a tap device for a VM data port; after QEMU has opened
// it, attach moves it into a new namespace with addr.
func newTap(t testing.TB) string {
	t.Helper()
	tap := uniq("e1kt")
	run(t, "ip", "tuntap", "add", "dev", tap, "mode", "tap")
	t.Cleanup(func() { exec.Command("ip", "link", "del", tap).Run() })
	return tap
}

func attach(t testing.TB, tap, addr string) *host {
	t.Helper()
	ns := uniq("e1kn")
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "pids", ns).Output()
		if out, _ := exec.Command("ip", "netns", "pids", ns).Output(); len(out) > 0 {
			for _, pid := range strings.Fields(string(out)) {
				exec.Command("kill", "-9", pid).Run()
			}
		}
		exec.Command("ip", "netns", "del", ns).Run()
	})
	run(t, "ip", "link", "set", tap, "netns", ns)
	h := &host{t: t, name: ns, dev: tap, addr: addr}
	h.must("ip", "link", "set", "lo", "up")
	h.must("ip", "link", "set", tap, "up")
	if addr != "" {
		h.must("ip", "addr", "add", addr, "dev", tap)
	}
	h.must("sysctl", "-qw", "net.ipv6.conf."+tap+".accept_dad=0")
	return h
}

// ip returns the host's address without the prefix length.
func (h *host) ip() string { return strings.Split(h.addr, "/")[0] }

func (h *host) cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.name}, args...)...)
}

func (h *host) exec(args ...string) (string, error) {
	out, err := h.cmd(args...).CombinedOutput()
	return string(out), err
}

func (h *host) must(args ...string) string {
	h.t.Helper()
	out, err := h.exec(args...)
	if err != nil {
		h.t.Fatalf("[%s] %s: %v\n%s", h.name, strings.Join(args, " "), err, out)
	}
	return out
}

// detach moves the host's tap back to the root namespace, where a new QEMU
// (after a power cycle) opens it by name again.
func (h *host) detach(t testing.TB) {
	t.Helper()
	if out, err := h.exec("ip", "link", "set", h.dev, "netns", "1"); err != nil {
		t.Fatalf("[%s] moving %s out: %v\n%s", h.name, h.dev, err, out)
	}
}

// rejoin moves the tap back into the host's namespace with addr and, if gw
// is set, a default route via gw (a move between namespaces drops both).
func (h *host) rejoin(t testing.TB, addr, gw string) {
	t.Helper()
	run(t, "ip", "link", "set", h.dev, "netns", h.name)
	cmds := [][]string{{"ip", "link", "set", h.dev, "up"}, {"ip", "addr", "add", addr, "dev", h.dev}}
	if gw != "" {
		cmds = append(cmds, []string{"ip", "route", "add", "default", "via", gw})
	}
	for _, c := range cmds {
		if out, err := h.exec(c...); err != nil {
			t.Fatalf("[%s] %s: %v\n%s", h.name, strings.Join(c, " "), err, out)
		}
	}
}

// start runs a background process in the namespace, killed at cleanup.
func (h *host) start(args ...string) *exec.Cmd {
	h.t.Helper()
	c := h.cmd(args...)
	if err := c.Start(); err != nil {
		h.t.Fatalf("[%s] starting %v: %v", h.name, args, err)
	}
	h.t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// waitPing pings dst until it answers or timeout passes.
func (h *host) waitPing(dst string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var out string
	var err error
	for time.Now().Before(deadline) {
		if out, err = h.exec("ping", "-c", "1", "-W", "1", dst); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s cannot reach %s: %v\n%s", h.name, dst, err, out)
}
