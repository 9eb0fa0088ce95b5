package pppoeac

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Server runs an AC on an interface: a packet socket that takes only
// discovery and the session's control frames (a socket filter keeps
// the session's IPv4 out, so that traffic costs it nothing).
type Server struct {
	AC     *AC
	fd     int
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once
}

// filter accepts PPPoE discovery and PPPoE session frames other than
// PPP protocol IPv4 (classic BPF).
var filter = []unix.SockFilter{
	{Code: 0x28, K: 12},                    // ldh [12]
	{Code: 0x15, Jt: 3, K: etherDiscovery}, // jeq 0x8863, accept
	{Code: 0x15, Jf: 3, K: etherSession},   // jeq 0x8864, else drop
	{Code: 0x28, K: 20},                    // ldh [20]: the PPP protocol
	{Code: 0x15, Jt: 1, K: 0x0021},         // jeq IPv4, drop
	{Code: 0x06, K: 0xffff},                // accept
	{Code: 0x06, K: 0},                     // drop
}

// Serve starts an AC of cfg on iface in the calling thread's network
// namespace; Close stops it.
func Serve(iface string, cfg Config) (*Server, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("pppoeac: %w", err)
	}
	const all = 0x0300 // htons(ETH_P_ALL): the taps, before the ingress hooks
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, all)
	if err != nil {
		return nil, fmt.Errorf("pppoeac: packet socket: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	errs := []error{
		unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog),
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}),
		unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: all, Ifindex: ifi.Index}),
	}
	if err := errors.Join(errs...); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pppoeac: %s: %w", iface, err)
	}
	to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
	s := &Server{fd: fd, done: make(chan struct{})}
	s.AC = New(cfg, func(b []byte) { unix.Sendto(fd, b, 0, to) })
	go s.run()
	return s, nil
}

func (s *Server) run() {
	defer close(s.done)
	buf := make([]byte, 2048)
	last := time.Now()
	for !s.closed.Load() {
		n, _, err := unix.Recvfrom(s.fd, buf, 0)
		switch {
		case err == nil:
			s.AC.Input(buf[:n])
		case err != unix.EAGAIN && err != unix.EINTR:
			return
		}
		if time.Since(last) >= time.Second {
			s.AC.Tick()
			last = time.Now()
		}
	}
}

// Close stops the AC (within a second).
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true) // the read times out within a second
		<-s.done
		err = unix.Close(s.fd)
	})
	return err
}
