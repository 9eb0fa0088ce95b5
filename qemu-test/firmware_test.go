package qemutest

import (
	"net/http"
	"testing"

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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
