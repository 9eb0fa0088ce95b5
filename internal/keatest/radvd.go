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

// StartRadvd runs radvd on iface in ns as the ISP's router: RAs every 3-4
// s, router lifetime 600 s, onlink announcing the on-link prefix without
// SLAAC (the ISP's link addresses are its own). Its output is logged if
// the test fails; it is stopped at the test's cleanup.
func StartRadvd(t testing.TB, ns Namespace, iface string, onlink netip.Prefix) {
	t.Helper()
	testenv.Require(t, "root", "radvd")
	dir := t.TempDir()
	conf := filepath.Join(dir, "radvd.conf")
	body := fmt.Sprintf("interface %s {\n\tAdvSendAdvert on;\n\tMinRtrAdvInterval 3;\n\tMaxRtrAdvInterval 4;\n"+
		"\tAdvDefaultLifetime 600;\n\tprefix %s { AdvOnLink on; AdvAutonomous off; };\n};\n", iface, onlink)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	netnstest.StartLogged(t, "radvd", ns.Command("radvd", "-n", "-C", conf, "-p", filepath.Join(dir, "radvd.pid"), "-m", "stderr", "-u", "root"))
}
