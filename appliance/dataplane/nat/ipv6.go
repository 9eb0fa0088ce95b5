package nat

import (
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/route6"
	"e1kbox/rules"
)

// attachIPv6 gives the worker its route6 worker when the router routes
// IPv6.
func (w *Worker) attachIPv6(rw *rules.Worker) {
	if v6 := w.r.conf.IPv6; v6 != nil {
		w.v6 = v6.NewWorker(rw)
	}
}

// v6Actions maps route6's actions onto nat's (the same duties).
var v6Actions = [...]Action{
	route6.Drop: Drop, route6.Forward: Forward, route6.Reply: Reply, route6.Queued: Queued,
	route6.Consumed: Consumed, route6.ToHost: ToHost, route6.Deliver: Deliver,
}

// ipv6 hands an IPv6 frame to route6, or drops it by policy without one.
// route6's drops count here as ReasonIPv6; its Stats say why.
func (w *Worker) ipv6(now int64, inPort int, pkt []byte, f *frame.Frame) Result {
	if w.v6 == nil {
		return drop(ReasonIPv6)
	}
	r := w.v6.Process(now, inPort, pkt, f)
	if r.Action == route6.Drop {
		return drop(ReasonIPv6)
	}
	return Result{Action: v6Actions[r.Action], Port: r.Port, Frame: r.Frame}
}
