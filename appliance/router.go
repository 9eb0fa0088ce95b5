package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/dnsd"
	"e1kbox/appliance/services/timesync"
	"e1kbox/appliance/services/wanclient"
)

// router runs the box's services next to the dataplane: in NAT mode the
// WAN DHCP client (its lease becomes the router's WAN address, through
// onLease), the LAN DHCP server and the DNS forwarder, all on the box's
// own stack behind the host port, which has the router's LAN address; in
// either mode the NTP client. Apply follows the runtime config, onLease
// the WAN lease; each service is started, updated live, or restarted when
// what it is bound to changes. Lock order: router.mu before plane.mu.
type router struct {
	log      *slog.Logger
	state    string // directory of the lease files
	hostname string
	onLease  func(*wanclient.Lease) // the plane's: the WAN lease changed

	mu     sync.Mutex
	cfg    *config.Config
	lease  *wanclient.Lease // the WAN lease in force, nil without
	wan    running[*wanclient.Client]
	wanAt  string // what the client is bound to: interface and MAC
	wanGen uint64 // counts WAN client starts: a stopped client's leases are stale
	dhcp   running[*dhcpd.Server]
	dns    running[*dnsd.Server]
	ntp    running[*timesync.Client]
	probe  running[*internetProbe]
	v6     ipv6Services

	// leases hands the WAN client's leases to the lease loop without
	// waiting for mu (Apply may hold it while it stops the client).
	leases leaseSlot[*wanclient.Lease]
	// names is the DHCP server the DNS forwarder takes local names from.
	names atomic.Pointer[dhcpd.Server]
	// live is what runs, for the dashboard (publish).
	live atomic.Pointer[routerLive]
	quit chan struct{}
	done chan struct{}
	once sync.Once // Close
}

// leaseSlot is the latest lease of a client run (the WAN DHCPv4 or
// DHCPv6 client's), for a lease loop that takes it without waiting for
// the router's lock.
type leaseSlot[L interface{ Clone() L }] struct {
	mu   sync.Mutex
	l    L
	gen  uint64
	set  bool
	wake chan struct{}
}

func (s *leaseSlot[L]) put(gen uint64, l L) {
	s.mu.Lock()
	s.l, s.gen, s.set = l.Clone(), gen, true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *leaseSlot[L]) take() (gen uint64, l L, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, gen, ok = s.l, s.gen, s.set
	var zero L
	s.l, s.set = zero, false
	return gen, l, ok
}

// running is a service and the cancel of its goroutine.
type running[S any] struct {
	s      S
	cancel context.CancelFunc
	done   chan struct{}
	on     bool
}

// serviceRetry is how long a service whose serve returned waits before it
// runs again (its interface may be missing while the dataplane restarts).
var serviceRetry = 5 * time.Second

// start runs serve(ctx) on a goroutine of its own, again after
// serviceRetry whenever it returns before stop.
func (r *running[S]) start(s S, serve func(context.Context) error, log *slog.Logger, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	r.s, r.cancel, r.done, r.on = s, cancel, make(chan struct{}), true
	go func() {
		defer close(r.done)
		for {
			err := serve(ctx)
			if ctx.Err() != nil {
				return
			}
			log.Error("service stopped; starting it again", "service", name, "err", err, "in", serviceRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(serviceRetry):
			}
		}
	}()
}

// stop ends the service and waits for its goroutine.
func (r *running[S]) stop() {
	if !r.on {
		return
	}
	r.cancel()
	<-r.done
	var zero S
	r.s, r.on = zero, false
}

func newRouter(log *slog.Logger, state, hostname string, onLease func(*wanclient.Lease)) *router {
	r := &router{log: log, state: state, hostname: hostname, onLease: onLease,
		leases: leaseSlot[*wanclient.Lease]{wake: make(chan struct{}, 1)}, quit: make(chan struct{}), done: make(chan struct{})}
	r.v6.slot.wake = make(chan struct{}, 1)
	go r.leaseLoop()
	go r.v6Loop()
	return r
}

// leaseLoop applies the WAN client's leases as they come.
func (r *router) leaseLoop() {
	defer close(r.done)
	for {
		select {
		case <-r.quit:
			return
		case <-r.leases.wake:
		}
		if gen, l, ok := r.leases.take(); ok {
			r.leaseChanged(gen, l)
		}
	}
}

// Apply runs the services cfg asks for. A service that cannot start is
// logged and left off; the config stays applied (its values were
// validated; what fails is the machine: a missing interface, say).
func (r *router) Apply(cfg *config.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg = cfg
	nat := cfg.Mode == config.ModeNAT
	errs := []error{r.applyTime()}
	if nat && cfg.NAT.WANDHCP {
		errs = append(errs, r.applyWAN())
	} else {
		r.stopWAN()
	}
	if nat && cfg.DHCP.IsEnabled() {
		errs = append(errs, r.applyDHCP())
	} else {
		r.names.Store(nil)
		r.dhcp.stop()
	}
	if nat && cfg.DNS.IsEnabled() {
		errs = append(errs, r.applyDNS())
	} else {
		r.dns.stop()
	}
	if ipv6On(cfg) {
		errs = append(errs, r.applyIPv6())
	} else {
		r.stopIPv6()
	}
	r.applyProbe(nat)
	r.publish()
	return errors.Join(errs...)
}

// applyProbe runs the Internet probe of dashboard.internetProbe in NAT
// mode, restarted when its host changes.
func (r *router) applyProbe(nat bool) {
	host := r.cfg.Dashboard.InternetProbe
	if r.probe.on && (!nat || r.probe.s.host != host) {
		r.probe.stop()
	}
	if nat && host != "" && !r.probe.on {
		p := newInternetProbe(host)
		r.probe.start(p, p.run, r.log, "internet probe")
	}
}

// Close stops every service; the WAN lease stays on file for the next
// start (INIT-REBOOT).
func (r *router) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.wan.stop()
		r.dhcp.stop()
		r.names.Store(nil)
		r.dns.stop()
		r.ntp.stop()
		r.probe.stop()
		r.stopIPv6()
		r.publish()
		r.mu.Unlock()
		close(r.quit)
		<-r.done
	})
}

// lanAddr is the router's LAN address in NAT mode (the box's stack's).
func (r *router) lanAddr() netip.Prefix {
	if r.cfg.Mode != config.ModeNAT {
		return netip.Prefix{}
	}
	return r.cfg.RouterLAN()
}

// applyWAN starts the WAN DHCP client, or restarts it when the WAN port's
// interface or MAC changed.
func (r *router) applyWAN() error {
	p := r.cfg.WANPort()
	mac, err := interfaceMAC(p.Interface)
	if err != nil {
		r.stopWAN()
		return err
	}
	at := p.Interface + " " + mac.String()
	if r.wan.on && r.wanAt == at {
		return nil
	}
	r.stopWAN()
	c, err := wanclient.New(wanclient.Config{Interface: p.Interface, MAC: mac, Hostname: r.hostname,
		LeaseFile: filepath.Join(r.state, "wan-lease.json")}, r.log.With("service", "wan-dhcp"))
	if err != nil {
		return err
	}
	r.wanAt = at
	r.wanGen++
	gen := r.wanGen
	r.wan.start(c, func(ctx context.Context) error {
		return c.Run(ctx, func(_, l *wanclient.Lease) { r.leases.put(gen, l) })
	}, r.log, "wan-dhcp")
	return nil
}

// stopWAN stops the WAN client; the router forgets its lease.
func (r *router) stopWAN() {
	if !r.wan.on {
		return
	}
	r.wan.stop()
	r.wanAt = ""
	r.wanGen++
	if r.lease != nil {
		r.lease = nil
		r.onLease(nil)
	}
}

// leaseChanged takes a new WAN lease (nil: none) of WAN client run gen:
// the plane gets the address, the DNS forwarder and the NTP client their
// servers. A lease of a client that was stopped since is dropped.
func (r *router) leaseChanged(gen uint64, l *wanclient.Lease) {
	r.mu.Lock()
	if gen != r.wanGen {
		r.mu.Unlock()
		return
	}
	r.lease = l
	if l != nil {
		r.log.Info("WAN lease", "address", l.Addr, "gateway", l.Gateway, "dns", l.DNS, "mtu", l.MTU, "expiry", l.Expiry)
	} else {
		r.log.Warn("WAN lease gone")
	}
	var errs []error
	if r.cfg != nil {
		errs = append(errs, r.applyTime())
		if r.dns.on {
			errs = append(errs, r.applyDNS())
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.log.Warn("services after the WAN lease", "err", err)
	}
	// Under mu, so that a lease never overtakes the nil of a stopped
	// client (the plane never calls the router: no lock order to break).
	r.onLease(l)
	r.mu.Unlock()
}

// applyDHCP starts or updates the LAN DHCP server.
func (r *router) applyDHCP() error {
	cfg := r.dhcpConfig()
	if r.dhcp.on {
		return r.dhcp.s.Update(cfg)
	}
	s, err := dhcpd.New(cfg, r.log.With("service", "dhcp"))
	if err != nil {
		return err
	}
	r.dhcp.start(s, s.Serve, r.log, "dhcp")
	r.names.Store(s)
	return nil
}

func (r *router) dhcpConfig() dhcpd.Config {
	c, lan := r.cfg, r.lanAddr()
	d := dhcpd.Config{Interface: hostInterface(c), ServerIP: lan.Addr(), Subnet: lan.Masked(),
		PoolStart: c.DHCP.Range.First, PoolEnd: c.DHCP.Range.Last, LeaseTime: c.DHCP.LeaseTime.D(),
		Domain: c.DNS.Domain, LeaseFile: filepath.Join(r.state, "dhcp-leases.json")}
	if c.DNS.IsEnabled() {
		d.DNS = []netip.Addr{lan.Addr()}
	} else {
		d.DNS = r.upstreams()
	}
	for _, p := range c.LANPorts() {
		if p.MTU != 0 && (d.MTU == 0 || p.MTU < d.MTU) {
			d.MTU = p.MTU
		}
	}
	if c.HostPort != nil {
		for _, a := range c.HostPort.Addresses {
			if a.Addr().Is4() && lan.Contains(a.Addr()) {
				d.Exclude = append(d.Exclude, a.Addr())
			}
		}
	}
	for _, s := range c.DHCP.Static {
		d.Static = append(d.Static, dhcpd.Static{MAC: net.HardwareAddr(s.MAC[:]), IP: s.Address, Hostname: s.Hostname})
	}
	return d
}

// upstreams are the DNS servers the box asks: the config's, else the WAN
// lease's.
func (r *router) upstreams() []netip.Addr {
	if len(r.cfg.DNS.Upstreams) > 0 {
		return slices.Clone(r.cfg.DNS.Upstreams)
	}
	if r.lease != nil {
		return slices.Clone(r.lease.DNS)
	}
	return nil
}

// applyDNS starts or updates the DNS forwarder on the router's LAN
// address and the box's LAN IPv6 addresses (r.v6.box; dnsd rebinds live,
// keeping its cache).
func (r *router) applyDNS() error {
	lan := r.lanAddr()
	listen := []netip.AddrPort{netip.AddrPortFrom(lan.Addr(), 53)}
	for _, b := range r.v6.box {
		listen = append(listen, netip.AddrPortFrom(b.Prefix.Addr(), 53))
	}
	cfg := dnsd.Config{Listen: listen, Source: lan.Addr(),
		Domain: r.cfg.DNS.Domain, Hostname: r.hostname, Subnets: []netip.Prefix{lan.Masked()}, CacheSize: r.cfg.DNS.CacheSize,
		Local: dnsd.LocalFunc(r.localNames)}
	for _, a := range r.upstreams() {
		cfg.Upstreams = append(cfg.Upstreams, netip.AddrPortFrom(a, 53))
	}
	if r.dns.on {
		return r.dns.s.Update(cfg)
	}
	s, err := dnsd.New(cfg, r.log.With("service", "dns"))
	if err != nil {
		return err
	}
	r.dns.start(s, s.Serve, r.log, "dns")
	return nil
}

// localNames are the LAN's names for the DNS forwarder: the DHCP leases'
// and static leases'. It is called by the DNS server's goroutines.
func (r *router) localNames() []dnsd.Host {
	s := r.names.Load()
	if s == nil {
		return nil
	}
	names := s.Names()
	hosts := make([]dnsd.Host, 0, len(names))
	for _, n := range names {
		hosts = append(hosts, dnsd.Host{Name: n.Hostname, Addr: n.Addr})
	}
	return hosts
}

// applyTime starts or updates the NTP client: the WAN lease's servers
// (when time.fromDHCP) before the config's; in NAT mode it asks from the
// router's LAN address and resolves names through the box's own DNS
// forwarder (or the lease's servers).
func (r *router) applyTime() error {
	c := r.cfg
	cfg := timesync.Config{}
	if r.lease != nil && (c.Time.FromDHCP == nil || *c.Time.FromDHCP) {
		for _, a := range r.lease.NTP {
			cfg.Servers = append(cfg.Servers, a.String())
		}
	}
	cfg.Servers = append(cfg.Servers, c.Time.Servers...)
	if lan := r.lanAddr(); lan.IsValid() {
		cfg.Source = lan.Addr()
		dns := r.upstreams()
		if c.DNS.IsEnabled() {
			dns = []netip.Addr{lan.Addr()}
		}
		if len(dns) > 0 {
			cfg.Resolver = resolverVia(lan.Addr(), dns)
		}
	}
	if r.ntp.on {
		return r.ntp.s.Update(cfg)
	}
	t, err := timesync.New(cfg, r.log.With("service", "time"))
	if err != nil {
		return err
	}
	r.ntp.start(t, t.Run, r.log, "time")
	return nil
}

// WaitClock returns once the NTP client has set the box's clock, or with
// ctx's error. What needs a correct clock waits here (see bootLog).
func (r *router) WaitClock(ctx context.Context) error {
	for {
		r.mu.Lock()
		t, on := r.ntp.s, r.ntp.on
		r.mu.Unlock()
		if on {
			// Asked again every second: the client may be stopped or
			// replaced meanwhile.
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			err := t.Wait(wctx)
			cancel()
			if err == nil {
				return nil
			}
		} else {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// resolverVia resolves names by asking the DNS servers from src.
func resolverVia(src netip.Addr, servers []netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var errs []error
		for _, s := range servers {
			d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
			if network == "tcp" || network == "tcp4" || network == "tcp6" {
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
			c, err := d.DialContext(ctx, network, netip.AddrPortFrom(s, 53).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}}
}

// hostInterface is the host port's TAP device.
func hostInterface(c *config.Config) string {
	if c.HostPort != nil && c.HostPort.Interface != "" {
		return c.HostPort.Interface
	}
	return config.DefaultHostPortInterface
}

// interfaceMAC is the MAC of interface name.
func interfaceMAC(name string) (net.HardwareAddr, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(l.Attrs().HardwareAddr), nil
}
