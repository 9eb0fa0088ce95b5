// Package dataplane is e1kbox's userspace bridge and NAT router engine: per-ring workers that forward frames between AF_PACKET ports and a TAP host port.
//
// An Engine (New, Start, Apply, Close) runs one worker goroutine per RX
// ring, pinned to the CPU the tuning plan gives its port, plus one for the
// host port. Per batch (one TPACKET_V3 block) a worker loads the
// configuration snapshot once, parses each frame (package frame), learns
// and looks up the FDB (package bridge) or hands it to the router (package
// nat, NAT mode), asks the rule table (package rules) once per output
// copy, copies it into the output port's TX path, and flushes each TX
// path once. Every TX path has exactly one owner; the per-frame path
// allocates nothing and takes no lock.
//
// Established flows can leave the rings for the in-kernel fast path
// (package fastpath): the workers offer them to its flow manager
// (package offload), which installs them, carries what the kernel
// forwarded back into the tables and the counters, and evicts them when
// the slow path must see their frames again (fastpath_linux.go wires it).
//
// Config is plain typed values: the appliance validates a user's config
// (package appliance/config) and derives it; Check holds only the
// engine's invariants. Apply swaps settings between batches and restarts
// the ports it is told to; anything New opened once (ErrRestartRequired)
// needs a new engine.
//
// docs/dataplane.md describes the worker model, TX ownership, bridging,
// rules, NAT mode and FDB concurrency in full, with the measurements
// behind the constants.
package dataplane
