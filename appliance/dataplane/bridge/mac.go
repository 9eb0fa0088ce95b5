package bridge

import "fmt"

// MAC is an Ethernet address; its text form is 02:00:5e:10:00:01.
type MAC [6]byte

func (m MAC) String() string {
	const hex = "0123456789abcdef"
	var b [17]byte
	for i, v := range m {
		if i > 0 {
			b[i*3-1] = ':'
		}
		b[i*3], b[i*3+1] = hex[v>>4], hex[v&15]
	}
	return string(b[:])
}

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *MAC) UnmarshalText(b []byte) error {
	v, err := ParseMAC(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseMAC parses six colon- or dash-separated hex bytes.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
	}
	for i := range 6 {
		if i > 0 && s[i*3-1] != ':' && s[i*3-1] != '-' {
			return MAC{}, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
		}
		hi, ok1 := unhex(s[i*3])
		lo, ok2 := unhex(s[i*3+1])
		if !ok1 || !ok2 {
			return MAC{}, fmt.Errorf("bad MAC address %q (want six hex bytes like 02:00:5e:10:00:01)", s)
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// IsGroup reports whether m is a multicast or broadcast address.
func IsGroup(m *[6]byte) bool { return m[0]&1 != 0 }

// IsZero reports whether m is 00:00:00:00:00:00.
func IsZero(m *[6]byte) bool { return *m == [6]byte{} }
