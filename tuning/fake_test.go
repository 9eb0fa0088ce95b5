package tuning

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeFeature is one netdev feature of a fake NIC.
type fakeFeature struct {
	wanted, active, changeable bool
}

// fakeNIC follows a driver's ethtool rules; for e1000e those measured on
// the target kernel (see e1000e-facts.md).
type fakeNIC struct {
	driver   string
	rxUsecs  uint32
	itr      uint32 // e1000e's stored itr_setting
	ring     Ring
	features map[string]*fakeFeature
	// quirk runs after every feature change (to model odd drivers).
	quirk func(fs map[string]*fakeFeature)
}

// fakeOp is one mutating ethtool call, with the carrier at the time.
type fakeOp struct {
	Op, Ifname, Carrier string
}

// fakeEthtool is an Ethtool over fake NICs whose link resets drop the
// carrier file in the fake tree for resetDown.
type fakeEthtool struct {
	root      string
	resetDown time.Duration // <0: the carrier never comes back

	mu     sync.Mutex
	nics   map[string]*fakeNIC
	ops    []fakeOp
	timers []*time.Timer
	wg     sync.WaitGroup
}

// kernelFeatureNames is a part of the kernel's feature string set.
var kernelFeatureNames = []string{
	"tx-scatter-gather", "tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "highdma",
	"tx-scatter-gather-fraglist", "tx-vlan-hw-insert", "rx-vlan-hw-parse", "rx-vlan-filter",
	"tx-generic-segmentation", "rx-gro", "rx-lro", "tx-tcp-segmentation", "tx-tcp-ecn-segmentation",
	"tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "rx-hashing", "rx-checksum", "tx-nocache-copy",
	"rx-fcs", "rx-all", "rx-gro-list", "rx-udp-gro-forwarding", "rx-gro-hw", "rx-ntuple-filter",
}

func newFeatures(changeable, on []string) map[string]*fakeFeature {
	fs := map[string]*fakeFeature{}
	for _, n := range kernelFeatureNames {
		fs[n] = &fakeFeature{}
	}
	for _, n := range changeable {
		fs[n].changeable = true
	}
	for _, n := range on {
		fs[n].wanted, fs[n].active = true, true
	}
	return fs
}

// newE1000eNIC has the defaults and changeable set measured on the emulated 82574L.
func newE1000eNIC() *fakeNIC {
	return &fakeNIC{
		driver: "e1000e", rxUsecs: 3, itr: 3,
		ring: Ring{RX: 256, TX: 256, RXMax: 4096, TXMax: 4096},
		features: newFeatures(
			[]string{"rx-all", "rx-checksum", "rx-fcs", "rx-gro", "rx-gro-list", "rx-hashing", "rx-udp-gro-forwarding",
				"rx-vlan-hw-parse", "tx-checksum-ip-generic", "tx-generic-segmentation", "tx-nocache-copy",
				"tx-scatter-gather", "tx-tcp-mangleid-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation",
				"tx-vlan-hw-insert"},
			[]string{"rx-checksum", "rx-gro", "rx-hashing", "rx-vlan-hw-parse", "tx-checksum-ip-generic",
				"tx-generic-segmentation", "tx-scatter-gather", "tx-tcp-segmentation", "tx-tcp6-segmentation",
				"tx-vlan-hw-insert", "highdma", "rx-vlan-filter"}),
	}
}

func newVethNIC() *fakeNIC {
	return &fakeNIC{driver: "veth", features: newFeatures(
		[]string{"rx-gro", "tx-generic-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-scatter-gather",
			"tx-checksum-ip-generic", "rx-checksum", "tx-nocache-copy", "rx-gro-list", "rx-udp-gro-forwarding"},
		[]string{"tx-generic-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-scatter-gather",
			"tx-checksum-ip-generic", "rx-checksum", "highdma"})}
}

func newVirtioNIC() *fakeNIC {
	n := newVethNIC()
	n.driver = "virtio_net"
	n.ring = Ring{RX: 256, TX: 256, RXMax: 1024, TXMax: 1024}
	return n
}

func (f *fakeEthtool) nic(ifname string) (*fakeNIC, error) {
	n, ok := f.nics[ifname]
	if !ok {
		return nil, fmt.Errorf("fake ethtool %s: %w", ifname, syscall.ENODEV)
	}
	return n, nil
}

func (f *fakeEthtool) carrierPath(ifname string) string {
	return filepath.Join(f.root, "sys/class/net", ifname, "carrier")
}

// record logs a mutating call; f.mu is held.
func (f *fakeEthtool) record(op, ifname string) {
	c, _ := os.ReadFile(f.carrierPath(ifname))
	f.ops = append(f.ops, fakeOp{Op: op, Ifname: ifname, Carrier: strings.TrimSpace(string(c))})
}

// linkReset drops the carrier now and raises it after resetDown; f.mu is held.
func (f *fakeEthtool) linkReset(ifname string) {
	p := f.carrierPath(ifname)
	os.WriteFile(p, []byte("0\n"), 0o644)
	if f.resetDown < 0 {
		return
	}
	f.wg.Add(1)
	f.timers = append(f.timers, time.AfterFunc(f.resetDown, func() {
		defer f.wg.Done()
		os.WriteFile(p, []byte("1\n"), 0o644)
	}))
}

// stop cancels pending carrier timers and waits for running ones.
func (f *fakeEthtool) stop() {
	f.mu.Lock()
	for _, t := range f.timers {
		if t.Stop() {
			f.wg.Done()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeEthtool) opsSnapshot() []fakeOp {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeOp(nil), f.ops...)
}

func (f *fakeEthtool) DriverName(ifname string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return "", err
	}
	return n.driver, nil
}

func (f *fakeEthtool) GetCoalesce(ifname string) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return 0, err
	}
	if n.driver != "e1000e" {
		return 0, syscall.EOPNOTSUPP
	}
	// e1000e_get_coalesce
	if n.itr <= 4 {
		return n.itr, nil
	}
	return 1000000 / n.itr, nil
}

func (f *fakeEthtool) SetCoalesce(ifname string, u uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return err
	}
	if n.driver != "e1000e" {
		return syscall.EOPNOTSUPP
	}
	// e1000e_set_coalesce
	if u > 10000 || (u > 4 && u < 10) || u == 2 {
		return syscall.EINVAL
	}
	f.record(fmt.Sprintf("coalesce rx-usecs %d", u), ifname)
	if u <= 4 {
		n.itr = u
	} else {
		n.itr = (1000000 / u) &^ 3
	}
	return nil
}

func (f *fakeEthtool) GetRing(ifname string) (Ring, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return Ring{}, err
	}
	if n.ring.RXMax == 0 {
		return Ring{}, syscall.EOPNOTSUPP
	}
	return n.ring, nil
}

func (f *fakeEthtool) SetRing(ifname string, rx, tx uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return err
	}
	if n.ring.RXMax == 0 {
		return syscall.EOPNOTSUPP
	}
	if rx > n.ring.RXMax || tx > n.ring.TXMax { // ethtool core
		return syscall.EINVAL
	}
	f.record(fmt.Sprintf("ring rx %d tx %d", rx, tx), ifname)
	clampRound := func(v uint32) uint32 { return (max(v, 64) + 7) &^ 7 } // e1000e_set_ringparam
	n.ring.RX, n.ring.TX = clampRound(rx), clampRound(tx)
	if n.driver == "e1000e" {
		f.linkReset(ifname)
	}
	return nil
}

func (f *fakeEthtool) Features(ifname string) (map[string]Feature, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return nil, err
	}
	out := map[string]Feature{}
	for name, ff := range n.features {
		out[name] = Feature{Active: ff.active, Changeable: ff.changeable}
	}
	return out, nil
}

func (f *fakeEthtool) Change(ifname string, want map[string]bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.nic(ifname)
	if err != nil {
		return err
	}
	var ops []string
	for name, v := range want {
		if _, ok := n.features[name]; !ok {
			return fmt.Errorf("unsupported feature %q", name) // like safchain
		}
		ops = append(ops, name+"="+onOff(v))
	}
	f.record("features "+strings.Join(ops, ","), ifname)
	before := map[string]bool{}
	for name, ff := range n.features {
		before[name] = ff.active
		if v, ok := want[name]; ok && ff.changeable { // fixed ones: accepted silently
			ff.wanted = v
		}
		if ff.changeable {
			ff.active = ff.wanted
		}
	}
	fixFeatures(n.features)
	if n.quirk != nil {
		n.quirk(n.features)
	}
	if n.driver == "e1000e" {
		for name := range e1000eResetFeatures {
			if n.features[name].active != before[name] {
				f.linkReset(ifname)
				break
			}
		}
	}
	return nil
}

// fixFeatures is the part of netdev_fix_features the plans touch.
func fixFeatures(fs map[string]*fakeFeature) {
	on := func(n string) bool { return fs[n].active }
	if !on("tx-scatter-gather") {
		for _, n := range tsoFeatures {
			if ff, ok := fs[n]; ok {
				ff.active = false
			}
		}
		fs["tx-generic-segmentation"].active = false
	}
	if !on("tx-checksum-ip-generic") && !on("tx-checksum-ipv4") {
		fs["tx-tcp-segmentation"].active = false
		fs["tx-tcp-ecn-segmentation"].active = false
	}
	if !on("tx-checksum-ip-generic") && !on("tx-checksum-ipv6") {
		fs["tx-tcp6-segmentation"].active = false
	}
	if !on("tx-tcp-segmentation") {
		fs["tx-tcp-mangleid-segmentation"].active = false
	}
}

// fakeSys is a fake /proc and /sys tree with a fake ethtool.
type fakeSys struct {
	t   *testing.T
	dir string
	et  *fakeEthtool
	// addrs are the kernel addresses per interface for Tuner.Addrs.
	addrs map[string][]netip.Prefix
}

func newFakeSys(t *testing.T) *fakeSys {
	t.Helper()
	f := &fakeSys{t: t, dir: t.TempDir(), addrs: map[string][]netip.Prefix{}}
	f.et = &fakeEthtool{root: f.dir, nics: map[string]*fakeNIC{}, resetDown: 150 * time.Millisecond}
	t.Cleanup(f.et.stop)
	interrupts, err := os.ReadFile("testdata/interrupts-e1000e-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.file("proc/interrupts", string(interrupts))
	f.file("sys/devices/system/cpu/online", "0-1\n")
	f.file(copybreakPath[1:], "256\n")
	f.kernelConfig("CONFIG_BRIDGE=y\n# CONFIG_BRIDGE_NETFILTER is not set\nCONFIG_E1000E=y\n")
	return f
}

func (f *fakeSys) file(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (f *fakeSys) kernelConfig(cfg string) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(cfg))
	zw.Close()
	f.file("proc/config.gz", b.String())
}

// netdev creates /sys/class/net/<if> with carrier, queues, threaded and
// the per-interface sysctls.
func (f *fakeSys) netdev(ifname string, n *fakeNIC) {
	f.et.nics[ifname] = n
	d := "sys/class/net/" + ifname + "/"
	f.file(d+"carrier", "1\n")
	f.file(d+"operstate", "up\n")
	f.file(d+"threaded", "0\n")
	f.file(d+"queues/rx-0/rps_cpus", "0\n")
	f.file(d+"queues/tx-0/xps_rxqs", "0\n")
	for k, v := range map[string]string{"forwarding": "0", "arp_ignore": "0", "arp_announce": "0", "rp_filter": "2"} {
		f.file("proc/sys/net/ipv4/conf/"+ifname+"/"+k, v+"\n")
	}
	for k, v := range map[string]string{"forwarding": "0", "accept_ra": "1", "disable_ipv6": "0"} {
		f.file("proc/sys/net/ipv6/conf/"+ifname+"/"+k, v+"\n")
	}
}

// e1000e adds an e1000e port whose MSI-X vectors are irqBase..irqBase+2
// (they must match testdata/interrupts-e1000e-2cpu.txt).
func (f *fakeSys) e1000e(ifname string, irqBase int) *fakeNIC {
	f.t.Helper()
	n := newE1000eNIC()
	f.netdev(ifname, n)
	dev := "sys/class/net/" + ifname + "/device/"
	if err := os.MkdirAll(filepath.Join(f.dir, dev, "msi_irqs"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink("../../../bus/pci/drivers/e1000e", filepath.Join(f.dir, dev, "driver")); err != nil {
		f.t.Fatal(err)
	}
	for i, name := range []string{ifname + "-rx-0", ifname + "-tx-0", ifname} {
		irq := strconv.Itoa(irqBase + i)
		f.file(dev+"msi_irqs/"+irq, "msix\n")
		f.file("proc/irq/"+irq+"/smp_affinity_list", "0-1\n")
		f.file("proc/irq/"+irq+"/effective_affinity_list", "1\n")
		if err := os.MkdirAll(filepath.Join(f.dir, "proc/irq", irq, name), 0o755); err != nil {
			f.t.Fatal(err)
		}
	}
	return n
}

// veth adds a virtual port (no device directory).
func (f *fakeSys) veth(ifname string) *fakeNIC {
	n := newVethNIC()
	f.netdev(ifname, n)
	return n
}

// virtio adds a virtio_net port: a device with a driver, but virtio's
// own IRQ names.
func (f *fakeSys) virtio(ifname string) *fakeNIC {
	f.t.Helper()
	n := newVirtioNIC()
	f.netdev(ifname, n)
	dev := filepath.Join(f.dir, "sys/class/net", ifname, "device")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink("../../../../bus/virtio/drivers/virtio_net", filepath.Join(dev, "driver")); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fakeSys) tuner() *Tuner {
	t := New(f.dir, f.et)
	t.Addrs = func(ifname string) ([]netip.Prefix, error) { return f.addrs[ifname], nil }
	t.CarrierPoll = 10 * time.Millisecond
	t.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return t
}
