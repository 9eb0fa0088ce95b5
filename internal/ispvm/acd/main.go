// Command acd is the ISP VM's kernel-mode PPPoE access concentrator: it
// answers discovery (PADI with PADO, PADR with PADS) on one interface and
// runs pppd with the rp-pppoe plugin attached to each new session in the
// kernel (pppoe-sess), as pppoe-server -k does; Debian's pppoe-server
// lacks -k. A PADT from the client ends the session's pppd; when a pppd
// exits, acd sends a PADT.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		slog.Error("acd", "err", err)
		os.Exit(1)
	}
}

// config is acd's command line.
type config struct {
	iface   string
	offer   offer
	local   netip.Addr
	remote  netip.Addr // the first client address; session n gets remote+n (the lowest free)
	count   int        // sessions at most
	options string     // pppd's options file
	pppd    string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("acd", flag.ContinueOnError)
	c := &config{}
	fs.StringVar(&c.iface, "I", "eth0", "the interface")
	fs.StringVar(&c.offer.ACName, "C", "acd", "the AC-Name")
	fs.StringVar(&c.offer.Service, "S", "", "the only Service-Name offered (empty: any)")
	fs.IntVar(&c.offer.MaxPayload, "mru", 1492, "the largest PPP payload (above 1492: RFC 4638's PPP-Max-Payload is echoed)")
	local := fs.String("L", "10.64.0.1", "the server's IPCP address")
	remote := fs.String("R", "10.64.0.2", "the first client IPCP address")
	fs.IntVar(&c.count, "N", 64, "sessions at most")
	fs.StringVar(&c.options, "O", "/etc/ppp/isp-options", "pppd's options file")
	fs.StringVar(&c.pppd, "pppd", "pppd", "pppd's path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if c.local, err = netip.ParseAddr(*local); err != nil || !c.local.Is4() {
		return nil, fmt.Errorf("-L %q: not an IPv4 address", *local)
	}
	if c.remote, err = netip.ParseAddr(*remote); err != nil || !c.remote.Is4() {
		return nil, fmt.Errorf("-R %q: not an IPv4 address", *remote)
	}
	if c.count < 1 || c.count > 0xfffe {
		return nil, fmt.Errorf("-N %d out of 1-65534", c.count)
	}
	return c, nil
}

// session is one PPPoE session and its pppd.
type session struct {
	id       uint16
	peer     [6]byte
	hostUniq string
	remote   netip.Addr
	padsAt   time.Time // when its PADS went out
	cmd      *exec.Cmd
	peerGone bool // the client sent a PADT: none back
}

type server struct {
	cfg      *config
	fd       int
	ifindex  int
	mac      [6]byte
	sessions map[uint16]*session
	lastID   uint16
	exited   chan *session
}

func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(cfg.iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", cfg.iface, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("interface %s: no Ethernet address", cfg.iface)
	}
	proto := htons(etherTypeDiscovery)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return fmt.Errorf("binding to %s: %w", cfg.iface, err)
	}
	s := &server{cfg: cfg, fd: fd, ifindex: ifi.Index, sessions: map[uint16]*session{}, exited: make(chan *session)}
	copy(s.mac[:], ifi.HardwareAddr)
	frames := make(chan []byte, 16)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if err == unix.EINTR {
					continue
				}
				slog.Error("acd: receiving", "err", err)
				os.Exit(1)
			}
			frames <- append([]byte(nil), buf[:n]...)
		}
	}()
	slog.Info("acd: serving", "if", cfg.iface, "ac", cfg.offer.ACName, "service", cfg.offer.Service, "mru", cfg.offer.MaxPayload)
	for {
		select {
		case f := <-frames:
			s.handle(f)
		case ses := <-s.exited:
			s.end(ses)
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// handle answers one discovery frame.
func (s *server) handle(f []byte) {
	if len(f) < ethHeaderLen || binary.BigEndian.Uint16(f[12:]) != etherTypeDiscovery {
		return
	}
	var dst, src [6]byte
	copy(dst[:], f[0:6])
	copy(src[:], f[6:12])
	if src[0]&1 != 0 || src == s.mac {
		return
	}
	p, err := parsePacket(f[ethHeaderLen:])
	if err != nil {
		slog.Info("acd: bad discovery packet", "from", mac(src), "err", err)
		return
	}
	broadcast := dst == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	switch {
	case p.Code == codePADI && broadcast && p.Session == 0:
		resp, ok := s.cfg.offer.reply(&p, 0)
		if !ok {
			slog.Info("acd: PADI for a service not offered", "from", mac(src))
			return
		}
		s.send(src, &resp, "PADO")
	case p.Code == codePADR && dst == s.mac && p.Session == 0:
		s.padr(src, &p)
	case p.Code == codePADT && dst == s.mac:
		ses, ok := s.sessions[p.Session]
		if !ok || ses.peer != src {
			return
		}
		slog.Info("acd: PADT from the client", "session", ses.id, "from", mac(src))
		ses.peerGone = true
		ses.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// padr starts a session for a PADR (or answers a retransmitted one
// again) and sends the PADS.
func (s *server) padr(src [6]byte, p *packet) {
	hu, _ := p.find(tagHostUniq)
	for _, ses := range s.sessions {
		// A PADR retransmitted while pppd started (slow on a loaded TCG
		// VM) gets the same session.
		if ses.peer == src && ses.hostUniq == string(hu.Value) && time.Since(ses.padsAt) < 10*time.Second {
			resp, _ := s.cfg.offer.reply(p, ses.id)
			s.send(src, &resp, "PADS (again)")
			return
		}
	}
	resp, ok := s.cfg.offer.reply(p, 0)
	if !ok {
		s.send(src, &resp, "PADS (Service-Name-Error)")
		return
	}
	id, remote, ok := s.allocate()
	if !ok {
		resp.Tags = append(resp.Tags, tag{Type: tagGenericError, Value: []byte("no free session")})
		s.send(src, &resp, "PADS (full)")
		return
	}
	ses := &session{id: id, peer: src, hostUniq: string(hu.Value), remote: remote}
	args := []string{"plugin", "rp-pppoe.so", "nic-" + s.cfg.iface, "rp_pppoe_sess", fmt.Sprintf("%d:%s", id, mac(src))}
	if s.cfg.offer.Service != "" {
		args = append(args, "rp_pppoe_service", s.cfg.offer.Service)
	}
	// silent: pppd waits for the client's Configure-Request, which comes
	// only after the PADS, sent once pppd's socket is attached (below): no
	// first LCP packet is lost to a session the kernel does not know yet.
	args = append(args, "file", s.cfg.options, s.cfg.local.String()+":"+remote.String(), "nodetach", "silent")
	ses.cmd = exec.Command(s.cfg.pppd, args...)
	ses.cmd.Stdout, ses.cmd.Stderr = os.Stderr, os.Stderr
	if err := ses.cmd.Start(); err != nil {
		slog.Error("acd: starting pppd", "err", err)
		resp.Session = 0
		resp.Tags = append(resp.Tags, tag{Type: tagGenericError, Value: []byte("cannot start pppd")})
		s.send(src, &resp, "PADS (error)")
		return
	}
	s.sessions[id] = ses
	go func() {
		ses.cmd.Wait()
		s.exited <- ses
	}()
	resp.Session = id
	attached := waitAttached(id, src, 5*time.Second)
	slog.Info("acd: session", "id", id, "peer", mac(src), "remote", remote, "pppd", ses.cmd.Process.Pid, "attached", attached)
	s.send(src, &resp, "PADS")
	ses.padsAt = time.Now()
}

// waitAttached waits up to d for a PPPoE socket of session id with peer
// to show in /proc/net/pppoe (pppd has connected it) and reports whether
// one did.
func waitAttached(id uint16, peer [6]byte, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/net/pppoe")
		if pppoeListed(string(b), id, peer) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// pppoeListed reports whether /proc/net/pppoe's text lists session id with
// peer. The kernel prints the session ID as it is stored, in network
// byte order, as a hex number: 1 shows as 00000100 on a little-endian
// machine.
func pppoeListed(procNet string, id uint16, peer [6]byte) bool {
	for _, line := range strings.Split(procNet, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.EqualFold(f[1], mac(peer)) {
			continue
		}
		if v, err := strconv.ParseUint(f[0], 16, 32); err == nil && (uint16(v) == id || uint16(v) == htons(id)) {
			return true
		}
	}
	return false
}

// allocate picks the next free session ID and the lowest free client
// address.
func (s *server) allocate() (uint16, netip.Addr, bool) {
	if len(s.sessions) >= s.cfg.count {
		return 0, netip.Addr{}, false
	}
	used := map[netip.Addr]bool{}
	for _, ses := range s.sessions {
		used[ses.remote] = true
	}
	remote := s.cfg.remote
	for used[remote] {
		remote = remote.Next()
	}
	id := s.lastID
	for {
		id++
		if id == 0 || id == 0xffff {
			id = 1
		}
		if _, busy := s.sessions[id]; !busy {
			break
		}
	}
	s.lastID = id
	return id, remote, true
}

// end frees a session whose pppd exited and sends its PADT.
func (s *server) end(ses *session) {
	delete(s.sessions, ses.id)
	slog.Info("acd: pppd exited", "session", ses.id, "state", ses.cmd.ProcessState.String())
	if !ses.peerGone {
		s.send(ses.peer, &packet{Code: codePADT, Session: ses.id}, "PADT")
	}
}

func (s *server) send(dst [6]byte, p *packet, what string) {
	err := unix.Sendto(s.fd, frame(dst, s.mac, p), 0, &unix.SockaddrLinklayer{Protocol: htons(etherTypeDiscovery),
		Ifindex: s.ifindex, Halen: 6, Addr: [8]byte{dst[0], dst[1], dst[2], dst[3], dst[4], dst[5]}})
	if err != nil {
		slog.Error("acd: sending "+what, "to", mac(dst), "err", err)
		return
	}
	slog.Info("acd: sent "+what, "to", mac(dst), "session", p.Session)
}

func mac(m [6]byte) string {
	parts := make([]string, 6)
	for i, b := range m {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}
