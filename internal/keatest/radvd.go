package keatest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// Radvd is what StartRadvdWith announces.
type Radvd struct {
	// Prefix is the on-link prefix.
	Prefix netip.Prefix
	// Autonomous sets its A flag: hosts on the link (the box's WAN)
	// form SLAAC addresses in it.
	Autonomous bool
}

// StartRadvd runs radvd on iface in ns as the ISP's router: RAs every 3-4
// s, router lifetime 600 s, onlink announcing the on-link prefix without
// SLAAC (the ISP's link addresses are its own). Its output is logged if
// the test fails; it is stopped at the test's cleanup.
func StartRadvd(t testing.TB, ns Namespace, iface string, onlink netip.Prefix) {
	t.Helper()
	StartRadvdWith(t, ns, iface, Radvd{Prefix: onlink})
}

// StartRadvdWith is StartRadvd announcing r: with r.Autonomous the prefix
// is for SLAAC too (radvd's default lifetimes: valid 86400 s, preferred
// 14400 s).
func StartRadvdWith(t testing.TB, ns Namespace, iface string, r Radvd) {
	t.Helper()
	testenv.Require(t, "root", "radvd")
	dir := t.TempDir()
	conf := filepath.Join(dir, "radvd.conf")
	auto := "off"
	if r.Autonomous {
		auto = "on"
	}
	body := fmt.Sprintf("interface %s {\n\tAdvSendAdvert on;\n\tMinRtrAdvInterval 3;\n\tMaxRtrAdvInterval 4;\n"+
		"\tAdvDefaultLifetime 600;\n\tprefix %s { AdvOnLink on; AdvAutonomous %s; };\n};\n", iface, r.Prefix, auto)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	netnstest.StartLogged(t, "radvd", ns.Command("radvd", "-n", "-C", conf, "-p", filepath.Join(dir, "radvd.pid"), "-m", "stderr", "-u", "root"))
}
