package wanclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
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

var stateNames = [...]string{"stopped", "init", "init-reboot", "selecting", "requesting", "bound", "renewing", "rebinding"}

func (s state) String() string { return stateNames[s] }

// The state machine's timers.
const (
	backoffBase  = 4 * time.Second  // first retransmission of DISCOVER and REQUEST
	backoffMax   = 64 * time.Second // the backoff doubles up to this
	requestTries = 3                // REQUESTs for an OFFER before INIT (4, 8, 16 s)
	rebootTries  = 2                // INIT-REBOOT REQUESTs before INIT (4, 8 s)
	minRenewWait = 60 * time.Second // RFC 2131 4.4.5: least wait between RENEWING/REBINDING REQUESTs
)

// backoff is the wait after the (n+1)th transmission: 4, 8, 16, 32, 64, 64 … s.
func backoff(n int) time.Duration {
	if n >= 4 {
		return backoffMax
	}
	return backoffBase << n
}

// machine is the state of one Run; only Run's goroutine touches it.
type machine struct {
	c        *Client
	tr       transport
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

func newMachine(c *Client, tr transport, mtu int, onChange func(old, new *Lease)) *machine {
	// Option 57: the largest reply that fits the interface unfragmented.
	maxMsg := 1500 - ipv4HdrLen - udpHdrLen
	if mtu >= 576 {
		maxMsg = min(mtu, 65535) - ipv4HdrLen - udpHdrLen
	}
	return &machine{c: c, tr: tr, maxMsg: uint16(maxMsg), onChange: onChange}
}

// run is the event loop: one timer for the next deadline, the replies and
// Release.
func (m *machine) run(ctx context.Context, frames <-chan reply, release <-chan chan error) error {
	m.start(m.c.clock.Now())
	for {
		fire, stop := m.c.clock.Timer(m.wakeAt())
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-fire:
			m.tick(m.c.clock.Now())
		case r := <-frames:
			m.handle(r, m.c.clock.Now())
		case done := <-release:
			stop()
			done <- m.release()
			return nil
		}
		stop()
	}
}

// start picks the first state: INIT-REBOOT with an unexpired lease from
// the lease file, else INIT.
func (m *machine) start(now time.Time) {
	if m.c.cfg.LeaseFile != "" {
		l, err := loadLease(m.c.cfg.LeaseFile, m.c.cfg.MAC)
		switch {
		case err != nil:
			m.c.setError(fmt.Errorf("lease file: %w", err))
		case l != nil && now.Before(l.Expiry):
			m.reboot = l
			m.hint = l.Addr.Addr()
			m.enterInitReboot(now)
			return
		case l != nil:
			m.hint = l.Addr.Addr()
			m.c.log.Info("wan dhcp: lease in the lease file expired", "addr", l.Addr, "expiry", l.Expiry)
		}
	}
	m.enterInit(now, 0)
}

func (m *machine) setState(s state) {
	m.state = s
	m.c.setState(s)
}

// wakeAt is the next deadline of the state.
func (m *machine) wakeAt() time.Time {
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

// tick acts on every deadline that has passed.
func (m *machine) tick(now time.Time) {
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

func (m *machine) newXID() {
	v := rand.Uint32()
	m.xid = dhcpv4.TransactionID{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func (m *machine) startSelecting(now time.Time) {
	m.setState(stateSelecting)
	m.newXID()
	m.began, m.tries = now, 0
	m.sendDiscover(now)
}

func (m *machine) enterInitReboot(now time.Time) {
	m.setState(stateInitReboot)
	m.newXID()
	m.began, m.reqAt, m.tries = now, now, 0
	m.sendRequest(now)
}

// enterExchange starts RENEWING or REBINDING with a new xid.
func (m *machine) enterExchange(now time.Time, s state) {
	m.setState(s)
	m.newXID()
	m.began, m.reqAt, m.tries = now, now, 0
	m.sendRequest(now)
}

// secsSince is the secs field: seconds since the exchange began.
func secsSince(began, now time.Time) uint16 {
	return uint16(min(now.Sub(began)/time.Second, 65535))
}

// message builds a BOOTREQUEST of type t with the client's identity.
func (m *machine) message(t dhcpv4.MessageType, secs uint16, ciaddr netip.Addr, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	return message(m.c, m.xid, t, secs, ciaddr, m.maxMsg, opts...)
}

func message(c *Client, xid dhcpv4.TransactionID, t dhcpv4.MessageType, secs uint16, ciaddr netip.Addr, maxMsg uint16, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	d := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootRequest,
		HWType:        iana.HWTypeEthernet,
		TransactionID: xid,
		NumSeconds:    secs,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: net.IPv4zero,
		ClientHWAddr:  c.cfg.MAC,
		Options:       dhcpv4.Options{},
	}
	if ciaddr.IsValid() {
		d.ClientIPAddr = net.IP(ciaddr.AsSlice())
	}
	d.UpdateOption(dhcpv4.OptMessageType(t))
	d.UpdateOption(dhcpv4.OptClientIdentifier(c.cfg.ClientID))
	if t != dhcpv4.MessageTypeRelease {
		if c.cfg.Hostname != "" {
			d.UpdateOption(dhcpv4.OptHostName(c.cfg.Hostname))
		}
		codes := make([]dhcpv4.OptionCode, len(c.cfg.Params))
		for i, p := range c.cfg.Params {
			codes[i] = dhcpv4.GenericOptionCode(p)
		}
		d.UpdateOption(dhcpv4.OptParameterRequestList(codes...))
		d.UpdateOption(dhcpv4.OptMaxMessageSize(maxMsg))
	}
	for _, o := range opts {
		d.UpdateOption(o)
	}
	return d
}

// send frames msg from src to dst (IP) via dstMAC and counts it.
func send(c *Client, tr transport, msg *dhcpv4.DHCPv4, src, dst netip.Addr, dstMAC net.HardwareAddr) error {
	f := udpFrame{
		DstMAC: dstMAC, SrcMAC: c.cfg.MAC,
		SrcIP: src, DstIP: dst,
		SrcPort: clientPort, DstPort: serverPort,
		Payload: msg.ToBytes(),
	}
	t := msg.MessageType().String()
	if err := tr.Write(f.marshal(), dstMAC); err != nil {
		err = fmt.Errorf("send %s to %v: %w", t, dst, err)
		c.setError(err)
		return err
	}
	c.countSent(t)
	c.log.Debug("wan dhcp: sent", "type", t, "xid", msg.TransactionID.String(), "dst", dst, "ciaddr", msg.ClientIPAddr)
	return nil
}

var (
	zeroAddr  = netip.IPv4Unspecified()
	bcastAddr = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

func (m *machine) broadcast(msg *dhcpv4.DHCPv4, src netip.Addr) {
	send(m.c, m.tr, msg, src, bcastAddr, broadcastMAC)
}

// sendDiscover broadcasts a DISCOVER and schedules its retransmission.
func (m *machine) sendDiscover(now time.Time) {
	m.secs = secsSince(m.began, now)
	var opts []dhcpv4.Option
	if m.hint.IsValid() {
		opts = append(opts, dhcpv4.OptRequestedIPAddress(net.IP(m.hint.AsSlice())))
	}
	m.broadcast(m.message(dhcpv4.MessageTypeDiscover, m.secs, netip.Addr{}, opts...), zeroAddr)
	m.next = now.Add(backoff(m.tries) + m.c.jitter())
	m.tries++
}

// sendRequest sends the REQUEST of the state and schedules the next one.
func (m *machine) sendRequest(now time.Time) {
	switch m.state {
	case stateRequesting:
		// RFC 2131 4.4.1: same secs and destination as the DISCOVER.
		msg := m.message(dhcpv4.MessageTypeRequest, m.secs, netip.Addr{},
			dhcpv4.OptRequestedIPAddress(m.offer.YourIPAddr),
			dhcpv4.OptServerIdentifier(net.IP(m.offerBy.AsSlice())))
		m.broadcast(msg, zeroAddr)
		m.next = now.Add(backoff(m.tries) + m.c.jitter())
	case stateInitReboot:
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), netip.Addr{},
			dhcpv4.OptRequestedIPAddress(net.IP(m.reboot.Addr.Addr().AsSlice())))
		m.broadcast(msg, zeroAddr)
		m.next = now.Add(backoff(m.tries) + m.c.jitter())
	case stateRenewing:
		l := m.lease
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), l.Addr.Addr())
		dstMAC := l.ServerMAC
		if len(dstMAC) != 6 {
			dstMAC = broadcastMAC
		}
		send(m.c, m.tr, msg, l.Addr.Addr(), l.Server, dstMAC)
		m.next = now.Add(max(l.T2.Sub(now)/2, minRenewWait))
	case stateRebinding:
		l := m.lease
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), l.Addr.Addr())
		m.broadcast(msg, l.Addr.Addr())
		m.next = now.Add(max(l.Expiry.Sub(now)/2, minRenewWait))
	}
	m.tries++
}

// handle takes a decoded reply: it checks that it is for this client and
// this exchange, then acts on it.
func (m *machine) handle(r reply, now time.Time) {
	msg := r.Msg
	mac := m.c.cfg.MAC
	if !macEqual(r.DstMAC, mac) && !macEqual(r.DstMAC, broadcastMAC) {
		m.c.ignore(dropNotOurMAC)
		return
	}
	if !macEqual(msg.ClientHWAddr, mac) {
		m.c.ignore(dropWrongChaddr)
		return
	}
	t := msg.MessageType()
	m.c.countReceived(t.String())
	if !m.waiting() || msg.TransactionID != m.xid {
		m.c.ignore(dropWrongXID)
		return
	}
	server, _ := addrFromIP(msg.ServerIdentifier())
	switch m.state {
	case stateSelecting:
		if t != dhcpv4.MessageTypeOffer {
			m.c.ignore(dropUnexpected)
			return
		}
		yi, ok := addrFromIP(msg.YourIPAddr)
		if !ok || !usable(yi) || !usable(server) {
			m.c.ignore(dropBadOffer)
			return
		}
		m.offer, m.offerBy = msg, server
		m.setState(stateRequesting)
		m.reqAt, m.tries = now, 0
		m.c.log.Info("wan dhcp: offer", "addr", yi, "server", server)
		m.sendRequest(now)
	case stateRequesting, stateRenewing:
		want := m.offerBy
		if m.state == stateRenewing {
			want = m.lease.Server
		}
		if server.IsValid() && server != want {
			m.c.ignore(dropWrongServer)
			return
		}
		m.answer(r, now)
	case stateInitReboot, stateRebinding:
		m.answer(r, now)
	}
}

// waiting reports whether an exchange awaits a reply.
func (m *machine) waiting() bool {
	switch m.state {
	case stateSelecting, stateRequesting, stateInitReboot, stateRenewing, stateRebinding:
		return true
	}
	return false
}

// answer takes an ACK or NAK to a REQUEST.
func (m *machine) answer(r reply, now time.Time) {
	switch r.Msg.MessageType() {
	case dhcpv4.MessageTypeAck:
		m.bind(r, now)
	case dhcpv4.MessageTypeNak:
		m.nak(r, now)
	default:
		m.c.ignore(dropUnexpected)
	}
}

// bind takes an ACK: the lease starts or is extended, and onChange hears of
// a new configuration.
func (m *machine) bind(r reply, now time.Time) {
	l, err := leaseFromACK(r.Msg, r.SrcMAC, r.SrcIP, m.reqAt)
	if err == nil && !now.Before(l.Expiry) {
		err = fmt.Errorf("expired at %v", l.Expiry)
	}
	if err != nil {
		m.c.ignore(dropBadLease)
		m.c.setError(fmt.Errorf("ACK from %v: %w", r.SrcIP, err))
		return
	}
	old, from := m.lease, m.state
	m.lease, m.reboot, m.offer, m.naks = l, nil, nil, 0
	m.hint = l.Addr.Addr()
	m.c.setLease(l)
	if m.c.cfg.LeaseFile != "" {
		if err := saveLease(m.c.cfg.LeaseFile, m.c.cfg.MAC, l); err != nil {
			m.c.setError(err)
		}
	}
	attrs := []any{"from", from.String(), "addr", l.Addr, "gateway", l.Gateway, "dns", l.DNS,
		"mtu", l.MTU, "server", l.Server, "t1", l.T1.Sub(l.Obtained), "expiry", l.Expiry.Sub(l.Obtained)}
	if old != nil && sameConfig(old, l) {
		m.c.log.Debug("wan dhcp: lease extended", attrs...)
	} else {
		m.c.log.Info("wan dhcp: bound", attrs...)
		m.onChange(old.Clone(), l.Clone())
	}
	// Last: whoever sees BOUND in Stats sees the lease, its file and
	// onChange done.
	m.setState(stateBound)
}

// nak takes a NAK: any lease is gone, and INIT follows, later for every
// further NAK in a row.
func (m *machine) nak(r reply, now time.Time) {
	m.naks++
	delay := time.Duration(0)
	if m.naks > 1 {
		delay = backoff(m.naks-2) + m.c.jitter()
	}
	m.c.log.Info("wan dhcp: NAK", "state", m.state.String(), "server", r.SrcIP, "message", r.Msg.Message(), "retry_in", delay)
	old := m.lease
	m.lease, m.reboot, m.hint = nil, nil, netip.Addr{}
	if m.c.cfg.LeaseFile != "" && (old != nil || m.state == stateInitReboot) {
		if err := removeLease(m.c.cfg.LeaseFile); err != nil {
			m.c.setError(err)
		}
	}
	m.enterInit(now, delay)
	if old != nil {
		m.c.setLease(nil)
		m.onChange(old.Clone(), nil)
	}
}

// expire ends a lease that no server renewed.
func (m *machine) expire(now time.Time) {
	old := m.lease
	m.lease = nil
	m.c.log.Warn("wan dhcp: lease expired", "addr", old.Addr, "server", old.Server)
	m.c.setLease(nil)
	m.enterInit(now, 0)
	m.onChange(old.Clone(), nil)
}

// release gives the lease up for Release.
func (m *machine) release() error {
	old := m.lease
	if old == nil {
		return nil
	}
	err := sendRelease(m.c, m.tr, old)
	m.lease = nil
	m.c.forget()
	m.onChange(old.Clone(), nil)
	return err
}

// sendRelease unicasts a DHCPRELEASE for l to its server.
func sendRelease(c *Client, tr transport, l *Lease) error {
	v := rand.Uint32()
	xid := dhcpv4.TransactionID{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	msg := message(c, xid, dhcpv4.MessageTypeRelease, 0, l.Addr.Addr(), 0,
		dhcpv4.OptServerIdentifier(net.IP(l.Server.AsSlice())))
	dstMAC := l.ServerMAC
	if len(dstMAC) != 6 {
		dstMAC = broadcastMAC
	}
	c.log.Info("wan dhcp: release", "addr", l.Addr, "server", l.Server)
	return send(c, tr, msg, l.Addr.Addr(), l.Server, dstMAC)
}

func macEqual(a, b net.HardwareAddr) bool {
	return len(a) == len(b) && string(a) == string(b)
}
