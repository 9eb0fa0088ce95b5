package wanclient

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/services/dhcpclient"
)

// state is an RFC 2131 client state.
type state int

const (
	stateStopped state = iota
	stateInit
	stateInitReboot
	stateSelecting
	stateRequesting
	stateBound
	stateRenewing
	stateRebinding
)

var stateNames = [...]string{dhcpclient.StateStopped, "init", "init-reboot", "selecting", "requesting", "bound", "renewing", "rebinding"}

func (s state) String() string { return stateNames[s] }

// The state machine's timers.
const (
	requestTries = 3                // REQUESTs for an OFFER before INIT (4, 8, 16 s)
	rebootTries  = 2                // INIT-REBOOT REQUESTs before INIT (4, 8 s)
	minRenewWait = 60 * time.Second // RFC 2131 4.4.5: least wait between RENEWING/REBINDING REQUESTs
)

// retry is the wait after the (n+1)th DISCOVER or REQUEST of an exchange
// (and before the next DISCOVER after NAKs in a row): 4, 8, 16, 32, 64,
// 64 … s, jitter aside.
var retry = dhcpclient.Backoff{Base: 4 * time.Second, Max: 64 * time.Second}

// machine is the state of one Run; only Run's goroutine touches it.
type machine struct {
	c        *Client
	core     *dhcpclient.Core[*Lease, reply]
	tr       dhcpclient.Transport
	maxMsg   uint16
	onChange func(old, new *Lease)

	state  state
	lease  *Lease     // the bound lease (BOUND, RENEWING, REBINDING)
	reboot *Lease     // the lease INIT-REBOOT asks for
	hint   netip.Addr // the last address, suggested in DISCOVER

	xid     dhcpv4.TransactionID
	began   time.Time // start of the exchange: the secs field counts from it
	secs    uint16    // secs of the last DISCOVER; REQUESTING repeats it
	reqAt   time.Time // first REQUEST of the exchange: a lease counts from it
	next    time.Time // next transmission (in INIT: the first DISCOVER)
	tries   int       // transmissions in this exchange
	offer   *dhcpv4.DHCPv4
	offerBy netip.Addr // the OFFER's server identifier
	naks    int        // NAKs since the last ACK
}

func newMachine(c *Client, tr dhcpclient.Transport, mtu int, onChange func(old, new *Lease)) *machine {
	// Option 57: the largest reply that fits the interface unfragmented.
	maxMsg := 1500 - ipv4HdrLen - udpHdrLen
	if mtu >= 576 {
		maxMsg = min(mtu, 65535) - ipv4HdrLen - udpHdrLen
	}
	return &machine{c: c, core: c.core, tr: tr, maxMsg: uint16(maxMsg), onChange: onChange}
}

// Start picks the first state: INIT-REBOOT with an unexpired lease from
// the lease file, else INIT.
func (m *machine) Start(now time.Time) {
	if m.c.cfg.LeaseFile != "" {
		l, err := loadLease(m.c.cfg.LeaseFile, m.c.cfg.MAC)
		switch {
		case err != nil:
			m.core.Fail(fmt.Errorf("lease file: %w", err))
		case l != nil && now.Before(l.Expiry):
			m.reboot = l
			m.hint = l.Addr.Addr()
			m.enterExchange(now, stateInitReboot)
			return
		case l != nil:
			m.hint = l.Addr.Addr()
			m.c.log.Info("wan dhcp: lease in the lease file expired", "addr", l.Addr, "expiry", l.Expiry)
		}
	}
	m.enterInit(now, 0)
}

// Woken is never called: nothing but Release (Core.Stop) reaches a
// running DHCPv4 machine from outside.
func (m *machine) Woken(time.Time) {}

func (m *machine) setState(s state) {
	m.state = s
	m.core.SetState(s.String())
}

// WakeAt is the next deadline of the state.
func (m *machine) WakeAt() time.Time {
	switch m.state {
	case stateInitReboot:
		return earliest(m.next, m.reboot.Expiry)
	case stateBound:
		return m.lease.T1
	case stateRenewing:
		return earliest(m.next, m.lease.T2)
	case stateRebinding:
		return earliest(m.next, m.lease.Expiry)
	default:
		return m.next
	}
}

// Tick acts on every deadline that has passed.
func (m *machine) Tick(now time.Time) {
	switch m.state {
	case stateInit:
		if !now.Before(m.next) {
			m.startSelecting(now)
		}
	case stateSelecting:
		if !now.Before(m.next) {
			m.sendDiscover(now)
		}
	case stateRequesting:
		if now.Before(m.next) {
			return
		}
		if m.tries >= requestTries {
			m.c.log.Info("wan dhcp: no answer to REQUEST, back to INIT", "offered", m.offer.YourIPAddr, "server", m.offerBy)
			m.enterInit(now, 0)
			return
		}
		m.sendRequest(now)
	case stateInitReboot:
		if !now.Before(m.reboot.Expiry) || (!now.Before(m.next) && m.tries >= rebootTries) {
			m.c.log.Info("wan dhcp: no answer to INIT-REBOOT, back to INIT", "addr", m.reboot.Addr)
			m.reboot = nil
			m.enterInit(now, 0)
			return
		}
		if !now.Before(m.next) {
			m.sendRequest(now)
		}
	case stateBound, stateRenewing, stateRebinding:
		switch {
		case !now.Before(m.lease.Expiry):
			m.expire(now)
		case !now.Before(m.lease.T2) && m.state != stateRebinding:
			m.enterExchange(now, stateRebinding)
		case !now.Before(m.lease.T1) && m.state == stateBound:
			m.enterExchange(now, stateRenewing)
		case m.state != stateBound && !now.Before(m.next):
			m.sendRequest(now)
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// enterInit drops back to INIT; the first DISCOVER goes out after delay.
func (m *machine) enterInit(now time.Time, delay time.Duration) {
	m.setState(stateInit)
	m.offer = nil
	m.next = now.Add(delay)
}

func (m *machine) startSelecting(now time.Time) {
	m.setState(stateSelecting)
	m.xid = newXID()
	m.began, m.tries = now, 0
	m.sendDiscover(now)
}

// enterExchange starts INIT-REBOOT, RENEWING or REBINDING with a new xid.
func (m *machine) enterExchange(now time.Time, s state) {
	m.setState(s)
	m.xid = newXID()
	m.began, m.reqAt, m.tries = now, now, 0
	m.sendRequest(now)
}

// secsSince is the secs field: seconds since the exchange began.
func secsSince(began, now time.Time) uint16 {
	return uint16(min(now.Sub(began)/time.Second, 65535))
}
