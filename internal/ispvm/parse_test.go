package ispvm

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/internal/testenv"
)

func TestParseDepends(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{in: "license=GPL\x00depends=ppp_generic,pppox\x00vermagic=6.1", want: []string{"ppp_generic", "pppox"}},
		{in: "depends=\x00name=e1000", want: nil},
		{in: "name=slhc", want: nil},
		{in: "depends=nf-conntrack, llc ,", want: []string{"nf_conntrack", "llc"}},
	} {
		if diff := cmp.Diff(tc.want, parseDepends([]byte(tc.in))); diff != "" {
			t.Errorf("parseDepends(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func FuzzParseDepends(f *testing.F) {
	f.Add([]byte("depends=a,b\x00x=y"))
	f.Add([]byte("depends=,,\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range parseDepends(b) {
			if d == "" || strings.ContainsAny(d, ",-\x00") {
				t.Errorf("module name %q", d)
			}
		}
	})
}

func TestLoadOrder(t *testing.T) {
	graph := map[string][]string{
		"pppoe": {"pppox", "ppp_generic"}, "pppox": {"ppp_generic"}, "ppp_generic": {"slhc"}, "slhc": nil,
		"8021q": {"garp", "mrp"}, "garp": {"stp", "llc"}, "stp": {"llc"}, "llc": nil, "mrp": nil,
		"a": {"b"}, "b": {"a"},
	}
	deps := func(m string) ([]string, error) {
		d, ok := graph[m]
		if !ok {
			return nil, errors.New("no module " + m)
		}
		return d, nil
	}
	for _, tc := range []struct {
		wanted []string
		want   []string
		err    string
	}{
		{wanted: []string{"pppoe"}, want: []string{"slhc", "ppp_generic", "pppox", "pppoe"}},
		{wanted: []string{"8021q", "pppoe"}, want: []string{"llc", "stp", "garp", "mrp", "8021q", "slhc", "ppp_generic", "pppox", "pppoe"}},
		{wanted: []string{"a"}, err: "cycle: a -> b -> a"},
		{wanted: []string{"nope"}, err: "no module nope"},
	} {
		got, err := loadOrder(tc.wanted, deps)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("loadOrder(%q): error %v, want one with %q", tc.wanted, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("loadOrder(%q): %v", tc.wanted, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("loadOrder(%q) (-want +got):\n%s", tc.wanted, diff)
		}
	}
}

// bzImage is a minimal bzImage whose payload (at payload_offset past the
// setup sectors) is payload.
func bzImage(setupSects byte, payload []byte) []byte {
	sects := int(setupSects)
	if sects == 0 {
		sects = 4
	}
	b := make([]byte, (sects+1)*512+16)
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint32(b[0x248:], 16)
	return append(b, payload...)
}

func TestBzPayload(t *testing.T) {
	xz := []byte("\xfd7zXZ\x00rest")
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte
		err  bool
	}{
		{name: "xz", in: bzImage(30, xz), want: xz},
		{name: "zero setup sectors mean 4", in: bzImage(0, xz), want: xz},
		{name: "empty", in: nil, err: true},
		{name: "gzip", in: bzImage(30, []byte("\x1f\x8b\x08\x00\x00\x00")), err: true},
		{name: "short", in: []byte("MZ"), err: true},
		{name: "no HdrS", in: make([]byte, 0x300), err: true},
	} {
		got, err := bzPayload(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.err)
		}
		if diff := cmp.Diff(tc.want, got); !tc.err && diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

func FuzzBzPayload(f *testing.F) {
	f.Add(bzImage(30, []byte("\xfd7zXZ\x00")))
	f.Add(make([]byte, 0x250))
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := bzPayload(b); err == nil && !strings.HasPrefix(string(p), "\xfd7zXZ\x00") {
			t.Errorf("payload %q is not xz", p)
		}
	})
}

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Event
		ok   bool
	}{
		{line: "ISPVM-EVENT up ppp0 10.64.0.1 10.64.0.2", want: Event{Kind: "up", Args: []string{"ppp0", "10.64.0.1", "10.64.0.2"}}, ok: true},
		{line: "[    3.1] x ISPVM-EVENT ready eth0.7 4.69", want: Event{Kind: "ready", Args: []string{"eth0.7", "4.69"}}, ok: true},
		{line: "ISPVM-EVENT ", ok: false},
		{line: "Connect: ppp0 <--> eth0", ok: false},
	} {
		got, ok := parseEvent(tc.line)
		if ok != tc.ok {
			t.Errorf("parseEvent(%q): ok %v, want %v", tc.line, ok, tc.ok)
		}
		if diff := cmp.Diff(tc.want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())); diff != "" {
			t.Errorf("parseEvent(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add("ISPVM-EVENT up ppp0 1 2")
	f.Add("noise ISPVM-EVENT  \t")
	f.Fuzz(func(t *testing.T, line string) {
		if ev, ok := parseEvent(line); ok && (ev.Kind == "" || strings.ContainsAny(ev.Kind, " \t\n")) {
			t.Errorf("event kind %q", ev.Kind)
		}
	})
}

// unpack extracts a cpio archive with busybox's cpio into a new directory.
func unpack(t *testing.T, archive []byte) string {
	t.Helper()
	testenv.Require(t, "busybox")
	dir := t.TempDir()
	cmd := exec.Command("busybox", "cpio", "-i", "-d")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(archive))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i: %v: %s", err, out)
	}
	return dir
}

func TestCPIO(t *testing.T) {
	var buf strings.Builder
	w := newCPIO(&buf)
	w.Dir("etc", 0o755)
	w.File("etc/a", 0o600, []byte("12345")) // padded data
	w.File("etc/empty", 0o644, nil)
	w.Symlink("etc/link", "/etc/a")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(buf.String())%4 != 0 {
		t.Errorf("archive length %d is not a multiple of 4", len(buf.String()))
	}
	dir := unpack(t, []byte(buf.String()))
	got := map[string]string{}
	for _, name := range []string{"etc/a", "etc/empty"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dir, name))
		got[name] = string(b) + " " + fi.Mode().Perm().String()
	}
	target, err := os.Readlink(filepath.Join(dir, "etc/link"))
	if err != nil {
		t.Fatal(err)
	}
	got["etc/link"] = target
	want := map[string]string{"etc/a": "12345 -rw-------", "etc/empty": " -rw-r--r--", "etc/link": "/etc/a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unpacked archive (-want +got):\n%s", diff)
	}
}

func TestRunArchive(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		files map[string][]string // file: lines it must hold
	}{
		{name: "pap", cfg: Config{Tap: "t"}, files: map[string][]string{
			"etc/ppp/pap-secrets":    {`"e1kbox" * "secret" *`},
			"etc/ppp/isp-options":    {"require-pap", "mru 1492", "+ipv6", "lcp-echo-interval 0"},
			"etc/ispvm/env":          {"VLAN=0", "ROLE=isp", "ACNAME='ispvm'", "PD=2001:db8:100::/56", "LINK6=2001:db8:ff::1"},
			"etc/ispvm/dibbler.conf": {"\t\tpd-pool 2001:db8:100::/56", "\t\tpd-length 56", "\t\tpool 2001:db8:ff::100-2001:db8:ff::1ff"},
		}},
		{name: "chap, VLAN, DNS", cfg: Config{Tap: "t", CHAP: true, VLAN: 7, User: "u@isp", ACName: "it's", MRU: 1400, LCPEcho: 2,
			DNS: []netip.Addr{mustAddr("192.0.2.53"), mustAddr("2001:db8::53")}}, files: map[string][]string{
			"etc/ppp/chap-secrets":   {`"u@isp" * "secret" *`},
			"etc/ppp/isp-options":    {"require-chap", "mru 1400", "ms-dns 192.0.2.53", "lcp-echo-interval 2", "lcp-echo-failure 3"},
			"etc/ispvm/env":          {"VLAN=7", `ACNAME='it'\''s'`},
			"etc/ispvm/dibbler.conf": {"\toption dns-server 2001:db8::53"},
			"etc/ispvm/hosts":        {"198.51.100.1 " + UpstreamName, "2001:db8:ffff::1 " + UpstreamName},
		}},
		{name: "kernel mode at 1500", cfg: Config{Tap: "t", KernelMode: true, MRU: 1500}, files: map[string][]string{
			"etc/ppp/isp-options": {"mru 1500", "mtu 1500"},
			"etc/ispvm/env":       {"KERNEL=1", "MRU=1500"},
		}},
		{name: "DNS on Local and lo, hosts", cfg: Config{Tap: "t", DNS: []netip.Addr{mustAddr("10.64.0.1"), mustAddr("192.0.2.53")},
			Hosts: map[string][]netip.Addr{"b.example": {mustAddr("192.0.2.2")}, "a.example": {mustAddr("192.0.2.1"), mustAddr("2001:db8::1")}}},
			files: map[string][]string{
				"etc/ppp/isp-options": {"ms-dns 10.64.0.1", "ms-dns 192.0.2.53"},
				"etc/ispvm/env":       {"DNSADDRS='192.0.2.53'"},
				"etc/ispvm/hosts":     {"192.0.2.1 a.example", "2001:db8::1 a.example", "192.0.2.2 b.example"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.defaults()
			if err := c.validate(); err != nil {
				t.Fatal(err)
			}
			a, err := runArchive(&c)
			if err != nil {
				t.Fatal(err)
			}
			dir := unpack(t, a)
			for name, lines := range tc.files {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				have := strings.Split(string(b), "\n")
				for _, l := range lines {
					if !contains(have, l) {
						t.Errorf("%s lacks the line %q:\n%s", name, l, b)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "etc/inittab")); err != nil {
				t.Errorf("the scripts are missing: %v", err)
			}
			if fi, err := os.Stat(filepath.Join(dir, "usr/sbin/acd")); c.KernelMode != (err == nil) || err == nil && fi.Mode()&0o111 == 0 {
				t.Errorf("usr/sbin/acd: %v, %v; want an executable with KernelMode %v", fi, err, c.KernelMode)
			}
		})
	}
}

func contains(lines []string, l string) bool {
	for _, h := range lines {
		if h == l {
			return true
		}
	}
	return false
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{name: "ok", cfg: Config{Tap: "t"}},
		{name: "no tap", cfg: Config{}, err: "no tap"},
		{name: "multicast MAC", cfg: Config{Tap: "t", MAC: "01:00:5e:00:00:01"}, err: "MAC"},
		{name: "bad MAC", cfg: Config{Tap: "t", MAC: "52:54"}, err: "MAC"},
		{name: "VLAN", cfg: Config{Tap: "t", VLAN: 4095}, err: "VLAN 4095"},
		{name: "MRU", cfg: Config{Tap: "t", MRU: 1500}, err: "MRU 1500"},
		{name: "RFC 4638 in kernel mode", cfg: Config{Tap: "t", MRU: 1500, KernelMode: true}},
		{name: "MRU above 1500", cfg: Config{Tap: "t", MRU: 1501, KernelMode: true}, err: "MRU 1501"},
		{name: "quote", cfg: Config{Tap: "t", Password: `a"b`}, err: "quotes"},
		{name: "Link6", cfg: Config{Tap: "t", Link6: mustPrefix("2001:db8::/48")}, err: "Link6"},
		{name: "host name", cfg: Config{Tap: "t", Hosts: map[string][]netip.Addr{"a b": {mustAddr("192.0.2.1")}}}, err: "Hosts"},
		{name: "host without address", cfg: Config{Tap: "t", Hosts: map[string][]netip.Addr{"a.example": nil}}, err: "Hosts"},
	} {
		c := tc.cfg
		c.defaults()
		err := c.validate()
		if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestCachedImage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // under cacheDir
		want  string            // the image's directory, "" for none
	}{
		{name: "this layout", files: map[string]string{"ispvm-a/layout": layout + "\n", "ispvm-a/big.sha256": "ab\n"}, want: "ispvm-a"},
		{name: "another layout", files: map[string]string{"ispvm-a/layout": "0\n", "ispvm-a/big.sha256": "ab\n"}},
		{name: "unfinished", files: map[string]string{"ispvm-a/layout": layout + "\n"}},
		{name: "a build directory", files: map[string]string{"build-1/layout": layout + "\n", "build-1/big.sha256": "ab\n"}},
	} {
		dir := t.TempDir()
		for name, data := range tc.files {
			os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		img, err := cachedImage(dir)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: got image %s, want none", tc.name, img.Dir)
		case tc.want != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (img.Dir != filepath.Join(dir, tc.want) || img.BigSHA256 != "ab"):
			t.Errorf("%s: got %+v, want the image in %s with BigSHA256 ab", tc.name, img, tc.want)
		}
	}
}
