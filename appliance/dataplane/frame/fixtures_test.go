package frame

// Addresses of the test frames; the frames themselves are built with
// package frametest, whose checksums are an independent oracle.

type mac = [6]byte

var (
	macA      = mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x0a}
	macB      = mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x0b}
	macBcast  = mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ip4A      = [4]byte{192, 168, 1, 100}
	ip4B      = [4]byte{192, 168, 1, 1}
	ip6A      = [16]byte{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a}
	ip6B      = [16]byte{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}
	ip6LLA    = [16]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x0a}
	ip6SolB   = [16]byte{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x0b}
	ip4Zero   = [4]byte{}
	ip4Bcast  = [4]byte{255, 255, 255, 255}
	ip4IGMPv2 = [4]byte{224, 0, 0, 251}
)
