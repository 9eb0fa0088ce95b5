// Package routing holds what the IPv4 router (nat) and the IPv6 router (route6) share: a frame's Result and its Action, their counters, and the queue of neighbour probes the fast path asks for.
package routing

import "strconv"

// Action says what the engine must do with a frame after a router's
// Process.
type Action uint8

// The actions. See package nat's documentation for the engine's duties.
const (
	// Drop: discard the frame; Result.Reason says why.
	Drop Action = iota
	// Forward: transmit Result.Frame (the received frame, rewritten in
	// place) on port Result.Port.
	Forward
	// Reply: transmit Result.Frame (a frame the worker generated into its
	// scratch buffer, valid until its next call) on port Result.Port. The
	// received frame is consumed.
	Reply
	// Queued: the frame was copied into the worker's queue of frames
	// waiting for their next hop's resolution (ARP, NDP); nothing to
	// transmit now.
	Queued
	// Consumed: the frame was handled (an ARP reply or NA learnt, a frame
	// split into fragments in the outbox); nothing to transmit but the
	// worker's output.
	Consumed
	// ToHost: the frame is for the box itself and the dataplane does not
	// answer it (TCP/UDP to the box's addresses, broadcasts, the WAN
	// clients' DHCP and RAs); deliver it to the host port, or drop it
	// without one.
	ToHost
	// Deliver: the frame is for the box's own stack behind the host port
	// (the routers' Config.Host). Transmit Result.Frame (the received
	// frame, unchanged) on port Result.Port, the host port.
	Deliver
	// NumActions is the number of actions: the length of the counters'
	// arrays by Action.
	NumActions
)

var actionNames = [NumActions]string{"drop", "forward", "reply", "queued", "consumed", "to_host", "deliver"}

// String returns a snake_case name usable as a metrics label.
func (a Action) String() string {
	if a < NumActions {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Result is what a router's Process decided for one frame; R is the
// router's drop reason.
type Result[R ~uint8] struct {
	Action Action
	// Port is the port to transmit on (Forward, Reply, Deliver) or the
	// port the frame came from (ToHost).
	Port int
	// Frame is the frame to transmit for Forward (a prefix of the
	// received bytes) and Reply (valid until the worker's next call), and
	// the received frame for ToHost and Deliver.
	Frame []byte
	// Reason says why the frame was dropped (Drop), or which error
	// answered it where the router counts those too.
	Reason R
}
