// Package listener is the dashboard's listener: it listens on the management addresses the config allows and follows the system's address changes.
package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
)

// spec says where the dashboard listens.
type spec struct {
	// exact, when set, is the one address to listen on, as given
	// ("192.168.1.2:8080", or ":8080" for every address).
	exact string
	// Otherwise the dashboard listens on port on the management
	// addresses: every address of the host port's TAP device (the box's
	// address on the data side), and the loopback and private addresses
	// (RFC 1918, ULA, link-local) of the other interfaces that are not
	// data ports (the management port). Never on a data port, never on a
	// public address outside the host port: the WAN side gets nothing,
	// whatever the kernel's sysctls or the tcx program do.
	port int
	host string   // the host port's interface; "" without one
	data []string // the data ports' interfaces
}

// specFor derives the listen spec from the -listen flag (an exact
// address; "" defers to the config) and the runtime config: a
// dashboard.listen with an IP listens exactly there, one without (":8080",
// the default) on the management addresses.
func specFor(flagListen string, c *config.Config) (spec, error) {
	if flagListen != "" {
		return spec{exact: flagListen}, nil
	}
	hostStr, portStr, err := net.SplitHostPort(c.Dashboard.Listen)
	if err != nil {
		return spec{}, fmt.Errorf("dashboard.listen %q: %w", c.Dashboard.Listen, err)
	}
	if hostStr != "" {
		return spec{exact: c.Dashboard.Listen}, nil
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return spec{}, fmt.Errorf("dashboard.listen %q: %w", c.Dashboard.Listen, err)
	}
	s := spec{port: port}
	if c.HostPort != nil {
		s.host = c.HostPort.Interface
	}
	for _, p := range c.Ports {
		s.data = append(s.data, p.Interface) // disabled ones too: they are data ports
	}
	return s, nil
}

// ifaceAddrs is one interface's addresses.
type ifaceAddrs struct {
	name  string
	addrs []netip.Addr
}

// addresses returns the listen addresses ("ip:port") spec asks for, given
// the system's interfaces.
func (s spec) addresses(ifs []ifaceAddrs) []string {
	if s.exact != "" {
		return []string{s.exact}
	}
	var out []string
	for _, i := range ifs {
		if slices.Contains(s.data, i.name) {
			continue
		}
		for _, a := range i.addrs {
			if i.name != s.host && !a.IsLoopback() && !a.IsPrivate() && !a.IsLinkLocalUnicast() {
				continue
			}
			if a.IsLinkLocalUnicast() && a.Is6() {
				a = a.WithZone(i.name)
			}
			out = append(out, netip.AddrPortFrom(a, uint16(s.port)).String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// systemAddrs lists the interfaces' addresses.
func systemAddrs() ([]ifaceAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []ifaceAddrs
	for _, i := range ifs {
		as, err := i.Addrs()
		if err != nil {
			continue
		}
		ia := ifaceAddrs{name: i.Name}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					ia.addrs = append(ia.addrs, ip.Unmap())
				}
			}
		}
		out = append(out, ia)
	}
	return out, nil
}

// Listener is the dashboard's listener: a net.Listener that accepts on
// every address its spec gives and follows the system's address changes
// (DHCP on the management port, a new host port address).
type Listener struct {
	log   *slog.Logger
	flag  string // the -listen flag
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	spec spec
	lns  map[string]net.Listener // by listen address
}

// New returns a listener that listens nowhere until Configure. listen is
// the -listen flag: an exact address, or "" for the config's
// dashboard.listen.
func New(log *slog.Logger, listen string) *Listener {
	return &Listener{log: log, flag: listen, conns: make(chan net.Conn), done: make(chan struct{}), lns: map[string]net.Listener{}}
}

// Configure listens where the -listen flag, else the runtime config c,
// says; it fails when c's dashboard.listen is not an address, or when it
// listens nowhere.
func (m *Listener) Configure(c *config.Config) error {
	s, err := specFor(m.flag, c)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.spec = s
	m.mu.Unlock()
	return m.reconcile()
}

// reconcile opens the listeners the spec now asks for and closes the
// others.
func (m *Listener) reconcile() error {
	ifs, err := systemAddrs()
	if err != nil {
		return fmt.Errorf("dashboard: list addresses: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return net.ErrClosed
	default:
	}
	want := m.spec.addresses(ifs)
	var errs []error
	opened := 0
	for _, addr := range want {
		if _, ok := m.lns[addr]; ok {
			opened++
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opened++
		m.lns[addr] = ln
		m.log.Info("dashboard listening", "addr", addr)
		go m.accept(ln)
	}
	if opened == 0 {
		// Keep listening where it did: a change that leaves the
		// dashboard nowhere must not cut the owner off.
		return fmt.Errorf("dashboard: nowhere to listen (%v): %w", want, errors.Join(errs...))
	}
	for addr, ln := range m.lns {
		if !slices.Contains(want, addr) {
			ln.Close()
			delete(m.lns, addr)
			m.log.Info("dashboard stopped listening", "addr", addr)
		}
	}
	for _, err := range errs {
		m.log.Warn("dashboard: not listening", "err", err)
	}
	return nil
}

func (m *Listener) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by reconcile or Close
		}
		select {
		case m.conns <- c:
		case <-m.done:
			c.Close()
			return
		}
	}
}

// Watch follows the system's address changes until ctx ends.
func (m *Listener) Watch(ctx context.Context) {
	updates := make(chan netlink.AddrUpdate, 16)
	stop := make(chan struct{})
	defer close(stop)
	if err := netlink.AddrSubscribe(updates, stop); err != nil {
		m.log.Warn("dashboard: no address updates; re-checking every 10 s", "err", err)
		updates = nil
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-updates:
		case <-tick.C:
		}
		if err := m.reconcile(); err != nil && !errors.Is(err, net.ErrClosed) {
			m.log.Warn("dashboard", "err", err)
		}
	}
}

// Accept implements net.Listener.
func (m *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (m *Listener) Close() error {
	m.once.Do(func() {
		close(m.done)
		m.mu.Lock()
		defer m.mu.Unlock()
		for addr, ln := range m.lns {
			ln.Close()
			delete(m.lns, addr)
		}
	})
	return nil
}

// Addr implements net.Listener: the first address listened on.
func (m *Listener) Addr() net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.lns) == 0 {
		return &net.TCPAddr{}
	}
	return m.lns[slices.Min(slices.Collect(maps.Keys(m.lns)))].Addr()
}
