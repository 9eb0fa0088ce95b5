package dashboard

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
)

// TestStoreAdapterVersion: Version, which the dashboard's publisher reads
// every second without encoding the config, says what Current says, from
// the first load through an applied change and its rollback.
func TestStoreAdapterVersion(t *testing.T) {
	dir := t.TempDir()
	factory := filepath.Join(dir, "factory.json")
	if err := os.WriteFile(factory, []byte(`{"version": 2, "ports": [{"name": "port1", "interface": "eth1"}, {"name": "port2", "interface": "eth2"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	store := config.NewStore(config.Paths{Factory: factory, Live: filepath.Join(dir, "perm", "config.json")},
		config.Env{Interfaces: []string{"eth1", "eth2"}})
	if _, _, err := store.Load(); err != nil {
		t.Fatal(err)
	}
	a := NewStore(store)
	check := func(when string) {
		t.Helper()
		_, want := a.Current()
		for range 2 { // the lookup, then the cached answer
			if diff := cmp.Diff(want, a.Version()); diff != "" {
				t.Errorf("%s: Version (-Current's +got):\n%s", when, diff)
			}
		}
	}
	check("after Load")
	first := a.Version()

	b, _ := a.Current()
	cfg, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bridge.FDBSize = 4096
	nb, err := config.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(nb, time.Minute); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	check("after Apply")
	if a.Version().ID == first.ID {
		t.Errorf("Version after Apply is still %s", first.ID)
	}
	if _, err := store.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	check("after the rollback")
	if got := a.Version(); got.ID != first.ID {
		t.Errorf("Version after the rollback = %s, want %s", got.ID, first.ID)
	}
}
