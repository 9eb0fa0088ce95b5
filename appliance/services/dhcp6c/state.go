package dhcp6c

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

// Files in Config.StateDir.
const (
	duidFile  = "dhcp6-duid"       // the DUID, hex, one line
	leaseFile = "dhcp6-lease.json" // the last lease
)

// duidEpoch is the DUID-LLT time origin (RFC 8415 section 11.2).
var duidEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// loadDUID returns the DUID kept in dir, making and keeping a DUID-LLT of
// mac first when there is none; without dir it is the DUID-LL of mac.
func loadDUID(dir string, mac net.HardwareAddr, now time.Time) (dhcpv6.DUID, error) {
	if dir == "" {
		return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}, nil
	}
	path := filepath.Join(dir, duidFile)
	data, err := os.ReadFile(path)
	if err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		d, err := dhcpv6.DUIDFromBytes(raw)
		if err != nil || len(raw) < 3 || len(raw) > 130 {
			return nil, fmt.Errorf("%s: no DUID (%d bytes): %v", path, len(raw), err)
		}
		return d, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	d := &dhcpv6.DUIDLLT{HWType: iana.HWTypeEthernet, Time: uint32(now.Sub(duidEpoch) / time.Second), LinkLayerAddr: mac}
	if err := dhcpclient.SaveFile(path, []byte(hex.EncodeToString(d.ToBytes())+"\n")); err != nil {
		return nil, fmt.Errorf("keep DUID: %w", err)
	}
	return d, nil
}

// leaseJSON is the lease file: the lease and the DUID and IAID it is for.
type leaseJSON struct {
	DUID      string       `json:"duid"`
	IAID      string       `json:"iaid"`
	Prefixes  []Prefix     `json:"prefixes,omitempty"`
	Addrs     []Address    `json:"addrs,omitempty"`
	DNS       []netip.Addr `json:"dns,omitempty"`
	Domains   []string     `json:"domains,omitempty"`
	ServerID  string       `json:"server_id"`
	Server    netip.Addr   `json:"server"`
	ServerMAC string       `json:"server_mac,omitempty"`
	Obtained  time.Time    `json:"obtained"`
	T1        time.Time    `json:"t1"`
	T2        time.Time    `json:"t2"`
}

func encodeLease(duid dhcpv6.DUID, iaid [4]byte, l *Lease) ([]byte, error) {
	f := leaseJSON{
		DUID: hex.EncodeToString(duid.ToBytes()), IAID: hex.EncodeToString(iaid[:]),
		DNS: l.DNS, Domains: l.Domains, ServerID: hex.EncodeToString(l.ServerID), Server: l.Server,
		ServerMAC: l.ServerMAC.String(),
		// Wall clock only: a monotonic reading means nothing after a reboot.
		Obtained: l.Obtained.Round(0), T1: l.T1.Round(0), T2: l.T2.Round(0),
	}
	for _, p := range l.Prefixes {
		f.Prefixes = append(f.Prefixes, Prefix{p.Prefix, p.Preferred.Round(0), p.Valid.Round(0)})
	}
	for _, a := range l.Addrs {
		f.Addrs = append(f.Addrs, Address{a.Addr, a.Preferred.Round(0), a.Valid.Round(0)})
	}
	return dhcpclient.EncodeJSON(&f)
}

// errOtherClient says the lease file holds a lease of another DUID or IAID.
var errOtherClient = errors.New("lease is for another DUID or IAID")

// decodeLease parses a lease file and checks that it is a lease for duid
// and iaid that merge could have made.
func decodeLease(data []byte, duid dhcpv6.DUID, iaid [4]byte) (*Lease, error) {
	var f leaseJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.DUID != hex.EncodeToString(duid.ToBytes()) || f.IAID != hex.EncodeToString(iaid[:]) {
		return nil, errOtherClient
	}
	sid, err := hex.DecodeString(f.ServerID)
	if err != nil || len(sid) < 3 {
		return nil, fmt.Errorf("server_id %q is no DUID", f.ServerID)
	}
	l := &Lease{Prefixes: f.Prefixes, Addrs: f.Addrs, DNS: f.DNS, Domains: f.Domains, ServerID: sid,
		Server: f.Server, Obtained: f.Obtained, T1: f.T1, T2: f.T2}
	if f.ServerMAC != "" {
		if l.ServerMAC, err = net.ParseMAC(f.ServerMAC); err != nil || len(l.ServerMAC) != 6 {
			return nil, fmt.Errorf("server_mac %q is no Ethernet address", f.ServerMAC)
		}
	}
	if len(l.Prefixes)+len(l.Addrs) == 0 {
		return nil, errors.New("neither prefixes nor addresses")
	}
	for _, p := range l.Prefixes {
		if !p.Prefix.IsValid() || !p.Prefix.Addr().Is6() || p.Prefix.Bits() > 64 || p.Prefix != p.Prefix.Masked() ||
			p.Valid.Before(p.Preferred) {
			return nil, fmt.Errorf("prefix %v is not a usable delegation", p.Prefix)
		}
	}
	for _, a := range l.Addrs {
		if !a.Addr.Is6() || !a.Addr.IsGlobalUnicast() || a.Valid.Before(a.Preferred) {
			return nil, fmt.Errorf("address %v is not usable", a.Addr)
		}
	}
	if l.T2.Before(l.T1) || l.T1.Before(l.Obtained) {
		return nil, errors.New("times out of order")
	}
	return l, nil
}

// loadLease reads the lease file in dir; none is no error.
func loadLease(dir string, duid dhcpv6.DUID, iaid [4]byte) (*Lease, error) {
	return dhcpclient.LoadFile(filepath.Join(dir, leaseFile), func(data []byte) (*Lease, error) {
		return decodeLease(data, duid, iaid)
	})
}

// saveLease writes the lease file in dir atomically; a nil lease removes it.
func saveLease(dir string, duid dhcpv6.DUID, iaid [4]byte, l *Lease) error {
	path := filepath.Join(dir, leaseFile)
	if l == nil {
		return dhcpclient.RemoveFile(path)
	}
	data, err := encodeLease(duid, iaid, l)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return dhcpclient.SaveFile(path, data)
}
