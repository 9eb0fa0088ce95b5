package wanclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"e1kbox/appliance/services/dhcpclient"
)

// leaseFile is the lease file's JSON: the lease and the MAC it is for.
type leaseFile struct {
	MAC       string       `json:"mac"`
	Addr      netip.Prefix `json:"addr"`
	Gateway   netip.Addr   `json:"gateway"`
	DNS       []netip.Addr `json:"dns,omitempty"`
	Domain    string       `json:"domain,omitempty"`
	MTU       int          `json:"mtu,omitempty"`
	NTP       []netip.Addr `json:"ntp,omitempty"`
	Server    netip.Addr   `json:"server"`
	ServerMAC string       `json:"server_mac"`
	Obtained  time.Time    `json:"obtained"`
	T1        time.Time    `json:"t1"`
	T2        time.Time    `json:"t2"`
	Expiry    time.Time    `json:"expiry"`
}

func encodeLease(mac net.HardwareAddr, l *Lease) ([]byte, error) {
	f := leaseFile{
		MAC: mac.String(), Addr: l.Addr, Gateway: l.Gateway, DNS: l.DNS, Domain: l.Domain,
		MTU: l.MTU, NTP: l.NTP, Server: l.Server, ServerMAC: l.ServerMAC.String(),
		// Wall clock only: the monotonic reading means nothing after a reboot.
		Obtained: l.Obtained.Round(0), T1: l.T1.Round(0), T2: l.T2.Round(0), Expiry: l.Expiry.Round(0),
	}
	return dhcpclient.EncodeJSON(&f)
}

// errOtherMAC says the lease file holds a lease for another MAC.
var errOtherMAC = errors.New("lease is for another MAC")

// decodeLease parses a lease file and checks that it holds a lease for mac
// that could have come from leaseFromACK.
func decodeLease(data []byte, mac net.HardwareAddr) (*Lease, error) {
	var f leaseFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	fmac, err := net.ParseMAC(f.MAC)
	if err != nil {
		return nil, fmt.Errorf("mac: %w", err)
	}
	if fmac.String() != mac.String() {
		return nil, fmt.Errorf("%w (%s)", errOtherMAC, fmac)
	}
	var smac net.HardwareAddr
	if f.ServerMAC != "" {
		if smac, err = net.ParseMAC(f.ServerMAC); err != nil || len(smac) != 6 {
			return nil, fmt.Errorf("server_mac %q is no Ethernet address", f.ServerMAC)
		}
	}
	if len(f.DNS) == 0 {
		f.DNS = nil // as leaseFromACK has it
	}
	if len(f.NTP) == 0 {
		f.NTP = nil
	}
	l := &Lease{
		Addr: f.Addr, Gateway: f.Gateway, DNS: f.DNS, Domain: f.Domain, MTU: f.MTU, NTP: f.NTP,
		Server: f.Server, ServerMAC: smac, Obtained: f.Obtained, T1: f.T1, T2: f.T2, Expiry: f.Expiry,
	}
	switch {
	case !l.Addr.IsValid() || !usable(l.Addr.Addr()) || l.Addr.Bits() == 0:
		return nil, fmt.Errorf("addr %v is no usable address", l.Addr)
	case !usable(l.Server):
		return nil, fmt.Errorf("server %v is no usable address", l.Server)
	case l.Gateway.IsValid() && !usable(l.Gateway):
		return nil, fmt.Errorf("gateway %v is no usable address", l.Gateway)
	case l.MTU != 0 && (l.MTU < 68 || l.MTU > 65535):
		return nil, fmt.Errorf("mtu %d out of range", l.MTU)
	case l.T1.Before(l.Obtained) || l.T2.Before(l.T1) || !l.Expiry.After(l.T2):
		return nil, errors.New("times out of order")
	}
	for _, a := range append(append([]netip.Addr(nil), l.DNS...), l.NTP...) {
		if !usable(a) {
			return nil, fmt.Errorf("server %v is no usable address", a)
		}
	}
	return l, nil
}

// loadLease reads the lease file; a missing file is no lease and no error.
func loadLease(path string, mac net.HardwareAddr) (*Lease, error) {
	return dhcpclient.LoadFile(path, func(data []byte) (*Lease, error) { return decodeLease(data, mac) })
}

// saveLease writes the lease file atomically.
func saveLease(path string, mac net.HardwareAddr, l *Lease) error {
	data, err := encodeLease(mac, l)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return dhcpclient.SaveFile(path, data)
}
