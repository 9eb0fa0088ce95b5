package frame

import "errors"

// Reason says why a frame was dropped. It is small enough to index a per-worker
// counter array ([NumReasons]uint64). A Reason is also an error: the Err*
// sentinels below are Reasons, so returning one never allocates and
// errors.Is works on them.
type Reason uint8

// Drop reasons. ReasonNone is the zero value and means "not dropped".
const (
	ReasonNone         Reason = iota // no error
	ReasonTruncated                  // a header does not fit in the captured bytes
	ReasonBadVLAN                    // more than two VLAN tags, or VID 4095
	ReasonBadARP                     // ARP that is not Ethernet/IPv4 (htype 1, ptype 0x0800, 6/4)
	ReasonBadVersion                 // IP version does not match the EtherType
	ReasonBadIHL                     // IPv4 IHL below 5
	ReasonBadLength                  // IP total/payload length beyond the capture or below the header
	ReasonBadFragment                // impossible or tiny fragment (RFC 791/1858/7112/8200)
	ReasonBadExtHeader               // IPv6 extension header chain malformed or too long
	ReasonBadTCPOffset               // TCP data offset below 5 or past the packet end
	ReasonBadUDPLength               // UDP length below 8 or past the packet end
	ReasonBadChecksum                // a checksum did not verify (only from Verify* helpers)
	ReasonOther                      // an error not produced by this package
	NumReasons                       // number of reasons, for sizing counter arrays
)

// Sentinel errors returned by Parse and friends. Compare with errors.Is or ==.
var (
	ErrTruncated    error = ReasonTruncated
	ErrBadVLAN      error = ReasonBadVLAN
	ErrBadARP       error = ReasonBadARP
	ErrBadVersion   error = ReasonBadVersion
	ErrBadIHL       error = ReasonBadIHL
	ErrBadLength    error = ReasonBadLength
	ErrBadFragment  error = ReasonBadFragment
	ErrBadExtHeader error = ReasonBadExtHeader
	ErrBadTCPOffset error = ReasonBadTCPOffset
	ErrBadUDPLength error = ReasonBadUDPLength
	ErrBadChecksum  error = ReasonBadChecksum
)

var reasonNames = [NumReasons]string{
	ReasonNone:         "none",
	ReasonTruncated:    "truncated",
	ReasonBadVLAN:      "bad_vlan",
	ReasonBadARP:       "bad_arp",
	ReasonBadVersion:   "bad_ip_version",
	ReasonBadIHL:       "bad_ihl",
	ReasonBadLength:    "bad_length",
	ReasonBadFragment:  "bad_fragment",
	ReasonBadExtHeader: "bad_ext_header",
	ReasonBadTCPOffset: "bad_tcp_offset",
	ReasonBadUDPLength: "bad_udp_length",
	ReasonBadChecksum:  "bad_checksum",
	ReasonOther:        "other",
}

var reasonErrors = [NumReasons]string{
	ReasonNone:         "frame: no error",
	ReasonTruncated:    "frame: truncated header",
	ReasonBadVLAN:      "frame: bad VLAN tagging",
	ReasonBadARP:       "frame: not an Ethernet/IPv4 ARP packet",
	ReasonBadVersion:   "frame: IP version does not match EtherType",
	ReasonBadIHL:       "frame: bad IPv4 header length",
	ReasonBadLength:    "frame: bad IP length",
	ReasonBadFragment:  "frame: bad fragment",
	ReasonBadExtHeader: "frame: bad IPv6 extension header chain",
	ReasonBadTCPOffset: "frame: bad TCP data offset",
	ReasonBadUDPLength: "frame: bad UDP length",
	ReasonBadChecksum:  "frame: bad checksum",
	ReasonOther:        "frame: other error",
}

// String returns a short snake_case name suitable as a metrics label.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Error implements error.
func (r Reason) Error() string {
	if r < NumReasons {
		return reasonErrors[r]
	}
	return "frame: unknown reason"
}

// ReasonOf maps an error to its drop reason: ReasonNone for nil, the Reason
// carried by err (also when wrapped), and ReasonOther for anything else. It
// does not allocate for the package's own sentinels.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	if r, ok := err.(Reason); ok {
		return r
	}
	var r Reason
	if errors.As(err, &r) {
		return r
	}
	return ReasonOther
}
