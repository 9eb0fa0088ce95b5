package nat

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/routing"
	"e1kbox/rules"
)

// attachIPv6 gives the worker its route6 worker when the router routes
// IPv6.
func (w *Worker) attachIPv6(rw *rules.Worker) {
	if v6 := w.r.conf.IPv6; v6 != nil {
		w.v6 = v6.NewWorker(rw)
	}
}

// ipv6 hands an IPv6 frame to route6, or drops it by policy without one.
// route6's drops count here as ReasonIPv6; its Stats say why.
func (w *Worker) ipv6(now int64, inPort int, pkt []byte, f *frame.Frame) Result {
	if w.v6 == nil {
		return drop(ReasonIPv6)
	}
	r := w.v6.Process(now, inPort, pkt, f)
	if r.Action == routing.Drop {
		return drop(ReasonIPv6)
	}
	return Result{Action: r.Action, Port: r.Port, Frame: r.Frame}
}
