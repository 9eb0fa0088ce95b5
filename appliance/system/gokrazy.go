package system

import (
	"os"
	"strconv"
	"strings"
)

// UnderGokrazy says whether the appliance runs on a gokrazy box (its init
// is there): its socket, boot disk and DHCP client.
func UnderGokrazy() bool {
	_, err := os.Stat("/gokrazy/init")
	return err == nil
}

// GokrazyPort is the port of gokrazy's web UI (http-port.txt, /perm
// first, as gokrazy reads it).
func GokrazyPort() int {
	for _, f := range []string{"/perm/http-port.txt", "/etc/http-port.txt"} {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return n
			}
		}
	}
	return 80
}

// Hostname is the box's name: gokrazy's /etc/hostname, else the
// kernel's.
func Hostname() string {
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		return strings.TrimSpace(string(b))
	}
	h, _ := os.Hostname()
	return h
}
