package dataplane

import (
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// linkResync is how often the monitor reads every port's link state
// without a notification: the safety net for one lost to a full socket
// buffer. Between resyncs the link notifications carry the changes.
var linkResync = 5 * time.Second

// linkWatch receives the link notifications (RTNLGRP_LINK) of the
// engine's network namespace, so that the monitor reads the ports' link
// state when it changes instead of asking the kernel four times a second
// (12 netlink requests a second for three ports were a quarter of the
// appliance's Go CPU profile: docs/dataplane.md, Measured).
type linkWatch struct {
	ns   netns.NsHandle // the namespace New ran in
	ch   chan netlink.LinkUpdate
	done chan struct{}
}

// watchLinks subscribes to the link notifications of the calling
// thread's network namespace.
func watchLinks() (*linkWatch, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("dataplane: network namespace: %w", err)
	}
	w := &linkWatch{ns: ns}
	if err := w.subscribe(); err != nil {
		ns.Close()
		return nil, err
	}
	return w, nil
}

// subscribe opens a notification socket in the watch's namespace (from
// any thread).
func (w *linkWatch) subscribe() error {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	// An error ends the library's reader and closes ch: the monitor
	// then polls until it subscribes again.
	err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{Namespace: &w.ns, ErrorCallback: func(error) {}})
	if err != nil {
		return fmt.Errorf("dataplane: link notifications: %w", err)
	}
	w.ch, w.done = ch, done
	return nil
}

// unsubscribe closes the notification socket. The library's reader may be
// blocked handing over an update: it is drained until it ends.
func (w *linkWatch) unsubscribe() {
	if w.done == nil {
		return
	}
	close(w.done)
	go func(ch chan netlink.LinkUpdate) {
		for range ch {
		}
	}(w.ch)
	w.ch, w.done = nil, nil
}

// close ends the subscription and releases the namespace handle.
func (w *linkWatch) close() {
	if w == nil {
		return
	}
	w.unsubscribe()
	w.ns.Close()
}

// monitor follows the links (by notification, and by a full read every
// linkResync or at every tick while there is no subscription), polls the
// ports' loop state and sweeps the FDB until the engine stops.
func (e *Engine) monitor() {
	defer e.wg.Done()
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	lw := e.links
	var updates <-chan netlink.LinkUpdate
	if lw != nil {
		updates = lw.ch
	}
	lastSweep, lastLinks := time.Now(), time.Now()
	readAll := func() { e.pollLinks(); lastLinks = time.Now() }
	for tick := uint64(0); ; {
		select {
		case <-e.stop:
			return
		case u, ok := <-updates:
			if !ok {
				// The subscription failed (a full buffer): read
				// everything now and subscribe again at the next tick.
				e.log.Warn("dataplane: link notifications lost; polling the links")
				lw.unsubscribe()
				updates = nil
				readAll()
				continue
			}
			e.linkUpdate(&u)
			continue
		case <-e.relink:
			readAll()
			continue
		case <-t.C:
		}
		if lw != nil && updates == nil {
			if err := lw.subscribe(); err == nil {
				updates = lw.ch
			}
		}
		if updates == nil || time.Since(lastLinks) >= linkResync {
			readAll()
		}
		e.pollLoops(tick)
		if v6 := e.natp.v6; v6 != nil {
			v6.Maintain(time.Now().UnixNano()) // the WAN addresses' DAD and lifetimes
			if v6.Due() {
				e.wakeRouters() // a worker's Tick sends the probes
			}
		}
		if time.Since(lastSweep) >= sweepInterval {
			e.fdb.Sweep(e.Now())
			lastSweep = time.Now()
		}
		tick++
	}
}

// readLinks has the monitor read every port's link state now: a
// restarted port's new portInfo copied the old one's state, and a
// notification that came between the copy and the new topology went to
// the old one (an MTU change bounces an e1000e's link).
func (e *Engine) readLinks() {
	select {
	case e.relink <- struct{}{}:
	default: // a read is pending already
	}
}

// linkUpdate takes the link state of a port from a notification about its
// interface.
func (e *Engine) linkUpdate(u *netlink.LinkUpdate) {
	name := u.Link.Attrs().Name
	for _, p := range e.topo.Load().ports[1:] {
		if p.iface != name {
			continue
		}
		up := u.Header.Type != unix.RTM_DELLINK && u.IfInfomsg.Flags&unix.IFF_UP != 0 && u.IfInfomsg.Flags&unix.IFF_LOWER_UP != 0
		e.setLink(p, up)
	}
}

// pollLinks reads each port's link state: administratively up with a
// carrier (IFF_UP and IFF_LOWER_UP).
func (e *Engine) pollLinks() {
	for _, p := range e.topo.Load().ports[1:] {
		up := false
		if link, err := e.b.nl.LinkByName(p.iface); err == nil {
			a := link.Attrs()
			up = a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
		}
		e.setLink(p, up)
	}
}

// setLink records a port's link state. A port that goes down loses its
// learned FDB entries and its fast path flows.
func (e *Engine) setLink(p *portInfo, up bool) {
	if was := p.up.Swap(up); was != up {
		e.log.Info("dataplane link", "port", p.name, "interface", p.iface, "up", up)
		if !up {
			e.fdb.Flush(p.id, false)
			e.fp.PortDown(p.id)
		}
	}
}

// wakeProbers wakes the workers that send their ports' loop probes (the
// first of each port's), for a new probe round.
func (e *Engine) wakeProbers() {
	for _, w := range e.topo.Load().workers {
		if w.fwd.prober && w.port.up.Load() {
			w.wake()
		}
	}
}

// wakeRouters wakes the workers whose Tick runs the router's housekeeping
// (NAT mode).
func (e *Engine) wakeRouters() {
	for _, w := range e.topo.Load().workers {
		if w.fwd.nw != nil {
			w.wake()
		}
	}
}
