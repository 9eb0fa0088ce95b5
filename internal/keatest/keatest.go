// Package keatest runs ISC Kea's DHCPv6 server (Debian's kea-dhcp6-server) in a test namespace as an ISP that delegates prefixes.
package keatest

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"e1kbox/internal/testenv"
)

// Namespace runs commands inside a network namespace (netnstest's does).
type Namespace interface {
	Command(args ...string) *exec.Cmd
}

// Config is what the server hands out on one interface.
type Config struct {
	Iface string
	// Subnet is the on-link subnet of the interface (a /64); Addrs, if
	// set, is the IA_NA pool inside it ("first-last").
	Subnet netip.Prefix
	Addrs  string
	// PDPool is delegated in prefixes of DelegatedLen bits.
	PDPool       netip.Prefix
	DelegatedLen int
	// Timers and lifetimes in seconds.
	T1, T2, Preferred, Valid int
	DNS                      []netip.Addr
	Domains                  []string
}

// Server is a running kea-dhcp6.
type Server struct {
	t     testing.TB
	ns    Namespace
	dir   string
	conf  string
	iface string
	mu    sync.Mutex
	cmd   *exec.Cmd
	log   *buffer
}

// Start writes the configuration into dir, starts kea-dhcp6 in ns with its
// lease file and server ID in dir, and waits until it serves. It is
// stopped at the test's cleanup; Stop and Start again keep its leases.
func Start(t testing.TB, ns Namespace, dir string, cfg Config) *Server {
	t.Helper()
	testenv.Require(t, "root", "kea-dhcp6")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, ns: ns, dir: dir, conf: filepath.Join(dir, "kea-dhcp6.json"), iface: cfg.Iface}
	s.write(cfg)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) write(cfg Config) {
	s.t.Helper()
	data, err := json.MarshalIndent(keaConfig(cfg, s.dir), "", "\t")
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(s.conf, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func keaConfig(cfg Config, dir string) map[string]any {
	subnet := map[string]any{
		"subnet":    cfg.Subnet.String(),
		"interface": cfg.Iface,
		"pd-pools": []any{map[string]any{
			"prefix": cfg.PDPool.Addr().String(), "prefix-len": cfg.PDPool.Bits(), "delegated-len": cfg.DelegatedLen,
		}},
	}
	if cfg.Addrs != "" {
		subnet["pools"] = []any{map[string]any{"pool": cfg.Addrs}}
	}
	opts := []any{} // never null: kea wants a list
	if len(cfg.DNS) > 0 {
		var s []string
		for _, a := range cfg.DNS {
			s = append(s, a.String())
		}
		opts = append(opts, map[string]any{"name": "dns-servers", "data": strings.Join(s, ", ")})
	}
	if len(cfg.Domains) > 0 {
		opts = append(opts, map[string]any{"name": "domain-search", "data": strings.Join(cfg.Domains, ", ")})
	}
	return map[string]any{"Dhcp6": map[string]any{
		// Kea opens its sockets once the interface runs with a
		// link-local address: retry while the link comes up.
		"interfaces-config": map[string]any{"interfaces": []string{cfg.Iface},
			"service-sockets-max-retries": 100, "service-sockets-retry-wait-time": 100},
		"data-directory": dir,
		"lease-database": map[string]any{"type": "memfile", "name": filepath.Join(dir, "leases6.csv"), "lfc-interval": 0},
		"renew-timer":    cfg.T1, "rebind-timer": cfg.T2,
		"preferred-lifetime": cfg.Preferred, "valid-lifetime": cfg.Valid,
		"option-data": opts,
		"subnet6":     []any{subnet},
		"loggers": []any{map[string]any{
			"name": "kea-dhcp6", "severity": "DEBUG", "debuglevel": 40,
			"output_options": []any{map[string]any{"output": "stdout"}},
		}},
	}}
}

func (s *Server) start() {
	s.t.Helper()
	s.waitLinkLocal()
	buf := &buffer{}
	cmd := s.ns.Command("kea-dhcp6", "-c", s.conf)
	cmd.Env = append(os.Environ(), "KEA_LOCKFILE_DIR=none", "KEA_PIDFILE_DIR="+s.dir)
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("kea-dhcp6: %v", err)
	}
	s.mu.Lock()
	s.cmd, s.log = cmd, buf
	s.mu.Unlock()
	s.waitLog(buf, 0, "DHCP6_STARTED")
}

// waitLinkLocal waits (10 s at most) for the interface to have a
// link-local address that passed duplicate address detection: Kea binds
// to it.
func (s *Server) waitLinkLocal() {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := s.ns.Command("ip", "-6", "addr", "show", "dev", s.iface, "scope", "link").CombinedOutput()
		if strings.Contains(string(out), "inet6 fe80:") && !strings.Contains(string(out), "tentative") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kea-dhcp6: %s has no usable link-local address:\n%s", s.iface, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) waitLog(buf *buffer, from int, what string) {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(buf.String()[from:], what) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("kea-dhcp6: no %s within 15 s:\n%s", what, buf.String())
}

// Reconfigure rewrites the configuration and makes the server reload it
// (SIGHUP), keeping its leases: a prefix outside the new pools is taken
// back at the client's next renewal.
func (s *Server) Reconfigure(cfg Config) {
	s.t.Helper()
	s.write(cfg)
	s.mu.Lock()
	cmd, buf := s.cmd, s.log
	s.mu.Unlock()
	from := len(buf.String())
	cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(buf, from, "DHCP6_DYNAMIC_RECONFIGURATION_SUCCESS")
}

// Restart stops the server and starts it again (its lease file kept).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Stop stops the server (if it runs), logging its output when the test
// failed or runs verbose.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, buf := s.cmd, s.log
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	if s.t.Failed() || testing.Verbose() {
		s.t.Logf("kea-dhcp6 log:\n%s", tail(buf.String(), 200))
	}
}

// Log is the server's output so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// Leases is the server's lease file: one CSV line per lease written.
func (s *Server) Leases() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "leases6.csv"))
	return string(b)
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// buffer is a bytes.Buffer that a process writes while the test reads.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
