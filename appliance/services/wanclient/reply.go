package wanclient

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

// Reasons a reply is dropped, as counted in Stats.Ignored, besides the
// frame's (dhcpclient.Drop…).
const (
	dropBadDHCP       = "bad_dhcp"        // the payload is no DHCP message
	dropNotReply      = "not_reply"       // op is not BOOTREPLY
	dropNotEthernet   = "not_ethernet"    // htype/hlen are not Ethernet's
	dropNoMessageType = "no_message_type" // option 53 missing
	dropNotOurMAC     = "not_our_mac"     // the frame is for another host
	dropWrongChaddr   = "wrong_chaddr"    // the reply is for another client
	dropWrongXID      = "wrong_xid"       // no exchange of ours has this xid
	dropUnexpected    = "unexpected_type" // a message type the state does not take
	dropWrongServer   = "wrong_server"    // from a server other than the one asked
	dropBadOffer      = "bad_offer"       // an OFFER without a usable address or server id
	dropBadLease      = "bad_lease"       // an ACK whose lease cannot be used
)

// reply is a DHCP reply as received, with the frame's addresses.
type reply struct {
	DstMAC, SrcMAC net.HardwareAddr
	SrcIP          netip.Addr
	Msg            *dhcpv4.DHCPv4
}

// decodeReply parses a received frame as a DHCP reply from a server (port
// 67 to port 68). It returns why the frame is not one, or "".
func decodeReply(b []byte, csumValid bool) (reply, string) {
	f, why := dhcpclient.DecodeIPv4(b, clientPort, csumValid)
	if why != "" {
		return reply{}, why
	}
	if f.SrcPort != serverPort {
		return reply{}, dhcpclient.DropWrongPort
	}
	msg, err := dhcpv4.FromBytes(f.Payload)
	if err != nil {
		return reply{}, dropBadDHCP
	}
	if msg.OpCode != dhcpv4.OpcodeBootReply {
		return reply{}, dropNotReply
	}
	if msg.HWType != iana.HWTypeEthernet || len(msg.ClientHWAddr) != 6 {
		return reply{}, dropNotEthernet
	}
	if msg.MessageType() == dhcpv4.MessageTypeNone {
		return reply{}, dropNoMessageType
	}
	r := reply{
		DstMAC: append(net.HardwareAddr(nil), f.DstMAC...),
		SrcMAC: append(net.HardwareAddr(nil), f.SrcMAC...),
		SrcIP:  f.SrcIP,
		Msg:    msg,
	}
	return r, ""
}

// Handle takes a decoded reply: it checks that it is for this client and
// this exchange, then acts on it.
func (m *machine) Handle(r reply, now time.Time) {
	msg := r.Msg
	mac := m.c.cfg.MAC
	if !macEqual(r.DstMAC, mac) && !macEqual(r.DstMAC, broadcastMAC) {
		m.core.Ignore(dropNotOurMAC)
		return
	}
	if !macEqual(msg.ClientHWAddr, mac) {
		m.core.Ignore(dropWrongChaddr)
		return
	}
	t := msg.MessageType()
	m.core.CountReceived(t.String())
	if !m.waiting() || msg.TransactionID != m.xid {
		m.core.Ignore(dropWrongXID)
		return
	}
	server, _ := addrFromIP(msg.ServerIdentifier())
	switch m.state {
	case stateSelecting:
		if t != dhcpv4.MessageTypeOffer {
			m.core.Ignore(dropUnexpected)
			return
		}
		yi, ok := addrFromIP(msg.YourIPAddr)
		if !ok || !usable(yi) || !usable(server) {
			m.core.Ignore(dropBadOffer)
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
			m.core.Ignore(dropWrongServer)
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
		m.core.Ignore(dropUnexpected)
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
		m.core.Ignore(dropBadLease)
		m.core.Fail(fmt.Errorf("ACK from %v: %w", r.SrcIP, err))
		return
	}
	old, from := m.lease, m.state
	m.lease, m.reboot, m.offer, m.naks = l, nil, nil, 0
	m.hint = l.Addr.Addr()
	m.core.SetLease(l)
	if m.c.cfg.LeaseFile != "" {
		if err := saveLease(m.c.cfg.LeaseFile, m.c.cfg.MAC, l); err != nil {
			m.core.Fail(err)
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
		delay = retry.Wait(m.naks-2) + m.c.jitter()
	}
	m.c.log.Info("wan dhcp: NAK", "state", m.state.String(), "server", r.SrcIP, "message", r.Msg.Message(), "retry_in", delay)
	old := m.lease
	m.lease, m.reboot, m.hint = nil, nil, netip.Addr{}
	if m.c.cfg.LeaseFile != "" && (old != nil || m.state == stateInitReboot) {
		if err := dhcpclient.RemoveFile(m.c.cfg.LeaseFile); err != nil {
			m.core.Fail(err)
		}
	}
	m.enterInit(now, delay)
	if old != nil {
		m.core.SetLease(nil)
		m.onChange(old.Clone(), nil)
	}
}

// expire ends a lease that no server renewed.
func (m *machine) expire(now time.Time) {
	old := m.lease
	m.lease = nil
	m.c.log.Warn("wan dhcp: lease expired", "addr", old.Addr, "server", old.Server)
	m.core.SetLease(nil)
	m.enterInit(now, 0)
	m.onChange(old.Clone(), nil)
}

func macEqual(a, b net.HardwareAddr) bool {
	return len(a) == len(b) && string(a) == string(b)
}
