// Command bench measures e1kbox's userspace bridge against the kernel bridge and nftables in network namespaces.
//
// Topology (one set of namespaces per run, named e1kbench-<pid>-*):
//
//	gen ns                 box ns                      sink ns
//	g0 ───── veth ───── b0 [path under test] b1 ───── veth ───── s0  nft netdev ingress: counter drop
//	g1 ──────────────────────── veth (direct, no box) ─────────────── s1  (same counter)
//
// A generator (an AF_PACKET socket in this process sending sendmmsg
// batches, pinned to one CPU; -gen-ring sends from a mapped TX ring, whose
// frames carry a destructor that updates the ring on whichever CPU frees
// them — for a userspace forwarder, the box's) sends UDP/IPv4 frames
// from g0 to s0's MAC (g0 is a port of a bridge of the generator's own
// next to a VXLAN device, only so that its frames keep a NIC's 64 bytes
// of headroom: nicHeadroom); the sink namespace counts
// what arrives with an nftables netdev ingress counter and drops it. The
// paths under test are: the kernel bridge (br0), the kernel bridge with N
// linear non-matching nftables rules in a bridge-family forward chain,
// with one nftables set of N addresses, and the e1kbox appliance binary in
// bridge mode with 0 and N non-matching rules, once per CPU placement.
// The NAT paths route from b0 (LAN, generator 192.168.60.2) to b1 (WAN,
// the sink is the gateway) towards a server beyond it: the kernel with
// ip_forward and an nftables masquerade rule (bare and with N linear
// forward-chain rules), and the appliance in NAT mode (bare and with N
// rules); the generator addresses the router's LAN MAC (b0's), and the
// sink's counting chain lets ARP through so that the appliance resolves
// its gateway. Their ratios are against the kernel NAT. The "e1kbox
// bridge + 100 ws clients" paths (fast path on and off) keep 100
// authenticated WebSocket clients reading the dashboard's /api/stream;
// their ratios are against the same bridge whose dashboard runs with no
// clients.
// The IPv6 paths send UDP/IPv6 (frames of at least 66 B, the smallest
// such frame) from the LAN side to a server beyond the WAN next hop, the
// sink's link-local address: the kernel routing IPv6 (forwarding on, the
// neighbours static) with an nftables inet forward chain that accepts
// established and related packets, drops invalid ones, accepts new
// connections from the LAN to the WAN and drops the rest; and the
// appliance in NAT mode with a static ipv6.prefix and ipv6.gateway, bare
// (ratio against the kernel's IPv6 row) and with N non-matching ip6
// rules (ratio against itself bare). As on the NAT paths, the sink
// answers every flow once before the measurement, so both see them
// established; the sink's counting chain lets neighbour discovery
// through so that the appliance resolves its next hop.
// Every path is measured in the same sitting, repetitions interleaved,
// and the table shows medians with the ratio to the kernel bridge (or
// the path's own baseline, named in the cell).
//
// A second table gives the CPU cost per packet at a fixed offered rate:
// busy time of all CPUs from /proc/stat divided by the packets the sink
// received. Busy time is the wall time minus the idle time, which a NO_HZ
// kernel accounts exactly; the tick-sampled busy fields (user+nice+system+
// irq+softirq+steal) miss short bursts of work between idle periods and
// are shown for comparison only. The "direct" row (the generator straight
// into the sink) is the cost of the generator and the sink alone; the
// "box" column subtracts it.
//
// During every run the harness keeps its own floating threads (the Go
// runtime's sysmon, which wakes every 20 µs to 10 ms while the generator
// makes system calls, and idle threads) off the box's receive CPU, whose
// busy time is the box's CPU figure.
//
// The appliance runs with -tune=false so that the harness owns the veths'
// receive steering (RPS stands in for NIC IRQ affinity); -appliance-tune
// runs it with its tuning plan instead and restores the steering after.
//
// A veth has no interrupt, so something must stand in for the NIC's
// receive interrupt on the box's receive CPU. -rx rps (the default) steers
// b0 there with RPS: an IPI wakes that CPU each time its backlog ran
// empty, so a path that drains faster than the generator sends can be
// woken for every few frames (the "second wake mode" of
// docs/performance.md). -rx napi turns on b0's GRO and threaded NAPI
// instead, pins the NAPI kthread to the receive CPU at SCHED_FIFO (as
// softirq work preempts the threads there) and defers its
// wake-ups (napi_defer_hard_irqs 2, gro_flush_timeout 50 µs), as a NIC's
// interrupt throttling does; every row then also pays GRO and a kthread's
// context switches (docs/performance.md, "Standing in for a NIC's interrupt").
//
// Usage (root):
//
//	go run ./bench [-quick] [-sizes 64,512] [-rules 1000,10000] [-placements split,same]
//	               [-out results.md|results.json] [-profile DIR] [-wait-idle 2m] [-rx rps|napi]
//
// Frame sizes are Ethernet frame sizes including the 4-byte FCS, as in
// RFC 2544 (a "64 B" frame is 60 bytes on the veth).
package main
