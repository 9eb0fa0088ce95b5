package tuning

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ---- copybreak ----

const copybreakPath = "/sys/module/e1000e/parameters/copybreak"

// copybreakKnob is e1000e's only writable module parameter, global for all
// e1000e ports and read by the driver for every received frame.
type copybreakKnob struct{ r root }

func (k *copybreakKnob) Name() string     { return "copybreak" }
func (k *copybreakKnob) Target() string   { return "e1000e (all ports)" }
func (k *copybreakKnob) ResetsLink() bool { return false }

func (k *copybreakKnob) parse(want string) (uint64, string, error) {
	n, err := strconv.ParseUint(want, 10, 32)
	if err != nil {
		return 0, "", fmt.Errorf("copybreak: want bytes 0..%d: %w", uint32(1<<32-1), err)
	}
	return n, "", nil
}

func (k *copybreakKnob) get() (uint64, error) {
	if !k.r.exists("/sys/module/e1000e") {
		return 0, unavailable("the kernel has no e1000e driver (no /sys/module/e1000e)")
	}
	s, err := k.r.read(copybreakPath)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 32)
}

func (k *copybreakKnob) set(_, want uint64) (string, error) {
	return "", k.r.write(copybreakPath, strconv.FormatUint(want, 10))
}

func (k *copybreakKnob) same(cur, want uint64) bool { return cur == want }
func (k *copybreakKnob) format(v uint64) string     { return strconv.FormatUint(v, 10) }

// ---- sysctls ----

// sysctlKnob is one integer under /proc/sys. guard, if set, runs before a
// write and vetoes it with an error.
type sysctlKnob struct {
	r      root
	key    string // "net/ipv4/conf/eth1/forwarding"
	target string
	guard  func() error
	// missing explains an absent file; nil means "does not exist".
	missing func() error
}

func (k *sysctlKnob) Name() string {
	// sysctl(8) notation: dots separate, a dot in a name becomes a slash.
	parts := strings.Split(k.key, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(parts, ".")
}
func (k *sysctlKnob) Target() string   { return k.target }
func (k *sysctlKnob) ResetsLink() bool { return false }

func (k *sysctlKnob) path() string { return "/proc/sys/" + k.key }

func (k *sysctlKnob) parse(want string) (string, string, error) {
	n, err := strconv.Atoi(want)
	if err != nil {
		return "", "", fmt.Errorf("%s: want an integer: %w", k.Name(), err)
	}
	return strconv.Itoa(n), "", nil
}

func (k *sysctlKnob) get() (string, error) {
	s, err := k.r.read(k.path())
	if err != nil && isUnavailable(err) && k.missing != nil {
		return "", k.missing()
	}
	return s, err
}

func (k *sysctlKnob) set(_, want string) (string, error) {
	if k.guard != nil {
		if err := k.guard(); err != nil {
			return "", err
		}
	}
	return "", k.r.write(k.path(), want)
}

func (k *sysctlKnob) same(cur, want string) bool { return cur == want }
func (k *sysctlKnob) format(v string) string     { return v }

// ---- bridge netfilter ----

var bridgeNFKeys = []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"}

// bridgeNFMissing explains why /proc/sys/net/bridge does not exist. Either
// way bridged frames bypass netfilter, which is the wanted "off" state, so
// the knob reports unavailable, not an error.
func (r root) bridgeNFMissing() error {
	switch v, err := r.kernelConfig("CONFIG_BRIDGE_NETFILTER"); {
	case err == nil && (v == "y" || v == "m"):
		return unavailable("br_netfilter is not loaded; bridged traffic bypasses netfilter (effectively off)")
	default:
		return unavailable("kernel has no bridge netfilter; bridged traffic bypasses netfilter (effectively off)")
	}
}

func newBridgeNFKnob(r root, key string) Knob {
	return knob[string]{&sysctlKnob{r: r, key: "net/bridge/" + key, target: "bridge netfilter", missing: r.bridgeNFMissing}}
}

// kernelConfig returns the value of option in /proc/config.gz ("y", "m",
// a string), "" for "is not set".
func (r root) kernelConfig(option string) (string, error) {
	f, err := os.Open(r.path("/proc/config.gz"))
	if err != nil {
		return "", fmt.Errorf("kernel config: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("kernel config: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return "", fmt.Errorf("kernel config: %w", err)
	}
	cfg, err := ParseKernelConfig(data)
	if err != nil {
		return "", err
	}
	return cfg[option], nil
}

// ParseKernelConfig parses a kernel .config ("CONFIG_X=y", "# CONFIG_Y is
// not set", comments). Options that are not set map to "".
func ParseKernelConfig(data []byte) (map[string]string, error) {
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			if opt, ok := strings.CutSuffix(rest, " is not set"); ok && strings.HasPrefix(opt, "CONFIG_") {
				cfg[opt] = ""
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "CONFIG_") {
			return nil, fmt.Errorf("kernel config line %d: %q", n, line)
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		cfg[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kernel config: %w", err)
	}
	return cfg, nil
}
