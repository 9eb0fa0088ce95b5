package dhcpd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// sweepEvery is how often Serve expires offers and leases and checks that
// its socket is still bound to the interface of that name; proveEvery how
// often it looks for use of unproven bindings (probation.go).
const (
	sweepEvery = 5 * time.Second
	proveEvery = time.Second
)

// socket is an open server socket and its reader.
type socket struct {
	conn  *net.UDPConn
	iface string
	index int        // the interface's index when the socket was bound
	done  chan error // the reader's end
}

// Serve answers requests on the config's interface until ctx ends, then
// writes the lease file and returns nil. It opens the socket on the
// calling goroutine, so in that thread's network namespace, and returns an
// error at once if it cannot. Later it reopens the socket when the
// interface is gone or was recreated (checked every sweepEvery) or Update
// names another one, retrying until it succeeds. Requests are handled one
// at a time by one reader, so a flood costs no goroutines; it writes the
// lease file at most every saveDelay.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("dhcpd: already serving")
	}
	defer s.serving.Store(false)
	sk, err := s.open(s.Config().Interface)
	if err != nil {
		return err
	}

	wctx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writer(wctx)
	}()
	defer func() {
		stopWriter()
		<-writerDone
		if err := s.flush(); err != nil {
			s.log.Error("dhcpd: final lease file write failed", "err", err)
		}
	}()

	tick := time.NewTicker(proveEvery)
	defer tick.Stop()
	lastSweep := time.Now()
	lastOpenErr := time.Time{}
	reopen := func() {
		if sk != nil {
			sk.close()
			sk = nil
		}
		iface := s.Config().Interface
		var err error
		if sk, err = s.open(iface); err != nil && time.Since(lastOpenErr) > time.Minute {
			lastOpenErr = time.Now()
			s.log.Error("dhcpd: cannot open the socket, retrying", "interface", iface, "err", err)
		}
	}
	for {
		var done <-chan error
		if sk != nil {
			done = sk.done
		}
		select {
		case <-ctx.Done():
			if sk != nil {
				sk.close()
			}
			s.log.Info("dhcpd: stopped")
			return nil
		case <-s.reopen:
			reopen()
		case err := <-done:
			s.log.Error("dhcpd: socket read failed, reopening", "interface", sk.iface, "err", err)
			sk.conn.Close()
			sk = nil
		case <-tick.C:
			if s.prove() {
				s.changed()
			}
			if time.Since(lastSweep) < sweepEvery {
				continue
			}
			lastSweep = time.Now()
			if s.sweep() {
				s.changed()
			}
			if sk == nil || sk.stale() || sk.iface != s.Config().Interface {
				reopen()
			}
		}
	}
}

// open binds a socket to iface, port 67, broadcasts allowed, and starts
// its reader. It must run on Serve's goroutine: the socket belongs to that
// thread's network namespace.
func (s *Server) open(iface string) (*socket, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("dhcpd: interface %s: %w", iface, err)
	}
	conn, err := server4.NewIPv4UDPConn(iface, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return nil, fmt.Errorf("dhcpd: listen on %s: %w", iface, err)
	}
	sk := &socket{conn: conn, iface: iface, index: ifi.Index, done: make(chan error, 1)}
	go s.read(sk)
	s.log.Info("dhcpd: serving", "interface", iface, "addr", conn.LocalAddr())
	return sk, nil
}

// stale reports whether the interface the socket is bound to is gone or
// was replaced by another of the same name.
func (sk *socket) stale() bool {
	ifi, err := net.InterfaceByName(sk.iface)
	return err != nil || ifi.Index != sk.index
}

// close stops the reader and closes the socket.
func (sk *socket) close() {
	sk.conn.Close()
	<-sk.done
}

// read handles the socket's requests until it is closed.
func (s *Server) read(sk *socket) {
	buf := make([]byte, 1<<16)
	var lastErr time.Time
	for {
		n, _, err := sk.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			sk.done <- err
			return
		}
		req, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			s.stats.dropped.Add(1)
			continue
		}
		resp := s.Handle(req)
		if resp == nil {
			continue
		}
		dst := ReplyAddr(req, resp)
		if _, err := sk.conn.WriteToUDPAddrPort(resp.ToBytes(), dst); err != nil && time.Since(lastErr) > time.Minute {
			lastErr = time.Now()
			s.log.Warn("dhcpd: reply not sent", "to", dst, "err", err)
		}
	}
}

// writer writes the lease file after changes, at most once per saveDelay.
func (s *Server) writer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.dirty:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(saveDelay):
		}
		if err := s.flush(); err != nil && time.Since(s.saveErr) > time.Minute {
			s.saveErr = time.Now()
			s.log.Error("dhcpd: lease file write failed", "err", err)
		}
	}
}
