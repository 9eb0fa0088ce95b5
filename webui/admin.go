package webui

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Power reboots the box (through gokrazy, so that every service stops
// cleanly and /perm is unmounted first).
type Power interface {
	Reboot() error
}

// NICs lists the box's network interfaces for the port forms' picker.
type NICs interface {
	NICs() []NIC
}

// NIC is one network interface.
type NIC struct {
	Name   string `json:"name"`
	Driver string `json:"driver,omitempty"` // "e1000e", "tun", ...
	MAC    string `json:"mac,omitempty"`
	// Up: the link has a carrier.
	Up        bool `json:"up"`
	SpeedMbps int  `json:"speed_mbps,omitempty"`
	// Use says what the box uses it for: "data" (a port of the config),
	// "host" (the host port), "management" or "" (free).
	Use string `json:"use,omitempty"`
	// Port is the config's port name when Use is data or host.
	Port string `json:"port,omitempty"`
}

// DefaultSyslogTargetFile is gokrazy's remote syslog convention: its init
// sends every service's stdout and stderr to the host:port in this file
// (read at boot).
const DefaultSyslogTargetFile = "/perm/remote_syslog/target"

// Password rules for a new password.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 128
)

// AdminAnswer is the answer of GET /api/admin.
type AdminAnswer struct {
	// PasswordFile is where a new password is written (and where gokrazy
	// reads it first).
	PasswordFile string `json:"password_file"`
	// GokrazyPort is the port of gokrazy's own web UI on the box.
	GokrazyPort int `json:"gokrazy_port"`
	// SyslogTarget is the remote syslog host:port, "" when off.
	SyslogTarget string `json:"syslog_target"`
	CanReboot    bool   `json:"can_reboot"`
}

func (s *Server) handleAdmin(w http.ResponseWriter, r *http.Request) {
	target, err := readTrimmed(s.opts.SyslogTargetFile)
	writeResult(w, AdminAnswer{PasswordFile: s.opts.PasswordFiles[0], GokrazyPort: s.opts.GokrazyPort,
		SyslogTarget: target, CanReboot: s.opts.Power != nil}, err, http.StatusInternalServerError)
}

// readTrimmed reads a small file; a missing one is "".
func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// PasswordChange is the body of POST /api/admin/password.
type PasswordChange struct {
	Current string `json:"current"`
	New     string `json:"new"`
}

// checkNewPassword says what is wrong with a new password.
func checkNewPassword(pw string) error {
	if len(pw) < MinPasswordLen || len(pw) > MaxPasswordLen {
		return fmt.Errorf("the new password must have %d to %d characters", MinPasswordLen, MaxPasswordLen)
	}
	for _, c := range pw {
		if c > unicode.MaxASCII || unicode.IsSpace(c) || unicode.IsControl(c) {
			return errors.New("the new password may hold printable ASCII characters only, no spaces")
		}
	}
	return nil
}

// handlePassword changes the password: written atomically to the first
// password file (gokrazy's /perm/gokr-pw.txt, which gokrazy reads first at
// boot), then used by the dashboard at once.
func (s *Server) handlePassword(w http.ResponseWriter, r *http.Request) {
	var pc PasswordChange
	if !readJSON(w, r, "password change", &pc) {
		return
	}
	cur := s.currentAuth()
	if !cur.matches(User, pc.Current) {
		writeFieldErrors(w, []FieldError{{Path: "current", Message: "this is not the current password"}})
		return
	}
	if err := checkNewPassword(pc.New); err != nil {
		writeFieldErrors(w, []FieldError{{Path: "new", Message: err.Error()}})
		return
	}
	if subtle.ConstantTimeCompare([]byte(pc.New), []byte(pc.Current)) == 1 {
		writeFieldErrors(w, []FieldError{{Path: "new", Message: "the new password is the current one"}})
		return
	}
	file := s.opts.PasswordFiles[0]
	if err := WriteFileAtomic(file, []byte(pc.New+"\n"), 0o600); err != nil {
		writeError(w, http.StatusInternalServerError, "saving the password: "+err.Error())
		return
	}
	s.auth.Store(newAuthenticator(pc.New))
	if s.opts.PasswordChanged != nil {
		s.opts.PasswordChanged(pc.Current, pc.New)
	}
	s.log.Warn("dashboard password changed; gokrazy's UI takes it at the next boot", "file", file)
	writeJSON(w, http.StatusOK, map[string]any{"file": file, "gokrazy_after_reboot": true})
}

// handleLogout makes a browser forget its cached Basic credentials: the
// page asks for this URL with the user "logout", which is the only one
// that gets 200 here; the browser then keeps those (useless) credentials,
// and the next page load asks for the password again.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if u, _, ok := r.BasicAuth(); ok && u == "logout" {
		writeJSON(w, http.StatusOK, map[string]bool{"logged_out": true})
		return
	}
	s.unauthorized(w)
}

func (s *Server) handleReboot(w http.ResponseWriter, r *http.Request) {
	if s.opts.Power == nil {
		notAvailable(w, "rebooting")
		return
	}
	s.log.Warn("reboot requested from the dashboard", "remote", r.RemoteAddr)
	// Answer first: the reboot stops this process.
	writeJSON(w, http.StatusAccepted, map[string]bool{"rebooting": true})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := s.opts.Power.Reboot(); err != nil {
			s.log.Error("reboot failed", "err", err)
		}
	}()
}

// SyslogTarget is the body of PUT /api/admin/syslog.
type SyslogTarget struct {
	// Target is host:port (UDP), "" to turn remote syslog off.
	Target string `json:"target"`
}

func checkSyslogTarget(t string) error {
	host, port, err := net.SplitHostPort(t)
	if err != nil {
		return fmt.Errorf("want host:port, like 192.168.1.10:514: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	if host == "" || strings.ContainsAny(host, " /\\\t\n") {
		return fmt.Errorf("host %q: want an address or a name", host)
	}
	return nil
}

func (s *Server) handleSyslog(w http.ResponseWriter, r *http.Request) {
	var st SyslogTarget
	if !readJSON(w, r, "syslog target", &st) {
		return
	}
	st.Target = strings.TrimSpace(st.Target)
	file := s.opts.SyslogTargetFile
	if st.Target == "" {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		s.log.Info("remote syslog turned off (from the next boot)")
		writeJSON(w, http.StatusOK, st)
		return
	}
	if err := checkSyslogTarget(st.Target); err != nil {
		writeFieldErrors(w, []FieldError{{Path: "target", Message: err.Error()}})
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := WriteFileAtomic(file, []byte(st.Target+"\n"), 0o644); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.log.Info("remote syslog target set (gokrazy sends the logs there from the next boot)", "target", st.Target)
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleNICs(w http.ResponseWriter, r *http.Request) {
	if s.opts.NICs == nil {
		notAvailable(w, "the interface list")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nics": nonNil(s.opts.NICs.NICs())})
}

// WriteFileAtomic replaces path with data: a temporary file in the same
// directory, fsync, rename, fsync of the directory. A crash leaves the old
// file or the new one, never a torn one.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
