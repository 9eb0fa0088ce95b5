package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// TCP connection bounds: in all, and per client address.
const (
	maxTCPConns          = 128
	maxTCPConnsPerClient = 8
)

// shutdownWait bounds how long stopping a listener waits for its queries.
const shutdownWait = 2 * time.Second

// listener is one listen address: its UDP socket and TCP listener, bound
// to the same port.
type listener struct {
	addr    netip.AddrPort
	pc      net.PacketConn
	ln      net.Listener
	servers []*running
}

// running is a dns.Server started on one of a listener's sockets.
type running struct {
	srv      *dns.Server
	started  chan struct{}
	exited   chan struct{}
	stopping atomic.Bool
}

// bind opens the UDP socket and the TCP listener of ap in the server's
// namespace, with one free port for both when ap's port is 0.
func (s *Server) bind(ap netip.AddrPort) (*listener, error) {
	var l *listener
	err := s.ns.do(func() error {
		lc := listenConfig()
		for try := 0; ; try++ {
			pc, err := lc.ListenPacket(context.Background(), "udp", ap.String())
			if err != nil {
				return fmt.Errorf("listen udp %s: %w", ap, err)
			}
			bound := netip.AddrPortFrom(ap.Addr(), uint16(pc.LocalAddr().(*net.UDPAddr).Port))
			ln, err := lc.Listen(context.Background(), "tcp", bound.String())
			if err != nil {
				pc.Close()
				if ap.Port() == 0 && try < 20 && errors.Is(err, syscall.EADDRINUSE) {
					continue
				}
				return fmt.Errorf("listen tcp %s: %w", bound, err)
			}
			l = &listener{addr: bound, pc: pc, ln: ln}
			return nil
		}
	})
	return l, err
}

// start serves a bound listener.
func (s *Server) start(l *listener) {
	accept := func(dh dns.Header) dns.MsgAcceptAction {
		a := acceptQuery(dh)
		if a == dns.MsgReject || a == dns.MsgRejectNotImplemented {
			s.stats.invalid.Add(1)
		}
		return a
	}
	invalid := func([]byte, error) { s.stats.invalid.Add(1) }
	h := dns.HandlerFunc(s.serveDNS)
	l.servers = []*running{
		{srv: &dns.Server{PacketConn: l.pc, Handler: h, UDPSize: dns.DefaultMsgSize, MsgAcceptFunc: accept, MsgInvalidFunc: invalid}},
		{srv: &dns.Server{Listener: &limitedListener{Listener: l.ln, lim: s.tcp}, Handler: h, MsgAcceptFunc: accept, MsgInvalidFunc: invalid}},
	}
	for _, r := range l.servers {
		r.started, r.exited = make(chan struct{}), make(chan struct{})
		r.srv.NotifyStartedFunc = func() { close(r.started) }
		go func() {
			defer close(r.exited)
			if err := r.srv.ActivateAndServe(); err != nil && !r.stopping.Load() {
				select {
				case s.errc <- fmt.Errorf("dnsd: serve %s: %w", l.addr, err):
				default:
				}
			}
		}()
	}
}

// stop shuts a listener down, waiting a while for its queries.
func (l *listener) stop() {
	if l.servers == nil {
		l.close()
		return
	}
	for _, r := range l.servers {
		r.stopping.Store(true)
		select {
		case <-r.started:
			ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
			r.srv.ShutdownContext(ctx)
			cancel()
		case <-r.exited:
		}
		<-r.exited
	}
	l.close()
}

// close closes the sockets (again, harmlessly, after a shutdown).
func (l *listener) close() {
	l.pc.Close()
	l.ln.Close()
}

// acceptQuery is dns.DefaultMsgAcceptFunc narrowed to plain queries: no
// responses (ignored), only QUERY (else NOTIMP), one question and nothing
// in the answer and authority sections (else FORMERR), at most two
// additional records (OPT, and a TSIG or cookie-bearing peer's extra).
func acceptQuery(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if dh.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	if int(dh.Bits>>11)&0xF != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	if dh.Qdcount != 1 || dh.Ancount != 0 || dh.Nscount != 0 || dh.Arcount > 2 {
		return dns.MsgReject
	}
	return dns.MsgAccept
}

// connLimit bounds TCP connections in all and per client.
type connLimit struct {
	mu    sync.Mutex
	total int
	per   map[netip.Addr]int
}

func (c *connLimit) take(a netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= maxTCPConns || c.per[a] >= maxTCPConnsPerClient {
		return false
	}
	c.total++
	c.per[a]++
	return true
}

func (c *connLimit) give(a netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.per[a]--; c.per[a] <= 0 {
		delete(c.per, a)
	}
}

// limitedListener closes connections beyond the connLimit at once.
type limitedListener struct {
	net.Listener
	lim *connLimit
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a := addrOf(c.RemoteAddr())
		if l.lim.take(a) {
			return &limitedConn{Conn: c, lim: l.lim, addr: a}, nil
		}
		c.Close()
	}
}

type limitedConn struct {
	net.Conn
	lim  *connLimit
	addr netip.Addr
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.lim.give(c.addr) })
	return err
}

// addrOf is the IP address of a UDP or TCP endpoint.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
