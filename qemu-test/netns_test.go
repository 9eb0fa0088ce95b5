package qemutest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// requireRoot fails under CI (or skips) when not root: taps and netns need it.
func requireRoot(t testing.TB) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ping", "iperf3", "dnsmasq", "dhclient", "curl")
}

var nameSeq atomic.Int32

// uniq returns a short unique name for a tap device (at most 15 bytes).
func uniq(prefix string) string {
	return fmt.Sprintf("%s%d%d", prefix, os.Getpid()%10000, nameSeq.Add(1))
}

// host is a network namespace standing for a machine on one data port.
type host struct {
	t    testing.TB
	ns   *netnstest.Namespace
	dev  string // its interface (the tap, moved in)
	addr string // CIDR
}

// tapHost creates a tap device for a VM data port; after QEMU has opened
// it, attach moves it into a new namespace with addr.
func newTap(t testing.TB) string {
	t.Helper()
	tap := uniq("e1kt")
	netnstest.Run(t, "ip", "tuntap", "add", "dev", tap, "mode", "tap")
	t.Cleanup(func() { exec.Command("ip", "link", "del", tap).Run() })
	return tap
}

func attach(t testing.TB, tap, addr string) *host {
	t.Helper()
	ns := netnstest.New(t, "e1kn")
	netnstest.Run(t, "ip", "link", "set", tap, "netns", ns.Name())
	h := &host{t: t, ns: ns, dev: tap, addr: addr}
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

func (h *host) cmd(args ...string) *exec.Cmd { return h.ns.Command(args...) }

func (h *host) exec(args ...string) (string, error) { return h.ns.Output(args...) }

func (h *host) must(args ...string) string {
	h.t.Helper()
	return h.ns.Run(h.t, args...)
}

// detach moves the host's tap back to the root namespace, where a new QEMU
// (after a power cycle) opens it by name again.
func (h *host) detach(t testing.TB) {
	t.Helper()
	if out, err := h.exec("ip", "link", "set", h.dev, "netns", "1"); err != nil {
		t.Fatalf("[%s] moving %s out: %v\n%s", h.ns.Name(), h.dev, err, out)
	}
}

// rejoin moves the tap back into the host's namespace with addr and, if gw
// is set, a default route via gw (a move between namespaces drops both).
func (h *host) rejoin(t testing.TB, addr, gw string) {
	t.Helper()
	netnstest.Run(t, "ip", "link", "set", h.dev, "netns", h.ns.Name())
	cmds := [][]string{{"ip", "link", "set", h.dev, "up"}, {"ip", "addr", "add", addr, "dev", h.dev}}
	if gw != "" {
		cmds = append(cmds, []string{"ip", "route", "add", "default", "via", gw})
	}
	for _, c := range cmds {
		h.ns.Run(t, c...)
	}
}

// start runs a background process in the namespace, killed at cleanup.
func (h *host) start(args ...string) *exec.Cmd {
	h.t.Helper()
	c := h.cmd(args...)
	netnstest.Start(h.t, c)
	return c
}

// waitListen waits up to 30 s for a TCP listener on port in h's
// namespace.
func (h *host) waitListen(t *testing.T, port int) {
	t.Helper()
	netnstest.WaitFor(t, 30*time.Second, fmt.Sprintf("a TCP listener on port %d", port), func() bool {
		out, _ := h.exec("ss", "-Hltn", "sport", "=", fmt.Sprintf(":%d", port))
		return strings.TrimSpace(out) != ""
	})
}

// waitPing pings dst (IPv4 or IPv6) until it answers or timeout passes.
func (h *host) waitPing(dst string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	family := "-4"
	if strings.Contains(dst, ":") {
		family = "-6"
	}
	var out string
	var err error
	for time.Now().Before(deadline) {
		if out, err = h.exec("ping", family, "-c", "1", "-W", "1", dst); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s cannot reach %s: %v\n%s", h.ns.Name(), dst, err, out)
}

// TestNetnsHelpers runs the host helpers without a VM: a tap moves into
// its host's namespace with its address, out again and back.
func TestNetnsHelpers(t *testing.T) {
	requireRoot(t)
	tap := newTap(t)
	h := attach(t, tap, "10.76.0.1/24")
	if out := h.must("ip", "-o", "addr", "show", "dev", tap); !strings.Contains(out, "inet 10.76.0.1/24") {
		t.Errorf("%s in %s: %s, want 10.76.0.1/24", tap, h.ns.Name(), out)
	}
	if _, err := h.exec("ip", "link", "show", "no-such-dev0"); err == nil {
		t.Errorf("exec of a failing command: no error")
	}
	h.detach(t)
	netnstest.Run(t, "ip", "link", "show", tap) // back in the root namespace
	h.rejoin(t, "10.76.0.2/24", "10.76.0.254")
	if out := h.must("ip", "route", "show", "default"); !strings.Contains(out, "via 10.76.0.254") {
		t.Errorf("default route after rejoin: %q", out)
	}
	if c := h.start("sleep", "60"); c.Process == nil {
		t.Errorf("start: no process")
	}
}

func iperfSummary(js string, udp bool) string {
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				LostPercent   float64 `json:"lost_percent"`
			} `json:"sum"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		return "unparsable iperf3 output"
	}
	if udp {
		return fmt.Sprintf("%.1f Mbit/s, %.1f%% lost", r.End.Sum.BitsPerSecond/1e6, r.End.Sum.LostPercent)
	}
	return fmt.Sprintf("%.1f Mbit/s", r.End.SumReceived.BitsPerSecond/1e6)
}

// digAnswer is dig +short's answer without its ";;" diagnostics: under
// TCG the first query the box forwards upstream can take longer than
// dig's 3 s and be answered on dig's retry, which is logged.
func digAnswer(t *testing.T, out string) string {
	t.Helper()
	ans, notes := digParse(out)
	for _, l := range notes {
		t.Logf("dig: %s", l)
	}
	return ans
}

// digParse splits dig +short's output into its answer and its ";;"
// diagnostics.
func digParse(out string) (answer string, notes []string) {
	var ans []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, ";;") {
			notes = append(notes, l)
			continue
		}
		ans = append(ans, l)
	}
	return strings.Join(ans, "\n"), notes
}
