package qemutest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/ota"
	"e1kbox/firmware/vm"
)

// TestBoot boots the image with BIOS and with UEFI and checks what a new
// user sees first: gokrazy's UI behind the password, a healthy appliance and
// a writable /perm.
func TestBoot(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	for _, tc := range []struct {
		name string
		uefi bool
	}{{"BIOS", false}, {"UEFI", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := boot(t, bs.good, vm.Options{UEFI: tc.uefi})

			// gokrazy's UI: no password and a wrong one get 401, the right one 200.
			for _, pw := range []string{"", "wrong-" + b.password} {
				u := "http://" + b.HTTPAddr() + "/"
				if pw != "" {
					u = b.gokrazyURL(pw)
				}
				err := getJSON(u, &struct{}{})
				if got := statusOf(err); got != http.StatusUnauthorized {
					t.Errorf("gokrazy UI with password %q: err %v, want HTTP 401", pw, err)
				}
			}
			var st struct {
				BuildTimestamp string
				PermDev        string
				Services       []struct{ Path string }
			}
			if err := getJSON(b.gokrazyURL(b.password), &st); err != nil {
				t.Fatalf("gokrazy UI with the right password: %v", err)
			}
			if st.BuildTimestamp != bs.good.BuildTimestamp {
				t.Errorf("BuildTimestamp = %q, want %q", st.BuildTimestamp, bs.good.BuildTimestamp)
			}
			if st.PermDev != "/dev/sda4" {
				t.Errorf("PermDev = %q, want /dev/sda4 (perm partition mounted)", st.PermDev)
			}
			var paths []string
			for _, s := range st.Services {
				paths = append(paths, s.Path)
			}
			if !contains(paths, "/user/appliance") || !contains(paths, "/gokrazy/dhcp") {
				t.Errorf("services = %v, want /user/appliance and /gokrazy/dhcp", paths)
			}

			var h health
			if err := getJSON(b.dashboardURL("/healthz"), &h); err != nil {
				t.Fatalf("appliance /healthz: %v", err)
			}
			if !h.Perm.Writable || h.Perm.Dir != "/perm/e1kbox" {
				t.Errorf("appliance perm = %+v, want /perm/e1kbox writable", h.Perm)
			}
			var ver struct {
				BuildTimestamp string `json:"build_timestamp"`
			}
			if err := getJSON(b.dashboardURL("/version"), &ver); err != nil || ver.BuildTimestamp != bs.good.BuildTimestamp {
				t.Errorf("appliance /version = %+v, %v; want build %s", ver, err, bs.good.BuildTimestamp)
			}
		})
	}
}

// TestUpdate updates a running box over the air to a second build (which
// must keep /perm), then to a broken build (which must come back on the
// previous build by itself).
func TestUpdate(t *testing.T) {
	requireQEMU(t)
	bs := theBuilds(t)
	b := boot(t, bs.good, vm.Options{})
	bootsBefore := b.boots(t)
	if len(bootsBefore) == 0 {
		t.Fatal("the appliance recorded no boot on /perm")
	}

	update := func(t *testing.T, to *manifestPieces) (*ota.Report, error) {
		rep, err := ota.Update(context.Background(), ota.Options{
			BaseURL: b.gokrazyURL(b.password), HealthURL: b.dashboardURL("/healthz"),
			Boot: to.Boot, Root: to.Root, MBR: to.MBR, BuildTimestamp: to.BuildTimestamp,
			HealthTimeout: healthTimeout, BootTimeout: bootTimeout, NoKexec: to.NoKexec, Log: quietLog(),
		})
		if rep == nil {
			rep = &ota.Report{}
		}
		return rep, err
	}

	outer := t
	t.Run("to a good build", func(t *testing.T) {
		rep, err := update(t, pieces(bs.second))
		if errors.Is(err, ota.ErrNoAnswer) {
			b = b.powerCycle(t, outer, bs.good, rep, err, nil)
			rep, err = update(t, pieces(bs.second))
		}
		if err != nil {
			t.Fatalf("%s\nupdate: %v", b.diagnosis(rep), err)
		}
		t.Logf("%s", rep)
		if rep.Outcome != "committed" {
			t.Errorf("outcome = %q, want committed", rep.Outcome)
		}
		if err := b.healthyOn(bs.second.BuildTimestamp); err != nil {
			t.Fatalf("after the update: %v", err)
		}
		// The boot history written to /perm before the update survived it,
		// and the new build added its own records.
		after := b.boots(t)
		if len(after) <= len(bootsBefore) || after[0] != bootsBefore[0] {
			t.Errorf("boot history after update = %v, want it to extend %v", after, bootsBefore)
		}
		if last := after[len(after)-1]; last.Build != bs.second.BuildTimestamp {
			t.Errorf("last boot record = %+v, want build %s", last, bs.second.BuildTimestamp)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("to a broken build rolls back", func(t *testing.T) {
		start := time.Now()
		// Through the firmware, not kexec: the test boot then depends on
		// gokrazy's boot-partition edits being on the disk, as after a
		// power cycle.
		to := pieces(bs.broke)
		to.NoKexec = true
		for attempt := 1; ; attempt++ {
			reverts := strings.Count(b.Console(), testbootRevert)
			panics := strings.Count(b.Console(), "Kernel panic")
			rep, err := update(t, to)
			if attempt == 1 && errors.Is(err, ota.ErrNoAnswer) {
				b = b.powerCycle(t, outer, bs.second, rep, err, nil)
				continue
			}
			if !errors.Is(err, ota.ErrRolledBack) {
				t.Fatalf("%s\nupdate to the broken build: err = %v, want ErrRolledBack", b.diagnosis(rep), err)
			}
			t.Logf("%s", rep)
			if rep.Outcome != "rolled back" {
				t.Errorf("outcome = %q, want rolled back", rep.Outcome)
			}
			if err := b.healthyOn(bs.second.BuildTimestamp); err != nil {
				t.Fatalf("after the rollback: %v", err)
			}
			if strings.Count(b.Console(), testbootRevert) > reverts {
				break // the box's own init reverted the test boot
			}
			// The box came back, but not through the init's revert. Under
			// TCG the kernel very rarely panics early in a boot (see boot);
			// a test boot that crashed comes back on the previous root
			// too, which proves nothing about the revert: try once more.
			if attempt == 1 && strings.Count(b.Console(), "Kernel panic") > panics {
				t.Logf("the test boot crashed (TCG flake), not reverted by the init; retrying once: %v\nconsole tail:\n%s", err, tail(b.Console(), 30))
				continue
			}
			t.Fatalf("%s\nback on the previous build, but the console does not show the init's test-boot revert (%q): %v",
				b.diagnosis(rep), testbootRevert, err)
		}
		t.Logf("broken update and automatic rollback took %.0fs", time.Since(start).Seconds())
	})
}

// testbootRevert is what the init logs when it reverts an unconfirmed
// test boot (firmware/gokinit).
const testbootRevert = "test boot not confirmed"

type bootRecord struct {
	Build string    `json:"build"`
	Time  time.Time `json:"time"`
}

func (b *box) boots(t *testing.T) []bootRecord {
	t.Helper()
	var v struct {
		Boots []bootRecord `json:"boots"`
	}
	if err := getJSON(b.dashboardURL("/version"), &v); err != nil {
		t.Fatalf("appliance /version: %v", err)
	}
	return v.Boots
}

type manifestPieces struct {
	Boot, Root, MBR, BuildTimestamp string
	NoKexec                         bool // reboot through the firmware
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
