// Package ispvm boots a PPPoE ISP for end-to-end tests in a QEMU VM (TCG) built at test time from Debian bookworm packages.
//
// This machine's kernel has no PPP and no 802.1Q devices, so the ISP runs
// in its own kernel: Debian's linux-image-6.1.0-*-amd64 (the one
// linux-image-amd64 depends on), with busybox-static, ppp (pppd 2.4.9),
// pppoe (rp-pppoe 3.15's pppoe-server), iperf3, dibbler-server (DHCPv6 with
// prefix delegation; ISC dhcpd -6 refuses ppp devices, wide-dhcpv6 delegates
// only per client DUID, kea needs boost and log4cplus, dnsmasq cannot
// delegate) and dnsmasq-base (the ISP's DNS server: Debian's busybox has no
// dnsd applet).
//
// Build (root, apt-get with current lists, xz) downloads the packages with
// apt-get download, extracts them with dpkg-deb -x and writes an
// uncompressed newc initramfs: the programs, the shared libraries they
// need (DT_NEEDED, from the packages or the host, a bookworm too), the
// modules they need in load order (each .ko's .modinfo depends=, as the
// package has no modules.dep) and a 10 MiB /www/big. The kernel's ELF is
// taken out of the bzImage so that QEMU boots it through PVH, without
// firmware or decompression under TCG. The result is cached in a directory
// named after apt's URIs and checksums of the packages (DefaultCacheDir
// for tests), and Build runs once per process.
//
// Start (or Boot) appends the run's configuration and scripts as a second
// cpio archive and boots the VM with its e1000 NIC on the caller's tap
// (Config.Tap in Config.Netns), ready in 3-5 s under TCG on this 2-core
// host when it is quiet (10-30 s when other tests load it).
// The VM runs pppoe-server on eth0 or eth0.VLAN with pppd requiring PAP or
// CHAP (secrets with the address column "*"), IPCP addresses from
// Local/Remote, DNS (ms-dns, sent only when the client asks; dnsmasq
// answers on each of them from a hosts file: UpstreamName and
// Config.Hosts, nothing else), IPv6CP, then
// on the session's /64 dibbler-server with IA_NA and the delegated Prefix
// routed over the session. The upstream host (Upstream4, Upstream6 on lo)
// answers ping, serves /big over HTTP on port 80 (Image.BigSHA256) and on
// port 9000 answers an upload with its SHA-256 once the client half-closes.
//
// The VM reports on its first serial port (the console) with lines
// "ISPVM-EVENT kind args" (VM.WaitEvent: ready, up, down, up6, down6, fail)
// and takes shell commands on its second (VM.Run, over a unix socket): a
// server-side disconnect (VM.Disconnect: SIGTERM to pppd, which sends an LCP
// Terminate-Request, then the relay a PADT) and a server that
// stops answering LCP echo (VM.Freeze, VM.Thaw: SIGSTOP, SIGCONT), and
// VM.SetPrefix changes the prefix the next session gets. QEMU runs
// in its own process group, killed at the test's cleanup (or with the test
// process: Pdeathsig, from an OS thread kept for it until QEMU exits).
//
// A test puts the VM's tap next to the box's WAN (a bridge, say) and waits
// for the session:
//
//	ns := netnstest.New(t, "isp")
//	ns.IP(t, "tuntap", "add", "dev", "isp0", "mode", "tap")
//	ns.IP(t, "link", "set", "isp0", "up")
//	vm := ispvm.Start(t, ispvm.Config{Netns: ns.Name(), Tap: "isp0", VLAN: 7, CHAP: true,
//		DNS: []netip.Addr{netip.MustParseAddr("198.51.100.53")}})
//	// … start the box with its WAN on ns …
//	if _, err := vm.WaitEvent(60*time.Second, "up"); err != nil { … }
//
// Config.KernelMode replaces pppoe-server with acd (./acd, a static Go
// program built at test time and added to the run's archive): it answers
// PADI and PADR itself (AC-Name, Service-Name, Host-Uniq and
// Relay-Session-Id echoed) and starts a pppd per session attached to it
// in the kernel (rp-pppoe.so's rp_pppoe_sess, as pppoe-server -k does;
// Debian's pppoe-server is built without -k, and its user-mode pty relay
// drops 1500-byte packets). It sends a PADT when a session's pppd exits
// and ends the pppd on the client's PADT. With it Config.MRU may be RFC
// 4638's 1500: acd then echoes a client's PPP-Max-Payload tag and eth0
// runs at MTU 1508 (the caller's tap and bridge must carry 1508 too).
// Without KernelMode Config refuses an MRU above 1492.
//
// The upstream host also runs an iperf3 server (port 5201).
package ispvm
