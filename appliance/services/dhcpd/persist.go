package dhcpd

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"e1kbox/appliance/atomicfile"
)

// leaseFile is the lease file's JSON form.
type leaseFile struct {
	Version  int           `json:"version"`
	Leases   []fileLease   `json:"leases"`
	Pinned   []filePin     `json:"pinned,omitempty"`
	Declined []fileDecline `json:"declined,omitempty"`
}

type fileLease struct {
	MAC      string     `json:"mac"`
	ClientID string     `json:"client_id,omitempty"` // hex
	IP       netip.Addr `json:"ip"`
	Hostname string     `json:"hostname,omitempty"`
	State    State      `json:"state"`
	Expiry   time.Time  `json:"expiry"`
	LastSeen time.Time  `json:"last_seen"`
	// Unproven: the device has not used the address yet (absent in files
	// from before probation: those bindings count as proven). Bound is
	// when its binding began, Port where the device was.
	Unproven bool      `json:"unproven,omitempty"`
	Bound    time.Time `json:"bound,omitzero"`
	Port     string    `json:"port,omitempty"`
}

type filePin struct {
	MAC      string     `json:"mac"`
	IP       netip.Addr `json:"ip"`
	Hostname string     `json:"hostname,omitempty"`
}

type fileDecline struct {
	IP    netip.Addr `json:"ip"`
	Until time.Time  `json:"until"`
}

const (
	fileVersion  = 1
	maxFileBytes = 32 << 20
	saveDelay    = 2 * time.Second // changes within this window are written together
)

// snapshot encodes the table (offers are not kept: they are over within
// OfferHold anyway) with s.mu held.
func (s *Server) snapshot() (path string, data []byte, err error) {
	path = s.pol.cfg.LeaseFile
	if path == "" {
		return "", nil, nil
	}
	f := leaseFile{Version: fileVersion, Leases: []fileLease{}}
	now := s.now()
	for _, e := range s.byKey {
		if e.state == StateOffered {
			continue
		}
		f.Leases = append(f.Leases, fileLease{
			MAC: e.mac.String(), ClientID: e.cid, IP: e.ip, Hostname: e.hostname,
			State: e.stateAt(now), Expiry: e.expiry.UTC(), LastSeen: e.lastSeen.UTC(),
			Unproven: !e.proven, Bound: e.bound.UTC(), Port: e.group,
		})
	}
	slices.SortFunc(f.Leases, func(a, b fileLease) int { return a.IP.Compare(b.IP) })
	for m, pn := range s.pins {
		f.Pinned = append(f.Pinned, filePin{MAC: m.String(), IP: pn.IP, Hostname: pn.Hostname})
	}
	slices.SortFunc(f.Pinned, func(a, b filePin) int { return a.IP.Compare(b.IP) })
	for a, until := range s.declined {
		if now.Before(until) {
			f.Declined = append(f.Declined, fileDecline{IP: a, Until: until.UTC()})
		}
	}
	slices.SortFunc(f.Declined, func(a, b fileDecline) int { return a.IP.Compare(b.IP) })
	data, err = json.MarshalIndent(f, "", "\t")
	return path, append(data, '\n'), err
}

// flush writes the lease file if its content changed since the last write.
func (s *Server) flush() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	path, data, err := s.snapshot()
	s.mu.Unlock()
	if err != nil || path == "" {
		return err
	}
	if path == s.savedPath && bytes.Equal(data, s.saved) {
		return nil
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("dhcpd: save leases: %w", err)
	}
	s.savedPath, s.saved = path, data
	s.stats.writes.Add(1)
	return nil
}

// load reads the lease file into the (empty) table. A missing file is an
// empty table; an unreadable or corrupt one is logged and ignored, and so
// is every entry that makes no sense for the config.
func (s *Server) load(path string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	for _, t := range stale {
		os.Remove(t) // left by a crash during a write
	}
	f, err := readLeaseFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("dhcpd: ignoring the lease file", "path", path, "err", err)
		return
	}
	now := s.now()
	skipped := 0
	pinnedIP := map[netip.Addr]bool{}
	for _, fp := range f.Pinned {
		m, err := parseMAC(fp.MAC)
		_, dup := s.pins[m]
		if err != nil || dup || !fp.IP.Is4() || pinnedIP[fp.IP] || (fp.Hostname != "" && !validLabel(fp.Hostname)) {
			skipped++
			continue
		}
		s.pins[m] = pin{IP: fp.IP, Hostname: fp.Hostname}
		pinnedIP[fp.IP] = true
	}
	// rebuildStatics drops the pins that conflict with the config.
	s.rebuildStatics()

	slices.SortStableFunc(f.Leases, func(a, b fileLease) int { return a.LastSeen.Compare(b.LastSeen) })
	for _, fl := range f.Leases {
		e, ok := s.entryFromFile(fl, now)
		if !ok {
			skipped++
			continue
		}
		if old := s.byKey[e.key]; old != nil {
			s.del(old) // a later entry of the same client
		}
		s.put(e) // takes the address over from an earlier holder
	}
	s.share(now) // a file from a box with a larger share
	for s.dynamic() > s.pol.maxLeases {
		if _, ok := s.evict(now, false); !ok {
			break // more bound leases than MaxLeases: they stay until they expire
		}
	}
	for _, d := range f.Declined {
		if s.pol.host(d.IP) && now.Before(d.Until) && d.Until.Before(now.Add(QuarantineTime)) {
			s.quarantine(d.IP, d.Until)
		}
	}
	if skipped > 0 {
		s.log.Warn("dhcpd: lease file entries ignored", "path", path, "count", skipped)
	}
	s.log.Info("dhcpd: leases loaded", "path", path, "leases", len(s.byKey), "pinned", len(s.pins))
}

func readLeaseFile(path string) (*leaseFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", fi.Size(), maxFileBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f leaseFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, want %d", f.Version, fileVersion)
	}
	return &f, nil
}

func (s *Server) entryFromFile(fl fileLease, now time.Time) (*entry, bool) {
	m, err := parseMAC(fl.MAC)
	if err != nil || !s.pol.host(fl.IP) || m[0]&1 != 0 || m == (mac{}) {
		return nil, false
	}
	e := &entry{mac: m, ip: fl.IP, hostname: sanitizeHostname(fl.Hostname), expiry: fl.Expiry, lastSeen: fl.LastSeen,
		proven: !fl.Unproven || s.pol.cfg.Activity == nil, bound: fl.Bound}
	if len(fl.Port) <= 32 {
		e.group = fl.Port
	}
	switch fl.State {
	case StateBound, StateExpired:
		e.state = StateBound
		if !now.Before(fl.Expiry) {
			e.state = StateExpired
		}
		if fl.Expiry.After(now.Add(s.pol.cfg.LeaseTime)) {
			e.expiry = now.Add(s.pol.cfg.LeaseTime) // no lease longer than we grant
		}
	case StateReleased:
		e.state = StateReleased
	default:
		return nil, false
	}
	if fl.ClientID != "" {
		id, err := hex.DecodeString(fl.ClientID)
		if err != nil || len(id) == 0 || len(id) > 255 {
			return nil, false
		}
		e.cid = hex.EncodeToString(id)
		e.key = "id:" + e.cid
	} else {
		e.key = "hw:" + m.String()
	}
	return e, true
}

func parseMAC(s string) (mac, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return mac{}, err
	}
	m, ok := macOf(hw)
	if !ok {
		return mac{}, fmt.Errorf("%q: not an Ethernet address", s)
	}
	return m, nil
}
