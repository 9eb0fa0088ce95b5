package dataplane

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// monitor polls the links and the ports' loop state and sweeps the FDB
// until the engine stops.
func (e *Engine) monitor() {
	defer e.wg.Done()
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	lastSweep := time.Now()
	for tick := uint64(0); ; tick++ {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		e.pollLinks()
		e.pollLoops(tick)
		if v6 := e.natp.v6; v6 != nil {
			v6.Maintain(time.Now().UnixNano()) // the WAN addresses' DAD and lifetimes
		}
		if time.Since(lastSweep) >= sweepInterval {
			e.fdb.Sweep(e.Now())
			lastSweep = time.Now()
		}
	}
}

// pollLinks updates each port's link state: administratively up with a
// carrier (IFF_UP and IFF_LOWER_UP). A port that goes down loses its
// learned FDB entries.
func (e *Engine) pollLinks() {
	for _, p := range e.topo.Load().ports[1:] {
		up := false
		if link, err := e.b.nl.LinkByName(p.iface); err == nil {
			a := link.Attrs()
			up = a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
		}
		if was := p.up.Swap(up); was != up {
			e.log.Info("dataplane link", "port", p.name, "interface", p.iface, "up", up)
			if !up {
				e.fdb.Flush(p.id, false)
				e.fp.portDown(p.id)
			}
		}
	}
}
