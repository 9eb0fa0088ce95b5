// Package router runs the box's router services (WAN DHCP and DHCPv6 clients, LAN DHCP server, DNS forwarder, RAs, NTP client, Internet probe) as the config says, and reports their leases through callbacks.
package router

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcpd"
	"e1kbox/appliance/services/dnsd"
	"e1kbox/appliance/services/pppoe"
	"e1kbox/appliance/services/timesync"
	"e1kbox/appliance/services/wanclient"
)

// Options are a router's state directory, the box's hostname and where
// it reports what the services learn. The callbacks run under the
// router's lock (a lease never overtakes the nil of a stopped client):
// they must not call the router.
type Options struct {
	Log      *slog.Logger
	State    string // directory of the lease files and the SLAAC secret
	Hostname string
	// OnLease takes the WAN DHCP client's lease (nil: none).
	OnLease func(*wanclient.Lease)
	// OnPrefixes takes what a delegation gives the IPv6 router: the
	// routed LAN /64s (the current one first), the delegated prefixes and
	// the box's own LAN addresses (nil: nothing is routed).
	OnPrefixes func(lan, delegated []netip.Prefix, box []BoxAddr)
	// OnWAN6 takes the box's IPv6 WAN addressing.
	OnWAN6 func(WANAddressing)
	// LANPort and LANActivity answer the LAN DHCP server's questions
	// about devices from the dataplane: the port a MAC is on, and when a
	// device's address last had traffic through the box (see
	// dhcpd.Config's PortOf and Activity; nil: one port, and every lease
	// counts as used). The server calls them with its lock held: they
	// must not wait for the router or the plane.
	LANPort     func(net.HardwareAddr) string
	LANActivity func(netip.Addr, net.HardwareAddr) time.Time
	// PPPoELink returns the dataplane's PPPoE endpoint on the WAN port,
	// which the PPPoE client of nat.wan.pppoe runs on; OnPPPoE takes the
	// client's state (nil: the WAN is no PPPoE link; a status not up: no
	// session) for the dataplane (pppoe.go).
	PPPoELink func() (PPPoELink, error)
	OnPPPoE   func(*pppoe.Status)
}

// Router runs the box's services next to the dataplane: in NAT mode the
// WAN DHCP client (its lease becomes the router's WAN address, through
// OnLease), the LAN DHCP server and the DNS forwarder, all on the box's
// own stack behind the host port, which has the router's LAN address; in
// either mode the NTP client. Apply follows the runtime config, the lease
// loop the WAN lease; each service is started, updated live, or restarted
// when what it is bound to changes.
type Router struct {
	log  *slog.Logger
	opts Options

	mu    sync.Mutex
	cfg   *config.Config
	lease *wanclient.Lease // the WAN lease in force, nil without
	wan   leaseClient[*wanclient.Client, *wanclient.Lease]
	pppoe *pppoe.Status // the PPPoE client's last status, nil without
	ppp   leaseClient[*pppoe.Client, *pppoeState]
	dhcp  running[*dhcpd.Server]
	dns   running[*dnsd.Server]
	ntp   running[*timesync.Client]
	probe running[*Probe]
	v6    ipv6Services

	// names is the DHCP server the DNS forwarder takes local names from.
	names atomic.Pointer[dhcpd.Server]
	// live is what runs, for the dashboard (publish).
	live atomic.Pointer[Live]
	quit chan struct{}
	done chan struct{}
	once sync.Once // Close
}

// New returns a router that runs nothing until Apply; its lease loop runs
// until Close.
func New(o Options) *Router {
	r := &Router{log: o.Log, opts: o, quit: make(chan struct{}), done: make(chan struct{})}
	r.wan.slot.wake = make(chan struct{}, 1)
	r.ppp.slot.wake = make(chan struct{}, 1)
	r.v6.client.slot.wake = make(chan struct{}, 1)
	go r.leaseLoop()
	return r
}

// leaseLoop applies the WAN clients' leases as they come, and the
// DHCPv6 client's renewed lifetimes every v6Refresh, until Close.
func (r *Router) leaseLoop() {
	defer close(r.done)
	tick := time.NewTicker(v6Refresh)
	defer tick.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-tick.C:
			r.refreshIPv6()
		case <-r.wan.slot.wake:
			if gen, l, ok := r.wan.slot.take(); ok {
				r.leaseChanged(gen, l)
			}
		case <-r.ppp.slot.wake:
			if gen, st, ok := r.ppp.slot.take(); ok {
				r.pppoeChanged(gen, st)
			}
		case <-r.v6.client.slot.wake:
			if gen, l, ok := r.v6.client.slot.take(); ok {
				r.lease6Changed(gen, l)
			}
		}
	}
}

// Apply runs the services cfg asks for. A service that cannot start is
// logged and left off; the config stays applied (its values were
// validated; what fails is the machine: a missing interface, say).
func (r *Router) Apply(cfg *config.Config) error {
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
	if cfg.IsPPPoE() {
		errs = append(errs, r.applyPPPoE())
	} else {
		r.stopPPPoE(true)
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
func (r *Router) applyProbe(nat bool) {
	host := r.cfg.Dashboard.InternetProbe
	if r.probe.on && (!nat || r.probe.s.host != host) {
		r.probe.stop()
	}
	if nat && host != "" && !r.probe.on {
		p := NewProbe(host)
		r.probe.start(p, p.Run, r.log, "internet probe")
	}
}

// Close stops every service; the WAN lease stays on file for the next
// start (INIT-REBOOT).
func (r *Router) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.wan.stop()
		r.ppp.stop()
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
func (r *Router) lanAddr() netip.Prefix {
	if r.cfg.Mode != config.ModeNAT {
		return netip.Prefix{}
	}
	return r.cfg.RouterLAN()
}

// applyWAN starts the WAN DHCP client, or restarts it when the WAN port's
// interface, MAC or VLAN or nat.wan.dhcp changed.
func (r *Router) applyWAN() error {
	p, mac, err := r.wanPort()
	if err != nil {
		r.stopWAN()
		return err
	}
	vlan := wanVLAN(r.cfg)
	cfg, opts := r.wanClientConfig(p.Interface, mac)
	cfg.VLAN = vlan
	at := wanAt(p, mac, vlan) + " " + opts
	if r.wan.on && r.wan.at == at {
		return nil
	}
	r.stopWAN()
	c, err := wanclient.New(cfg, r.log.With("service", "wan-dhcp"))
	if err != nil {
		return err
	}
	r.wan.begin(c, at, c.Run, r.log, "wan-dhcp")
	return nil
}

// wanPort is the WAN port, which the WAN clients are bound to, and its
// interface's MAC.
func (r *Router) wanPort() (*config.Port, net.HardwareAddr, error) {
	p := r.cfg.WANPort()
	l, err := netlink.LinkByName(p.Interface)
	if err != nil {
		return p, nil, err
	}
	return p, slices.Clone(l.Attrs().HardwareAddr), nil
}

// stopWAN stops the WAN client; the router forgets its lease.
func (r *Router) stopWAN() {
	if r.wan.end() && r.lease != nil {
		r.lease = nil
		r.opts.OnLease(nil)
	}
}

// leaseChanged takes a new WAN lease (nil: none) of WAN client run gen:
// the plane gets the address, the DNS forwarder and the NTP client their
// servers. A lease of a client that was stopped since is dropped.
func (r *Router) leaseChanged(gen uint64, l *wanclient.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.wan.gen {
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
	// client.
	r.opts.OnLease(l)
}

// WaitClock returns once the NTP client has set the box's clock, or with
// ctx's error. What needs a correct clock waits here (see
// system.BootLog).
func (r *Router) WaitClock(ctx context.Context) error {
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
