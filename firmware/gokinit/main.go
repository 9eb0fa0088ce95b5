// Command gokinit is /gokrazy/init of an e1kbox image: gokrazy's boot and
// supervision, plus a test-boot guard that reverts an unconfirmed update.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gokrazy/gokrazy"
)

// buildTimestamp identifies the build; set with -ldflags -X by firmware build.
var buildTimestamp = "unset"

// Spec is /etc/e1kbox/init.json, written by firmware build.
type Spec struct {
	Services []Service `json:"services"`
	// TestbootTimeout bounds a test boot: if the update client has not made
	// the new root permanent (and rebooted) by then, the box reboots into the
	// previous root by itself.
	TestbootTimeout string `json:"testboot_timeout"`
}

// Service is one supervised program.
type Service struct {
	Path         string   `json:"path"`
	Args         []string `json:"args,omitempty"`
	Env          []string `json:"env,omitempty"`
	DontStart    bool     `json:"dont_start,omitempty"`
	WaitForClock bool     `json:"wait_for_clock,omitempty"`
}

const specPath = "/etc/e1kbox/init.json"

func main() {
	if err := gokrazy.Boot(buildTimestamp); err != nil {
		log.Fatal(err)
	}
	spec, err := loadSpec(specPath)
	if err != nil {
		// init must not exit: run nothing but gokrazy's own UI so the box
		// stays reachable for an update.
		log.Printf("e1kbox init: %v", err)
		spec = &Spec{}
	}
	var services []*gokrazy.Service
	for _, s := range spec.Services {
		cmd := exec.Command(s.Path, s.Args...)
		cmd.Env = append(os.Environ(), s.Env...)
		switch {
		case s.DontStart:
			services = append(services, gokrazy.NewStoppedService(cmd))
		case s.WaitForClock:
			services = append(services, gokrazy.NewWaitForClockService(cmd))
		default:
			services = append(services, gokrazy.NewService(cmd))
		}
	}
	if err := gokrazy.SuperviseServices(services); err != nil {
		log.Printf("e1kbox init: supervising services: %v", err)
	}
	if cmdline, err := os.ReadFile("/proc/cmdline"); err == nil && isTestboot(string(cmdline)) {
		go guardTestboot(spec.testbootTimeout())
	}
	select {}
}

func loadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading service list: %w", err)
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return &s, nil
}

func (s *Spec) testbootTimeout() time.Duration {
	if d, err := time.ParseDuration(s.TestbootTimeout); err == nil && d > 0 {
		return d
	}
	return 120 * time.Second
}

// isTestboot reports whether the kernel was started for a test boot of the
// inactive root (gokrazy's /update/testboot adds this flag; gokrazy.Boot
// then switches to the new root for this one boot only).
// readPassword returns the first non-empty password file's content.
func readPassword(files ...string) string {
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			if pw := strings.TrimSpace(string(b)); pw != "" {
				return pw
			}
		}
	}
	return ""
}

func isTestboot(cmdline string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == "gokrazy.try_boot_inactive=1" {
			return true
		}
	}
	return false
}

// guardTestboot reboots the box after timeout. A test boot that the update
// client confirmed is followed by the client's own switch and reboot long
// before that; one it did not confirm (the new build is unhealthy, or the
// client went away) ends here, and the next boot uses the previous root,
// because the boot partition no longer asks for a test boot.
func guardTestboot(timeout time.Duration) {
	log.Printf("e1kbox init: test boot of build %s: rebooting into the previous build in %v unless the update is confirmed", buildTimestamp, timeout)
	time.Sleep(timeout)
	log.Printf("e1kbox init: test boot not confirmed within %v, rebooting into the previous build", timeout)
	for {
		if err := rebootViaGokrazy(); err != nil {
			log.Printf("e1kbox init: reboot request failed: %v", err)
			time.Sleep(5 * time.Second)
			continue
		}
		return
	}
}

// rebootViaGokrazy asks gokrazy's own handler (on its unix socket, with the
// box's password, read like gokrazy reads it) to stop services, unmount
// /perm and reboot.
func rebootViaGokrazy() error {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", "/run/gokrazy-http.sock")
		},
	}}
	req, err := http.NewRequest(http.MethodPost, "http://gokrazy/reboot?wait_per_signal=10s", nil)
	if err != nil {
		return err
	}
	if pw := readPassword("/perm/gokr-pw.txt", "/etc/gokr-pw.txt"); pw != "" {
		req.SetBasicAuth("gokrazy", pw)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /reboot: %s", resp.Status)
	}
	return nil
}
