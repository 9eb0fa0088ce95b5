package wanclient

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/services/dhcpclient"
)

const (
	serverPort = 67
	clientPort = 68
	ipv4HdrLen = frame.IPv4HeaderLen
	udpHdrLen  = frame.UDPHeaderLen
)

var (
	broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	zeroAddr     = netip.IPv4Unspecified()
	bcastAddr    = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

func newXID() dhcpv4.TransactionID {
	v := rand.Uint32()
	return dhcpv4.TransactionID{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
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
		// DISCOVER and REQUEST (RFC 2131 table 5: not in a RELEASE).
		if c.cfg.Hostname != "" {
			d.UpdateOption(dhcpv4.OptHostName(c.cfg.Hostname))
		}
		if c.cfg.VendorClass != "" {
			d.UpdateOption(dhcpv4.OptClassIdentifier(c.cfg.VendorClass))
		}
		if len(c.cfg.UserClass) > 0 {
			d.UpdateOption(dhcpv4.OptRFC3004UserClass(c.cfg.UserClass))
		}
		for _, o := range c.cfg.Options {
			d.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(o.Code), o.Value))
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
func send(c *Client, tr dhcpclient.Transport, msg *dhcpv4.DHCPv4, src, dst netip.Addr, dstMAC net.HardwareAddr) error {
	f := dhcpclient.Frame{
		DstMAC: dstMAC, SrcMAC: c.cfg.MAC,
		SrcIP: src, DstIP: dst,
		SrcPort: clientPort, DstPort: serverPort,
		Payload: msg.ToBytes(),
	}
	t := msg.MessageType().String()
	if err := tr.Write(f.Marshal(), dstMAC); err != nil {
		err = fmt.Errorf("send %s to %v: %w", t, dst, err)
		c.core.Fail(err)
		return err
	}
	c.core.CountSent(t)
	c.log.Debug("wan dhcp: sent", "type", t, "xid", msg.TransactionID.String(), "dst", dst, "ciaddr", msg.ClientIPAddr)
	return nil
}

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
	m.next = now.Add(retry.Wait(m.tries) + m.c.jitter())
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
		m.next = now.Add(retry.Wait(m.tries) + m.c.jitter())
	case stateInitReboot:
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), netip.Addr{},
			dhcpv4.OptRequestedIPAddress(net.IP(m.reboot.Addr.Addr().AsSlice())))
		m.broadcast(msg, zeroAddr)
		m.next = now.Add(retry.Wait(m.tries) + m.c.jitter())
	case stateRenewing:
		l := m.lease
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), l.Addr.Addr())
		send(m.c, m.tr, msg, l.Addr.Addr(), l.Server, unicastMAC(l))
		m.next = now.Add(max(l.T2.Sub(now)/2, minRenewWait))
	case stateRebinding:
		l := m.lease
		msg := m.message(dhcpv4.MessageTypeRequest, secsSince(m.began, now), l.Addr.Addr())
		m.broadcast(msg, l.Addr.Addr())
		m.next = now.Add(max(l.Expiry.Sub(now)/2, minRenewWait))
	}
	m.tries++
}

// unicastMAC is the Ethernet destination of unicasts to l's server: the
// source of its last ACK, else broadcast.
func unicastMAC(l *Lease) net.HardwareAddr {
	if len(l.ServerMAC) != 6 {
		return broadcastMAC
	}
	return l.ServerMAC
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
func sendRelease(c *Client, tr dhcpclient.Transport, l *Lease) error {
	msg := message(c, newXID(), dhcpv4.MessageTypeRelease, 0, l.Addr.Addr(), 0,
		dhcpv4.OptServerIdentifier(net.IP(l.Server.AsSlice())))
	c.log.Info("wan dhcp: release", "addr", l.Addr, "server", l.Server)
	return send(c, tr, msg, l.Addr.Addr(), l.Server, unicastMAC(l))
}
