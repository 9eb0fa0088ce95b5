package dhcp6s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/net/ipv6"
)

// Serve answers until ctx is done (nil then); it fails when the socket
// cannot be opened or reading it fails. The socket belongs to the calling
// thread's network namespace.
func (s *Server) Serve(ctx context.Context) error {
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("dhcp6s: %w", err)
	}
	if s.DUID() == nil {
		if len(ifi.HardwareAddr) != 6 {
			return fmt.Errorf("dhcp6s: %s has no Ethernet address for the server's DUID", ifi.Name)
		}
		duid := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifi.HardwareAddr}
		for {
			old := s.ans.Load()
			if s.ans.CompareAndSwap(old, &answers{duid: duid, dns: old.dns, domains: old.domains, irt: old.irt}) {
				break
			}
		}
	}
	group := &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers, Port: dhcpv6.DefaultServerPort}
	conn, err := server6.NewIPv6UDPConn(ifi.Name, group)
	if err != nil {
		return fmt.Errorf("dhcp6s: listen on %s: %w", ifi.Name, err)
	}
	if err := ipv6.NewPacketConn(conn).JoinGroup(ifi, group); err != nil {
		conn.Close()
		return fmt.Errorf("dhcp6s: %s: join %s: %w", ifi.Name, group.IP, err)
	}
	srv, err := server6.NewServer("", nil, s.handle, server6.WithConn(&gate{UDPConn: conn, s: s}), server6.WithLogger(libLog{s}))
	if err != nil {
		conn.Close()
		return fmt.Errorf("dhcp6s: %w", err)
	}
	s.log.Info("dhcp6s: serving", "duid", s.DUID().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-ctx.Done():
		srv.Close()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("dhcp6s: %s: %w", ifi.Name, err)
	}
}

// handle is server6's handler: it answers msg from peer (on a goroutine
// of its own).
func (s *Server) handle(conn net.PacketConn, peer net.Addr, msg dhcpv6.DHCPv6) {
	r, why := answer(msg, s.ans.Load())
	if r == nil {
		s.dropped[why].Add(1)
		return
	}
	if _, err := conn.WriteTo(r.ToBytes(), peer); err != nil {
		if !errors.Is(err, net.ErrClosed) {
			s.fail(fmt.Errorf("send to %v: %w", peer, err))
		}
		s.dropped[ReasonSend].Add(1)
		return
	}
	if t := msg.Type(); int(t) < len(s.served) {
		s.served[t].Add(1)
	}
}

func (s *Server) fail(err error) {
	s.log.Warn("dhcp6s", "err", err)
	e := err.Error()
	s.lastErr.Store(&e)
}

// gate is the server's socket as server6 reads it: messages over the rate
// limits are dropped before they are parsed or get a goroutine.
type gate struct {
	*net.UDPConn
	s *Server
}

func (g *gate) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, peer, err := g.UDPConn.ReadFromUDPAddrPort(b)
		if err != nil {
			return n, nil, err
		}
		g.s.received.Add(1)
		if why := g.s.lim.admit(peer.Addr(), g.s.now()); why != ReasonNone {
			g.s.dropped[why].Add(1)
			continue
		}
		return n, net.UDPAddrFromAddrPort(peer), nil
	}
}

// libLog is server6's logger: it counts the messages server6 could not
// parse and logs nothing.
type libLog struct{ s *Server }

func (l libLog) Printf(format string, _ ...any) {
	if strings.HasPrefix(format, "Error parsing") {
		l.s.dropped[ReasonMalformed].Add(1)
	}
}

func (libLog) PrintMessage(string, *dhcpv6.Message) {}
