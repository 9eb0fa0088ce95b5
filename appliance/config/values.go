package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The JSON value types the sections share: durations, port ranges and
// address ranges, each written as a string.

// Duration is a time.Duration written as a Go duration string ("300s",
// "1m30s") in JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (want a Go duration like \"300s\" or \"1m30s\")", b)
	}
	*d = Duration(v)
	return nil
}

// PortRange is an inclusive range of TCP/UDP ports, written "443" or
// "1024-65535" in JSON.
type PortRange struct {
	First, Last uint16
}

// Len returns the number of ports in r (0 if reversed).
func (r PortRange) Len() int {
	if r.Last < r.First {
		return 0
	}
	return int(r.Last) - int(r.First) + 1
}

// Overlaps reports whether r and o share a port.
func (r PortRange) Overlaps(o PortRange) bool { return r.First <= o.Last && o.First <= r.Last }

func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return strconv.Itoa(int(r.First)) + "-" + strconv.Itoa(int(r.Last))
}

// MarshalText implements encoding.TextMarshaler.
func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Validate checks the
// order and the zero port.
func (r *PortRange) UnmarshalText(b []byte) error {
	s := string(b)
	lo, hi, isRange := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(lo, 10, 16)
	last, err2 := first, error(nil)
	if isRange {
		last, err2 = strconv.ParseUint(hi, 10, 16)
	}
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bad port range %q (want a port like \"443\" or a range like \"1024-65535\")", s)
	}
	*r = PortRange{First: uint16(first), Last: uint16(last)}
	return nil
}

// AddrRange is an inclusive range of IPv4 addresses, written
// "192.168.1.100-192.168.1.250" in JSON.
type AddrRange struct {
	First, Last netip.Addr
}

// IsZero reports whether r is unset.
func (r AddrRange) IsZero() bool { return !r.First.IsValid() && !r.Last.IsValid() }

func (r AddrRange) String() string {
	if r.IsZero() {
		return ""
	}
	return r.First.String() + "-" + r.Last.String()
}

// MarshalText implements encoding.TextMarshaler.
func (r AddrRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *AddrRange) UnmarshalText(b []byte) error {
	lo, hi, ok := strings.Cut(string(b), "-")
	first, err1 := netip.ParseAddr(strings.TrimSpace(lo))
	last, err2 := netip.ParseAddr(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("bad address range %q (want a range like \"192.168.1.100-192.168.1.250\")", b)
	}
	*r = AddrRange{First: first, Last: last}
	return nil
}
