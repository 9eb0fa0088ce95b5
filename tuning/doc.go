// Package tuning applies NIC and kernel knobs from a Plan, reads them back
// and reports each one.
//
// A Tuner takes a Plan and returns one Report per knob: the value before,
// the wanted value, the value read back afterwards, and a status (ok,
// changed, unavailable, error; Read also reports differs). Applying is
// idempotent: a second Apply reports ok, "already set". A knob that does
// not exist for a NIC or kernel (veth, virtio, a kernel without bridge
// netfilter) is unavailable, never an error. Every path is taken below
// Tuner.Root and every ethtool call goes through the Ethtool interface, so
// the unit tests run against a fake /proc and /sys tree and a fake ethtool
// that follows e1000e's rules.
//
// # Knobs
//
// Global:
//
//   - copybreak: /sys/module/e1000e/parameters/copybreak (uint, bytes;
//     default 256). The only writable e1000e module parameter. It is
//     global for every e1000e port and the driver reads it for every
//     received frame, so a write acts on the next frame. Boot-time
//     alternative: e1000e.copybreak=N on the kernel command line.
//   - bridge-nf-call-iptables, -ip6tables, -arptables: /proc/sys/net/bridge,
//     set to 0. The target kernel has no CONFIG_BRIDGE_NETFILTER, so the
//     directory does not exist; the knobs then report unavailable with
//     "kernel has no bridge netfilter; bridged traffic bypasses netfilter
//     (effectively off)" (or "br_netfilter is not loaded" when
//     /proc/config.gz says it is a module or built in).
//
// Per port (ethtool ioctls through Ethtool; the rest sysfs/procfs):
//
//   - itr: ethtool rx-usecs with e1000e's meaning: 0 off, 1 dynamic,
//     3 dynamic-conservative (default), 4 simplified (2000..8000 ints/s),
//     10..10000 µs = 1e6/rx-usecs interrupts/s. rx-usecs 2, 5..9 and above
//     10000 are EINVAL, so a rate must be 100..100000 ints/s. The driver
//     keeps the rate as itr & ~3 and reads back 1e6/itr; ITR.RxUsecs
//     returns that read-back value so that Apply stays idempotent. Live.
//     e1000e only.
//   - rings: ethtool ring rx/tx, 64..4096, rounded up to a multiple of 8
//     (the report shows the rounded value). Both sizes go in one call.
//     Resets the link. e1000e only.
//   - offloads: netdev features by their real names (rx-gro,
//     tx-generic-segmentation, tx-tcp-segmentation, tx-tcp6-segmentation,
//     rx-lro, ...), not ethtool's aliases (gro, tso, scatter-gather:
//     Validate rejects those and names the real one). A data port wants
//     GRO, LRO, GSO and TSO off (DataPortOffloads; TSO is the whole
//     tx-tcp*-segmentation family, including tx-tcp-accecn-segmentation,
//     new in Linux 6.18, which stays on when only tx-tcp-segmentation goes
//     off), or the AF_PACKET ring sees merged super-frames. A name that is
//     not in the running kernel's feature set reports unavailable. The kernel adjusts dependent features
//     silently: tx-checksum-ip-generic off also turns TSO off, and TSO and
//     GSO need tx-scatter-gather. Features turned off are applied
//     segmentation first, features turned on checksums first; a report
//     names every feature the kernel changed on the side, and after all
//     steps every offload is read again. rx-checksum, rx-hashing,
//     rx-vlan-hw-parse, rx-fcs and rx-all reset the link on e1000e; the
//     others are live.
//   - irq-affinity: /proc/irq/N/smp_affinity_list for each vector
//     (<if>-rx-0, <if>-tx-0, <if> for link/other). N is looked up by
//     name at every apply, in /proc/interrupts, else among
//     /sys/class/net/<if>/device/msi_irqs by the action directory
//     /proc/irq/N/<name>, because IRQ numbers follow probe order. The
//     report shows smp_affinity_list and effective_affinity_list; the
//     effective CPU moves only at the vector's next interrupt, so for a
//     rarely firing vector (the link vector) the report says it has not
//     moved yet. Virtual devices have no IRQs: unavailable.
//   - rps-cpus: /sys/class/net/<if>/queues/rx-N/rps_cpus (hex mask; the
//     plan uses a CPU list or "off"). Live.
//   - threaded-napi: /sys/class/net/<if>/threaded. A device without a NAPI
//     instance refuses it with EOPNOTSUPP (veth without GRO or XDP):
//     unavailable.
//   - the quiet-port sysctls, on data ports only (PortPlan.Data). The
//     kernel still sees every frame of a data port (AF_PACKET is a tap),
//     so it must neither forward nor answer:
//     net.ipv4.conf.<if>.forwarding=0: IPv4 forwarding is decided by the
//     input device, so this stops kernel forwarding of frames arriving on
//     the port, and ip_error does not send ICMP for them. Writing
//     net.ipv4.ip_forward or conf.all.forwarding resets every interface,
//     which Read then shows as differs.
//     net.ipv6.conf.<if>.forwarding=0 and accept_ra=0: no router
//     behaviour and no SLAAC from the data side (IPv6 forwarding itself is
//     global).
//     arp_ignore=8: never answer ARP on the port, not even for the box's
//     addresses on other interfaces (Linux's weak host model would).
//     arp_announce=2: should the kernel send ARP there, use the best local
//     source address.
//     rp_filter=1 (strict): a packet for the box arriving on the port is
//     dropped unless the route back to its source leaves through the port,
//     which is never the case on a port without addresses or routes.
//     disable_ipv6=1: no IPv6 on the port at all, no link-local address,
//     no neighbour discovery. arp_ignore and disable_ipv6 are refused
//     (error) while the port has a kernel address of that family (IPv6
//     link-local excepted); a data port must have none (the box's own
//     address on a data side belongs on a host port).
//
// # Order and link resets
//
// Apply runs the global knobs, then per port the knobs that reset the
// NIC (rings, rx-checksum, rx-hashing, rx-vlan-hw-parse, rx-fcs, rx-all:
// carrier down, back after 1.8..2.8 s on the emulated e1000e), then waits
// (Tuner.CarrierTimeout, 5 s) for /sys/class/net/<if>/carrier to read 1
// on every port whose link it reset and that had carrier before, and
// only then applies the live knobs. Changing a resetting knob drops
// traffic; apply them once at startup, before traffic.
//
// # CPU placement
//
// CPUPlan places the data ports' IRQ vectors and dataplane workers over
// the online CPUs: split (IRQ and worker on different CPUs), same,
// threaded (same plus threaded NAPI), auto (= DefaultPlacement, split: a
// worker that shares its CPU with the RX softirq is starved by it; see
// docs/dataplane.md), manual (nothing derived). The
// dataplane pins its workers with CPUPlan.WorkerCPU; Tuner.CPUPlan
// computes the same plan Apply uses. Split also names the kernel half as
// CPUPlan.Housekeeping, where the supervisor confines its other threads
// (dataplane.SetHousekeeping), so that their bursts of work (the fast
// path's harvest, the dashboard, the router services, the Go runtime)
// take no worker's CPU and, on the kernel half, yield to the RX softirq.
//
// # Boot-time ITR
//
// e1000e's InterruptThrottleRate module parameter has no sysfs file; it
// is read once at probe. The boot-time alternative to the itr knob is a
// kernel argument in config.json's KernelExtraArgs:
// e1000e.InterruptThrottleRate=10000,0,4 gives one value per board in
// probe order, in interrupts/s (0 off, 1 dynamic, 3 dynamic-conservative,
// 4 simplified, 100..100000). The itr knob overrides it at runtime.
//
// # Hardware Unit Hang
//
// Tuner.WatchHangs reads the kernel log (OpenKmsg: /dev/kmsg,
// non-blocking, from now on) and on e1000e's "Detected Hardware Unit
// Hang" for a port turns its segmentation offloads off
// (tx-tcp-segmentation, tx-tcp6-segmentation, tx-generic-segmentation:
// ethtool's "tso off gso off"), the known mitigation, and emits reports.
package tuning
