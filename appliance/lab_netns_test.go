package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// The netns suite runs the appliance binary, built by the test, as-is in a
// "box" network namespace whose veth ports p1..pN lead to host
// namespaces h1..hN (interface eth0, 10.50.0.i/24 and fd50::i/64), and
// drives real traffic through it with real tools.

var netnsTools = []string{"ip", "ethtool", "ping", "curl", "iperf3", "dnsmasq", "dhclient"}

func requireNetns(t *testing.T) {
	t.Helper()
	testenv.Require(t, append([]string{"root"}, netnsTools...)...)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// applianceBinary builds the appliance once per test run.
func applianceBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e1kbox-appliance-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "appliance")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type lab struct {
	t     *testing.T
	box   *netnstest.Namespace
	hosts []*netnstest.Namespace
	dir   string
	cmd   *exec.Cmd
	exit  chan error
	log   *bytes.Buffer
}

// newLab makes the box and n hosts.
func newLab(t *testing.T, n int) *lab {
	requireNetns(t)
	l := &lab{t: t, dir: t.TempDir()}
	l.box = netnstest.New(t, "e1kb")
	l.box.IP(t, "link", "set", "lo", "up")
	for i := 1; i <= n; i++ {
		h := netnstest.New(t, fmt.Sprintf("e1kh%d", i))
		l.hosts = append(l.hosts, h)
		h.IP(t, "link", "set", "lo", "up")
		// veth's TX checksum offload would hand the forwarder frames
		// with partial checksums; GRO/GSO/TSO would merge frames.
		netnstest.Veth(t,
			netnstest.End{NS: l.box, Name: fmt.Sprintf("p%d", i), Off: netnstest.FrameOffloads},
			netnstest.End{NS: h, Name: "eth0", Off: netnstest.FrameOffloads, MAC: fmt.Sprintf("02:50:00:00:00:%02x", i),
				Addrs: []string{fmt.Sprintf("10.50.0.%d/24", i), fmt.Sprintf("fd50::%d/64", i)}, Up: true})
	}
	return l
}

// host runs a command in host i (1-based) and returns its output and error.
func (l *lab) host(i int, args ...string) (string, error) {
	return l.hosts[i-1].Output(args...)
}

func (l *lab) mustHost(t *testing.T, i int, args ...string) string {
	t.Helper()
	return l.hosts[i-1].Run(t, args...)
}

// testPassword is the dashboard password of the appliance under test.
const testPassword = "e1kbox-test-password"

// start runs the appliance in the box with the given flags and waits until
// /healthz answers 200.
func (l *lab) start(flags ...string) {
	t := l.t
	bin := applianceBinary(t)
	pw := filepath.Join(l.dir, "gokr-pw.txt")
	if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.cmd = l.box.Command(append([]string{bin, "-state", l.dir, "-listen", ":8080", "-password-files", pw}, flags...)...)
	l.log = &bytes.Buffer{}
	l.cmd.Stdout, l.cmd.Stderr = l.log, l.log
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The exit goes to l.exit (for stop) once; the cleanup kills an
	// appliance still running and waits for its exit either way.
	cmd, log, exit, exited := l.cmd, l.log, make(chan error, 1), make(chan struct{})
	l.exit = exit
	go func() {
		exit <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("appliance log:\n%s", log)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := l.boxGet("/healthz")
		if code == 200 {
			return
		}
		select {
		case err := <-l.exit:
			t.Fatalf("appliance exited: %v\n%s", err, l.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("appliance not healthy after 15 s: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM and returns how long the appliance took to exit.
func (l *lab) stop() time.Duration {
	start := time.Now()
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-l.exit:
		if err != nil {
			l.t.Errorf("appliance exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		l.t.Errorf("appliance ignored SIGTERM for 10 s")
		l.cmd.Process.Kill()
		<-l.exit
	}
	return time.Since(start)
}

// boxGet fetches a path of the appliance's HTTP server from inside the box.
func (l *lab) boxGet(path string) (int, string) {
	return curlResult(l.box.Command("curl", "-s", "--max-time", "2", "-u", "gokrazy:"+testPassword, "-w", "\n%{http_code}", "http://127.0.0.1:8080"+path).Output())
}

// curlResult splits the output of curl -w "\n%{http_code}" into the
// status code and the body (0 when curl failed).
func curlResult(out []byte, err error) (int, string) {
	if err != nil {
		return 0, string(out)
	}
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	code, _ := strconv.Atoi(s[i+1:])
	return code, s[:max(i, 0)]
}

func (l *lab) stats(t *testing.T) dataplane.Snapshot {
	t.Helper()
	code, body := l.boxGet("/api/dataplane")
	var s dataplane.Snapshot
	if code != 200 {
		t.Fatalf("/api/stats: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/api/stats: %v\n%s", err, body)
	}
	return s
}

func (l *lab) fdb(t *testing.T) []dataplane.FDBEntry {
	t.Helper()
	code, body := l.boxGet("/api/fdb")
	var r struct{ Entries []webui.FDBEntry }
	if code != 200 {
		t.Fatalf("/api/fdb: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/api/fdb: %v\n%s", err, body)
	}
	var out []dataplane.FDBEntry
	for _, e := range r.Entries {
		mac, err := bridge.ParseMAC(e.MAC)
		if err != nil {
			t.Fatalf("/api/fdb: %v\n%s", err, body)
		}
		out = append(out, dataplane.FDBEntry{Entry: bridge.Entry{MAC: mac, VLAN: e.VLAN, Static: e.Static}, PortName: e.Port})
	}
	return out
}

func (l *lab) port(t *testing.T, s dataplane.Snapshot, name string) dataplane.PortStats {
	for _, p := range s.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no port %s in the snapshot", name)
	return dataplane.PortStats{}
}

// rxPackets reads a host's eth0 receive counter.
func (l *lab) rxPackets(t *testing.T, i int) uint64 {
	t.Helper()
	out := l.mustHost(t, i, "cat", "/sys/class/net/eth0/statistics/rx_packets")
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// send transmits raw frames on host i's eth0 from a thread in its namespace.
func (l *lab) send(t *testing.T, i int, frames ...[]byte) {
	var err error
	l.hosts[i-1].Do(t, func() { err = sendRaw("eth0", frames) })
	if err != nil {
		t.Fatalf("send on h%d: %v", i, err)
	}
}

// sendRaw transmits frames on dev from a packet socket, retrying while the
// device queue is full.
func sendRaw(dev string, frames [][]byte) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return err
	}
	// Closing a packet socket waits for an RCU grace period (a few ms):
	// the caller goes on meanwhile, so that frames sent back to back
	// arrive within one block timeout (2 ms) of capture's 4-block ring.
	defer func() { go unix.Close(fd) }()
	sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index}
	for _, fr := range frames {
		for {
			err := unix.Sendto(fd, fr, 0, sa)
			if err == unix.ENOBUFS {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				return fmt.Errorf("sendto: %w", err)
			}
			break
		}
	}
	return nil
}

func rawFrame(dst, src [6]byte, etype uint16, payload []byte) []byte {
	b := append(append(append([]byte(nil), dst[:]...), src[:]...), byte(etype>>8), byte(etype))
	return append(b, payload...)
}

var bcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// capture opens an RX ring on host i's eth0 and returns a function that
// counts, until d passes, the received frames for which match holds.
func (l *lab) capture(t *testing.T, i int) func(d time.Duration, match func(afpacket.Packet) bool) int {
	t.Helper()
	var sock *afpacket.Socket
	var err error
	l.hosts[i-1].Do(t, func() {
		sock, err = afpacket.Open("eth0", afpacket.Config{NoTX: true, NoPromisc: true, BlockSize: 1 << 16, BlockCount: 4})
	})
	if err != nil {
		t.Fatalf("capture on h%d: %v", i, err)
	}
	t.Cleanup(func() { sock.Close() })
	return func(d time.Duration, match func(afpacket.Packet) bool) int {
		n := 0
		deadline := time.Now().Add(d)
		var p afpacket.Packet
		for time.Now().Before(deadline) {
			b, err := sock.NextBlock(time.Until(deadline))
			if err != nil || b == nil {
				break
			}
			for b.Next(&p) {
				if match(p) {
					n++
				}
			}
			sock.ReleaseBlock()
		}
		return n
	}
}

// killPidfile stops the daemon whose pid the file holds, if any.
func killPidfile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		syscall.Kill(pid, syscall.SIGTERM)
	}
}

// tcpRuns sends TCP from host h to an iperf3 server (iperf3 -c and args)
// in up to three 2 s runs until one delivers at least `least` bytes, and
// fails the test if none does: on a loaded 2-core machine a lost SYN or
// first segment costs a 1 s retransmission timeout, which can eat a
// whole run. Each run waits up to 3 s for the server to answer.
func (l *lab) tcpRuns(t *testing.T, h int, least float64, args ...string) iperfResult {
	t.Helper()
	var res iperfResult
	for attempt := 1; attempt <= 3; attempt++ {
		eventually(t, 3*time.Second, "iperf3 server up", func() (bool, string) {
			r, err := iperf3(l.hosts[h-1], append(append([]string{"-c"}, args...), "-t", "2")...)
			res = r
			return err == nil, fmt.Sprint(err)
		})
		if res.End.SumReceived.Bytes >= least {
			return res
		}
		t.Logf("TCP run %d to %s: %.0f bytes received", attempt, args[0], res.End.SumReceived.Bytes)
	}
	t.Errorf("TCP to %s: %.0f bytes received, want at least %.0f", args[0], res.End.SumReceived.Bytes, least)
	return res
}

// background runs fn on a goroutine of its own: wait waits for its
// result; end closes the stop channel fn is given (fn returns soon after)
// and then waits. fn must not stop the test (no t.Fatal, nor a helper that
// calls it, such as netnstest's Do or Run: it uses ns.In and reports
// through its result). The test's cleanup ends it, also when the test
// fails first, so that it never outlives the test.
func background[T any](t testing.TB, fn func(stop <-chan struct{}) T) (wait, end func() T) {
	stop, done := make(chan struct{}), make(chan struct{})
	var res T
	go func() {
		defer close(done)
		res = fn(stop)
	}()
	var once sync.Once
	wait = func() T {
		<-done
		return res
	}
	end = func() T {
		once.Do(func() { close(stop) })
		return wait()
	}
	t.Cleanup(func() { end() })
	return wait, end
}

// stopped says whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s)", what, d, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// neighbour returns the box's ARP entry for ip, if any.
func (l *lab) neighbour(t *testing.T, ip string) (webui.Neighbour, bool) {
	t.Helper()
	code, body := l.boxGet("/api/neighbours")
	var r struct{ Neighbours []webui.Neighbour }
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("/api/neighbours: %d %s", code, body)
	}
	for _, n := range r.Neighbours {
		if n.IP.String() == ip {
			return n, true
		}
	}
	return webui.Neighbour{}, false
}
