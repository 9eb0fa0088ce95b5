package dashboard

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/config"
	"e1kbox/webui"
)

// pppoeStore is a store whose config has a PPPoE WAN with password pw.
func pppoeStore(t *testing.T, pw string) (*Store, *config.Store) {
	t.Helper()
	b, err := os.ReadFile("../config/testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	c.Ports[0].Addresses = nil
	c.NAT.Gateway, c.NAT.WANDHCP = netip.Addr{}, false
	c.IPv6.Enabled = new(bool)
	c.NAT.WAN.PPPoE = &config.WANPPPoE{Username: "user@isp", Password: pw}
	fb, err := config.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	factory := filepath.Join(dir, "factory.json")
	if err := os.WriteFile(factory, fb, 0o600); err != nil {
		t.Fatal(err)
	}
	store := config.NewStore(config.Paths{Factory: factory, Live: filepath.Join(dir, "perm", "config.json")},
		config.Env{Interfaces: []string{"lo", "eth0", "eth1", "eth2", "eth3", "e1khost0"}})
	t.Cleanup(store.Close)
	if _, _, err := store.Load(); err != nil {
		t.Fatal(err)
	}
	return NewStore(store), store
}

// TestStoreRedactsPassword: Current, a history version and Validate's
// input never show the PPPoE password; a config applied with the
// placeholder keeps the stored password, one with a new password takes
// it.
func TestStoreRedactsPassword(t *testing.T) {
	const pw = "s3cr3t-pw"
	a, store := pppoeStore(t, pw)
	cur, v := a.Current()
	if strings.Contains(string(cur), pw) || !strings.Contains(string(cur), config.RedactedSecret) {
		t.Fatalf("Current shows %s: want the placeholder, not the password", cur)
	}
	if errs := a.Validate(cur); len(errs) > 0 {
		t.Errorf("Validate of what Current shows: %v", errs)
	}
	for _, tc := range []struct {
		name, edit, want string
	}{
		{"placeholder keeps the password", "", pw},
		{"a new password", "n3w-pw", "n3w-pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := a.Current()
			if tc.edit != "" {
				b = []byte(strings.Replace(string(b), config.RedactedSecret, tc.edit, 1))
			}
			id, err := a.Apply(b, time.Minute)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if err := a.Confirm(id); err != nil {
				t.Fatal(err)
			}
			c, _ := store.Current()
			if got := c.NAT.WAN.PPPoE.Password; got != tc.want {
				t.Errorf("stored password %q, want %q", got, tc.want)
			}
			h, err := a.Get(v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(h), pw) || strings.Contains(string(h), "n3w-pw") {
				t.Errorf("version %s shows the password: %s", v.ID, h)
			}
		})
	}
}

// TestRedactedSecretAgrees: the form's password input knows the
// placeholder the store shows.
func TestRedactedSecretAgrees(t *testing.T) {
	if config.RedactedSecret != webui.RedactedSecret {
		t.Errorf("config.RedactedSecret %q, webui.RedactedSecret %q", config.RedactedSecret, webui.RedactedSecret)
	}
}

// FuzzRedact: redact never panics, and what it returns for a document
// whose nat.wan.pppoe.password is a string holds at that path only ""
// or the placeholder; unredact of that gives the stored password back.
func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"nat": {"wan": {"pppoe": {"username": "u", "password": "pw"}}}}`))
	f.Add([]byte(`{"nat": {"wan": {"pppoe": {"password": ""}}}}`))
	f.Add([]byte(`{"nat": {"wan": {"pppoe": {"password": "p\"w\u0041"}, "password": 1}}, "password": "x"}`))
	f.Add([]byte(`{"nat": {"wan": {"pppoe": null}}}`))
	f.Add([]byte(`[1, 2]`))
	f.Add([]byte(`{"nat": `))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := redact(b)
		var in, red struct {
			NAT struct {
				WAN struct{ PPPoE *struct{ Password *string } }
			}
		}
		if json.Unmarshal(b, &in) != nil || in.NAT.WAN.PPPoE == nil || in.NAT.WAN.PPPoE.Password == nil {
			return
		}
		if err := json.Unmarshal(out, &red); err != nil {
			t.Fatalf("redact(%s) = %s: %v", b, out, err)
		}
		pw := *in.NAT.WAN.PPPoE.Password
		got := red.NAT.WAN.PPPoE.Password
		want := config.RedactedSecret
		if pw == "" {
			want = ""
		}
		if got == nil || *got != want {
			t.Fatalf("redact(%s) = %s: want the password %q", b, out, want)
		}
		cur := &config.Config{}
		cur.NAT.WAN.PPPoE = &config.WANPPPoE{Password: pw}
		back := unredact(out, cur, nil)
		if err := json.Unmarshal(back, &red); err != nil || *red.NAT.WAN.PPPoE.Password != pw {
			t.Fatalf("unredact(%s) = %s: want the password %q back", out, back, pw)
		}
		// A version's placeholder gives that version's password back,
		// not the running one.
		out = redactVersion(b, 7)
		cur.NAT.WAN.PPPoE.Password = pw + "-now"
		back = unredact(out, cur, func(id uint64) ([]byte, error) {
			if id != 7 {
				return nil, fmt.Errorf("no version %d", id)
			}
			return b, nil
		})
		if err := json.Unmarshal(back, &red); err != nil || *red.NAT.WAN.PPPoE.Password != pw {
			t.Fatalf("unredact(%s) of version 7 = %s: want the password %q back", out, back, pw)
		}
	})
}

// TestRestoreVersionPassword: a version shown by the API carries a
// placeholder for its own password, and restoring it puts that password
// back (not the running one); a placeholder of a version no longer
// stored is refused at its path.
func TestRestoreVersionPassword(t *testing.T) {
	const old, now = "0ld-pw", "n3w-pw"
	a, store := pppoeStore(t, old)
	_, v1 := a.Current()
	b, _ := a.Current()
	b = []byte(strings.Replace(string(b), config.RedactedSecret, now, 1))
	id, err := a.Apply(b, time.Minute)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := a.Confirm(id); err != nil {
		t.Fatal(err)
	}
	h, err := a.Get(v1.ID)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseUint(v1.ID, 10, 64)
	if strings.Contains(string(h), old) || !strings.Contains(string(h), config.VersionSecret(n)) {
		t.Fatalf("version %s shows %s: want the placeholder %q, not the password", v1.ID, h, config.VersionSecret(n))
	}
	id, err = a.Apply(h, time.Minute)
	if err != nil {
		t.Fatalf("restoring version %s: %v", v1.ID, err)
	}
	if err := a.Confirm(id); err != nil {
		t.Fatal(err)
	}
	c, _ := store.Current()
	if got := c.NAT.WAN.PPPoE.Password; got != old {
		t.Errorf("password after restoring version %s: %q, want %q", v1.ID, got, old)
	}

	gone := []byte(strings.Replace(string(h), config.VersionSecret(n), config.VersionSecret(9999), 1))
	errs := a.Validate(gone)
	if len(errs) != 1 || errs[0].Path != "nat.wan.pppoe.password" || !strings.Contains(errs[0].Message, "9999") {
		t.Errorf("Validate with a placeholder of no stored version: %v, want one error at nat.wan.pppoe.password", errs)
	}
}
