// Package offload is the fast path's flow manager: it installs the established flows the dataplane's workers offer into the kernel program (package fastpath), carries what the kernel forwarded back into conntrack, route6, the FDB, the rules and the port counters, and evicts the flows the slow path must see again.
//
// One goroutine (Manager.Run) owns the flows and the program's maps: it
// installs the workers' offers and harvests the kernel's counters every
// HarvestInterval. The workers reach it through a Worker each: offers go
// through a queue that never blocks (a full queue drops the offer), and
// the rare events that cannot wait (a TCP SYN, FIN or RST of an
// offloaded connection, a station that moved) take the manager's lock.
// The engine tells it what changed (PortDown, PortsChanged, FDBFlushed,
// SwapRules, Revalidate) and reads it (Stats, PortCounts, Sync,
// SyncCounts).
//
// Four kinds of flows: one direction of a NAT connection
// (nat.Router.Offloadable), one direction of a routed IPv6 connection
// (route6.Router.Offloadable), a bridged unicast MAC pair whose rules give
// every frame one verdict, and a bridged TCP or UDP 5-tuple of a pair
// whose verdict depends on more (a microflow). The NAT and IPv6 flows
// share their checks (ports, next hop, idle time); so do the harvest's
// passes for all four.
//
// The package does not import the engine: what it needs of it comes as
// plain values (the routers, the FDB, the rules, the WAN port, the
// engine's clock origin) and a View of the ports and the configuration
// in force. docs/dataplane.md (Fast path) describes what is offloaded,
// what the kernel punts, and how the counters flow back.
package offload
