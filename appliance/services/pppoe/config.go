package pppoe

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// Config is a PPPoE client's configuration.
type Config struct {
	// User and Password authenticate us with PAP or CHAP-MD5, whichever the
	// peer asks for; with no User the client refuses to authenticate.
	User, Password string
	// Service is the Service-Name asked for in PADI/PADR; "" takes any.
	Service string
	// ACName, when set, accepts only PADOs from the access concentrator of
	// that name.
	ACName string
	// MRU is the MRU to ask for: 0 is 1492; above 1492 the client offers
	// RFC 4638's PPP-Max-Payload and asks for it only if the AC confirms.
	MRU int
	// HostUniq is the Host-Uniq tag; nil draws a random one per discovery
	// attempt.
	HostUniq []byte
	// EchoInterval is the LCP echo keepalive period (0: 10 s; negative:
	// off) and EchoFailures the unanswered echoes after which the link is
	// dead (0: 3).
	EchoInterval time.Duration
	EchoFailures int
	// IPv6 runs IPv6CP besides IPCP.
	IPv6 bool
	// MAC is the WAN port's address, the source of our frames.
	MAC net.HardwareAddr
	// InterfaceID is our IPv6CP interface identifier; zero derives it from
	// MAC (modified EUI-64).
	InterfaceID [8]byte

	// Backoff is the first delay before reconnecting after a drop (0: 1 s),
	// doubling up to MaxBackoff (0: 60 s); an authentication failure waits
	// at least AuthBackoff (0: 30 s), doubling up to 5 minutes. A session
	// that comes up resets them.
	Backoff, MaxBackoff, AuthBackoff time.Duration

	// OnEvent, when set, is called on the Run goroutine whenever the
	// session comes up, changes its addresses or goes down. It must not
	// block.
	OnEvent func(Event)
	// Log receives the client's log; nil discards it.
	Log *slog.Logger
	// Clock and Rand replace the wall clock and crypto/rand (tests).
	Clock Clock
	Rand  io.Reader
}

const (
	defaultMRU    = 1492
	maxMRU        = 1500 // largest MRU asked for with RFC 4638 on a 1508-byte Ethernet payload
	padiFirst     = time.Second
	padiCap       = 32 * time.Second
	padrTries     = 3
	maxAuthWait   = 5 * time.Minute
	defaultEchoIv = 10 * time.Second
)

func (c *Config) hasCredentials() bool { return c.User != "" }

// withDefaults validates the config and fills in its zero values.
func (c Config) withDefaults() (Config, error) {
	if len(c.MAC) != 6 {
		return c, fmt.Errorf("pppoe: MAC %q is not an Ethernet address", c.MAC)
	}
	if c.MRU == 0 {
		c.MRU = defaultMRU
	}
	if c.MRU < minMRU || c.MRU > maxMRU {
		return c, fmt.Errorf("pppoe: MRU %d outside %d..%d", c.MRU, minMRU, maxMRU)
	}
	if len(c.User) > 255 || len(c.Password) > 255 {
		return c, errors.New("pppoe: user and password are at most 255 bytes")
	}
	if len(c.HostUniq) > 64 || len(c.Service) > 255 || len(c.ACName) > 255 {
		return c, errors.New("pppoe: Host-Uniq at most 64 bytes, Service and AC name at most 255")
	}
	if c.EchoInterval == 0 {
		c.EchoInterval = defaultEchoIv
	}
	if c.EchoFailures <= 0 {
		c.EchoFailures = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Minute
	}
	if c.AuthBackoff <= 0 {
		c.AuthBackoff = 30 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	return c, nil
}

// Phase is where a client is on the way to a session.
type Phase uint8

// Phases, in order.
const (
	PhaseDown      Phase = iota // no session; waiting to reconnect
	PhaseDiscovery              // PADI/PADR sent
	PhaseLCP                    // session up, LCP negotiating
	PhaseAuth                   // PAP or CHAP
	PhaseNetwork                // IPCP/IPv6CP negotiating
	PhaseUp                     // at least one network protocol open
)

var phaseNames = [...]string{"down", "discovery", "lcp", "auth", "network", "up"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// Status is a client's state as the dashboard and the router see it.
type Status struct {
	Phase     Phase
	ACName    string
	ACMAC     net.HardwareAddr
	SessionID uint16
	// MRU is what we receive, MTU what we send: the peer's MRU, at most
	// 1492 unless the AC confirmed RFC 4638's PPP-Max-Payload.
	MRU, MTU int
	RFC4638  bool
	// IPCP's result.
	LocalIPv4, PeerIPv4, DNS1, DNS2 netip.Addr
	// IPv6CP's result: the interface identifiers and the link-local
	// addresses made of them.
	LocalIfaceID, PeerIfaceID     [8]byte
	LocalLinkLocal, PeerLinkLocal netip.Addr
	// EchoRTT is the round trip of the last answered LCP echo.
	EchoRTT time.Duration
	// UpSince is when the session last came up (zero when not up).
	UpSince time.Time
	// Reconnects counts the discoveries restarted after a drop, and
	// LastDownReason says why the last session (or attempt) ended.
	Reconnects     int
	LastDownReason string
	// Ignored counts received frames the client could not use (malformed,
	// not ours, unexpected) and InputDrops those Input dropped because the
	// queue was full or the frame too long.
	Ignored, InputDrops uint64
}

// Event tells the router that the session came up, changed or went down:
// Up is Status.Phase == PhaseUp.
type Event struct {
	Up     bool
	Status Status
}

// Clock is the time source of the Run loop; tests drive a fake one.
type Clock interface {
	Now() time.Time
	// Timer fires once at (or after) at; stop releases it.
	Timer(at time.Time) (fire <-chan time.Time, stop func())
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Timer is a time.Timer for at.
func (RealClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}
