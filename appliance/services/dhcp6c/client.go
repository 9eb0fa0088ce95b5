package dhcp6c

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"e1kbox/appliance/services/dhcpclient"
)

const (
	clientPort = 546
	serverPort = 547
)

// allServers is All_DHCP_Relay_Agents_and_Servers, ff02::1:2, and its
// Ethernet multicast address (RFC 2464 section 7).
var (
	allServers    = netip.MustParseAddr("ff02::1:2")
	allServersMAC = net.HardwareAddr{0x33, 0x33, 0x00, 0x01, 0x00, 0x02}
)

// Client holds the WAN's DHCPv6 bindings. Run drives it; Current, Stats,
// Decline and DUID may be called from any goroutine.
type Client struct {
	cfg  Config
	log  *slog.Logger
	rand func() float64 // in [-1, 1): the RAND of RFC 8415 section 15, ×10
	duid dhcpv6.DUID
	ll   netip.Addr
	core *dhcpclient.Core[*Lease, dhcpclient.Frame]

	mu       sync.Mutex
	declines []netip.Addr // for the machine to decline (Decline)
}

// Stats is what the client did: messages by type (Sent: SOLICIT,
// REQUEST, RENEW, REBIND, DECLINE, retransmissions included; Received:
// ADVERTISE, REPLY for our client ID, used or not), dropped frames by
// reason, the state (soliciting, requesting, bound, renewing, rebinding,
// declining; stopped outside Run) and the last error.
type Stats = dhcpclient.Stats

// New checks cfg, reads (or makes and keeps) the DUID and returns a
// client; nothing is opened before Run. A nil log logs to slog.Default.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("dhcp6c: %w", err)
	}
	d, err := loadDUID(cfg.StateDir, cfg.MAC, time.Now())
	if err != nil {
		return nil, fmt.Errorf("dhcp6c: %w", err)
	}
	c := &Client{cfg: cfg, rand: func() float64 { return 2*rand.Float64() - 1 }, duid: d, ll: cfg.LinkLocal}
	if !c.ll.IsValid() {
		c.ll = LinkLocal(cfg.MAC)
	}
	open := cfg.Open
	if open == nil {
		open = func() (dhcpclient.Transport, int, error) {
			return dhcpclient.OpenIPv6(cfg.Interface, cfg.MAC, clientPort, cfg.VLAN)
		}
	}
	c.core = dhcpclient.NewCore[*Lease, dhcpclient.Frame]("dhcp6c", "wan dhcpv6", cfg.Interface, log, open)
	c.log = c.core.Log
	return c, nil
}

// DUID is the client's DUID as sent in the Client Identifier option.
func (c *Client) DUID() []byte { return c.duid.ToBytes() }

// LinkLocal is the client's source address.
func (c *Client) LinkLocal() netip.Addr { return c.ll }

// Run runs the state machine until ctx is done; it returns nil then, and
// an error only when the packet socket cannot be opened. It opens the
// socket in the network namespace of the calling thread.
//
// onChange (may be nil) is called on Run's goroutine whenever the bound
// prefixes, addresses, DNS servers or domains change, the binding starts
// (old is nil) or ends (new is nil: every lifetime over). It gets copies.
// A renewal that changes only lifetimes does not call it. When ctx ends
// Run keeps the lease (Current and the state file). Run may be called
// again after it returned, not twice at once.
func (c *Client) Run(ctx context.Context, onChange func(old, new *Lease)) error {
	if onChange == nil {
		onChange = func(_, _ *Lease) {}
	}
	return c.core.Run(ctx, c.decode, func(tr dhcpclient.Transport, _ int) dhcpclient.Machine[dhcpclient.Frame] {
		return newMachine(c, tr, onChange)
	})
}

// decode checks a frame from the socket (decodeFrame) and copies what the
// machine keeps of it.
func (c *Client) decode(b []byte, csumValid bool) (dhcpclient.Frame, string) {
	f, why := decodeFrame(b, c.cfg.MAC, c.ll, csumValid)
	if why != "" {
		return dhcpclient.Frame{}, why
	}
	return dhcpclient.Frame{
		SrcMAC:  append(net.HardwareAddr(nil), f.SrcMAC...),
		SrcIP:   f.SrcIP,
		Payload: append([]byte(nil), f.Payload...),
	}, ""
}

// decodeFrame checks an Ethernet frame from the socket and returns its
// DHCPv6 payload (aliasing b) if it is a UDP datagram from port 547 to
// port 546 for mac and ll (unicast) or a multicast group; why says what is
// wrong otherwise. csumValid skips the UDP checksum the kernel vouched
// for.
func decodeFrame(b []byte, mac net.HardwareAddr, ll netip.Addr, csumValid bool) (dhcpclient.Frame, string) {
	f, why := dhcpclient.DecodeIPv6(b, mac, ll, clientPort, csumValid)
	if why == "" && f.SrcPort != serverPort {
		why = dhcpclient.DropWrongPort
	}
	return f, why
}

// Decline says that addr, an address of the lease, is another node's
// (duplicate address detection found it): the client stops using it at
// once (onChange gets the lease without it), tells the server with a
// Decline (RFC 8415 18.2.8; once bound, when it is in another exchange)
// and takes it from no Reply until that Decline is answered or given up.
// It does not block; an address not in the lease is ignored.
func (c *Client) Decline(addr netip.Addr) {
	c.mu.Lock()
	c.declines = append(c.declines, addr)
	c.mu.Unlock()
	c.core.Wake()
}

// takeDeclines returns the addresses Decline named since the last call.
func (c *Client) takeDeclines() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.declines
	c.declines = nil
	return d
}

// Current returns a copy of the bound lease, or nil.
func (c *Client) Current() *Lease { return c.core.Current() }

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats { return c.core.Stats() }
