package tuning

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary run netnsHelper instead of the tests:
// the netns test starts it through "ip netns exec", which gives it the
// namespace's /sys and network stack.
const helperEnv = "E1KBOX_TUNING_NETNS_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(netnsHelper(spec))
	}
	os.Exit(m.Run())
}

// requireRoot fails under CI=true and skips otherwise when the test cannot run.
func requireRoot(t *testing.T, tools ...string) {
	t.Helper()
	testenv.Require(t, append([]string{"root"}, tools...)...)
}

type helperSpec struct {
	A, B string
	// Copybreak and BridgeNF are only planned where they cannot touch
	// the host: copybreak is global to the kernel.
	Copybreak, BridgeNF bool
}

type helperOut struct {
	CPUs   string
	Phases map[string][]Report
}

// netnsHelper runs inside the namespace and prints the reports of each
// phase as JSON.
func netnsHelper(spec string) int {
	var s helperSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	et, err := NewEthtool()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer et.Close()
	tu := New("/", et)
	cpus, err := tu.OnlineCPUs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	last := fmt.Sprint(cpus[len(cpus)-1])
	a := DataPort(s.A)
	a.ITR, a.RxRing, a.RPS = "20000", 1024, last
	p1 := Plan{
		Placement: PlacementSplit, BridgeNetfilterOff: s.BridgeNF,
		Ports: []PortPlan{a, {Name: s.B, Offloads: map[string]bool{"rx-gro": true}, Threaded: ptr(true)}},
	}
	if s.Copybreak {
		p1.Copybreak = ptr(uint32(128))
	}
	ctx := context.Background()
	out := helperOut{CPUs: cpus.String(), Phases: map[string][]Report{}}
	out.Phases["apply"] = tu.Apply(ctx, p1)
	out.Phases["again"] = tu.Apply(ctx, p1)
	out.Phases["read"] = tu.Read(p1)
	out.Phases["csum-off"] = tu.Apply(ctx, Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: s.B, Offloads: map[string]bool{"tx-checksum-ip-generic": false}}}})
	out.Phases["csum-restore"] = tu.Apply(ctx, Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: s.B, Offloads: map[string]bool{"tx-checksum-ip-generic": true, "tx-tcp-segmentation": true, "tx-tcp6-segmentation": true}}}})
	out.Phases["hang"] = tu.MitigateHang(s.B)
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var ma, mi int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}

func TestNetnsVeth(t *testing.T) {
	requireRoot(t, "ip", "ethtool")
	id := fmt.Sprintf("%04x%04x", os.Getpid()&0xffff, rand.IntN(0x10000))
	a, b := "e1ka"+id, "e1kb"+id
	ns := netnstest.New(t, "e1kt")
	netnstest.Veth(t, netnstest.End{NS: ns, Name: a, Up: true}, netnstest.End{NS: ns, Name: b, Up: true})
	// run runs a command in the namespace and returns its stdout alone
	// (unlike Namespace.Run): the values compared below must not pick up
	// a warning on stderr.
	run := func(args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		cmd := ns.Command(args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}

	spec := helperSpec{A: a, B: b,
		Copybreak: !fileExists("/sys/module/e1000e"), // never touch a real host's e1000e
		BridgeNF:  kernelAtLeast(5, 3),               // per-namespace since 5.3
	}
	specJSON, _ := json.Marshal(spec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(specJSON))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	var out helperOut
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("helper output: %v\n%s", err, stdout)
	}
	for _, phase := range []string{"apply", "again", "read", "csum-off", "csum-restore", "hang"} {
		t.Logf("%s:\n%s", phase, reportLines(out.Phases[phase]))
	}
	apply := out.Phases["apply"]
	get := func(rs []Report, knob, target string) Report {
		t.Helper()
		return find(t, rs, knob, target)
	}

	// e1000e-only knobs and IRQs: unavailable on veth, never errors.
	unavail := []struct{ knob, target string }{
		{"itr", a}, {"rings", a},
		{"irq-affinity", a + "-rx-0"}, {"irq-affinity", a + "-tx-0"}, {"irq-affinity", a},
	}
	if spec.Copybreak {
		unavail = append(unavail, struct{ knob, target string }{"copybreak", "e1000e (all ports)"})
	}
	for _, u := range unavail {
		if r := get(apply, u.knob, u.target); r.Status != StatusUnavailable {
			t.Errorf("%s %s: %v, want unavailable", u.target, u.knob, r)
		}
	}
	for _, r := range apply {
		if r.Status == StatusError {
			t.Errorf("apply: %v", r)
		}
	}
	// Offloads: set through the real ethtool ioctls and read back.
	for _, f := range []string{"tx-generic-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation"} {
		if r := get(apply, f, a); r.Status != StatusChanged || r.Before != "on" || r.After != "off" {
			t.Errorf("%s %s: %v, want changed on -> off", a, f, r)
		}
	}
	if r := get(apply, "rx-gro", b); r.Status != StatusChanged || r.After != "on" {
		t.Errorf("%s rx-gro: %v, want changed to on", b, r)
	}
	if r := get(apply, "rps-cpus", a+" rx-0"); r.Status != StatusChanged || r.After != lastCPU(out.CPUs) {
		t.Errorf("rps: %v, want changed to cpu %s", r, lastCPU(out.CPUs))
	}
	// veth has a NAPI instance only with GRO (or XDP) on: b has GRO on.
	if r := get(apply, "threaded-napi", b); r.Status != StatusChanged && r.Status != StatusUnavailable {
		t.Errorf("threaded on %s: %v, want changed or unavailable", b, r)
	}
	for _, key := range []string{"ipv4.conf.%s.forwarding", "ipv6.conf.%s.forwarding", "ipv6.conf.%s.accept_ra",
		"ipv4.conf.%s.arp_ignore", "ipv4.conf.%s.arp_announce", "ipv4.conf.%s.rp_filter", "ipv6.conf.%s.disable_ipv6"} {
		r := get(apply, "net."+fmt.Sprintf(key, a), a)
		if (r.Status != StatusChanged && r.Status != StatusOK) || r.After != r.Wanted {
			t.Errorf("%s: %v", r.Knob, r)
		}
	}
	if spec.BridgeNF {
		for _, k := range bridgeNFKeys {
			r := get(apply, "net.bridge."+k, "bridge netfilter")
			if r.Status == StatusUnavailable {
				continue // no br_netfilter on this host: fine, the fake tests cover the message
			}
			if r.After != "0" {
				t.Errorf("%s: %v, want 0", k, r)
			}
		}
	}

	// Apply twice: nothing changes.
	for _, r := range out.Phases["again"] {
		if r.Status != StatusOK && r.Status != StatusUnavailable {
			t.Errorf("second apply: %v", r)
		}
	}
	for _, r := range out.Phases["read"] {
		if r.Status != StatusOK && r.Status != StatusUnavailable {
			t.Errorf("read: %v", r)
		}
	}
	// The kernel's own dependency: checksum off takes TSO with it.
	if r := get(out.Phases["csum-off"], "tx-checksum-ip-generic", b); r.Status != StatusChanged ||
		!strings.Contains(r.Message, "tx-tcp-segmentation on->off") {
		t.Errorf("checksum off on %s: %v, want TSO reported off with it", b, r)
	}
	restore := out.Phases["csum-restore"]
	for _, f := range []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-tcp6-segmentation"} {
		if r := get(restore, f, b); r.After != "on" || r.Status == StatusError {
			t.Errorf("restore %s: %v", f, r)
		}
	}
	if r := get(out.Phases["hang"], "hang-mitigation", b); r.Status != StatusChanged {
		t.Errorf("hang mitigation on %s: %v", b, r)
	}

	// Independent check with the system's tools.
	k := run("ethtool", "-k", a)
	for _, line := range []string{"tcp-segmentation-offload: off", "generic-segmentation-offload: off", "generic-receive-offload: off"} {
		if !strings.Contains(k, line) {
			t.Errorf("ethtool -k %s lacks %q:\n%s", a, line, k)
		}
	}
	if v := strings.TrimSpace(run("cat", "/proc/sys/net/ipv4/conf/"+a+"/arp_ignore")); v != "8" {
		t.Errorf("arp_ignore in the namespace = %q, want 8", v)
	}
	mask := strings.TrimSpace(run("cat", "/sys/class/net/"+a+"/queues/rx-0/rps_cpus"))
	if s, err := ParseCPUMask(mask); err != nil || s.String() != lastCPU(out.CPUs) {
		t.Errorf("rps_cpus = %q, want cpu %s", mask, lastCPU(out.CPUs))
	}
}

func lastCPU(list string) string {
	s, err := ParseCPUList(list)
	if err != nil || len(s) == 0 {
		return "?"
	}
	return fmt.Sprint(s[len(s)-1])
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestOpenKmsgReal reads the real kernel log: only records written after
// OpenKmsg arrive, and Close ends a blocked Read.
func TestOpenKmsgReal(t *testing.T) {
	requireRoot(t)
	marker := fmt.Sprintf("e1kbox-tuning-test-%d-%x", os.Getpid(), rand.Uint32())
	writeKmsg := func(msg string) {
		t.Helper()
		if err := os.WriteFile("/dev/kmsg", []byte("<6>"+msg+"\n"), 0); err != nil {
			t.Fatalf("write /dev/kmsg: %v", err)
		}
	}
	writeKmsg(marker + " before")
	k, err := OpenKmsg()
	if err != nil {
		t.Fatal(err)
	}
	writeKmsg(marker + " after")
	timer := time.AfterFunc(5*time.Second, func() { k.Close() })
	defer timer.Stop()
	buf := make([]byte, 16*1024)
	var got KmsgRecord
	for {
		n, err := k.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (marker not seen)", err)
		}
		rec, err := ParseKmsg(buf[:n])
		if err != nil {
			t.Fatalf("ParseKmsg(%q): %v", buf[:n], err)
		}
		if strings.HasPrefix(rec.Message, marker) {
			got = rec
			break
		}
	}
	if got.Message != marker+" after" || got.Facility != 1 || got.Level != 6 {
		t.Errorf("first marker record %+v, want %q at facility 1 (user) level 6", got, marker+" after")
	}
	// Close unblocks a pending Read.
	done := make(chan error, 1)
	go func() {
		for { // other kernel messages may still arrive
			if _, err := k.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	// Should Close not unblock it, the reader ends with the test's process;
	// it calls nothing of the test's.
	time.Sleep(50 * time.Millisecond)
	k.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Read after Close returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
}
