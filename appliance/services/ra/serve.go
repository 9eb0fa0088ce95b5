package ra

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

var (
	allNodes   = netip.MustParseAddr("ff02::1")
	allRouters = netip.MustParseAddr("ff02::2")
)

// Serve announces until ctx is done (nil then); it fails when the socket
// cannot be opened. It opens the socket in the calling thread's network
// namespace.
func (s *Server) Serve(ctx context.Context) error {
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err != nil {
		return fmt.Errorf("ra: %w", err)
	}
	mac := s.cfg.MAC
	if mac == nil {
		mac = ifi.HardwareAddr
	}
	conn, err := listen(ctx, ifi)
	if err != nil {
		return fmt.Errorf("ra: listen on %s: %w", ifi.Name, err)
	}
	if conn == nil {
		return nil // ctx ended first
	}
	defer conn.Close()
	if err := setup(conn); err != nil {
		return fmt.Errorf("ra: %s: %w", ifi.Name, err)
	}
	rs := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.readLoop(conn, rs) })
	defer func() {
		conn.Close()
		wg.Wait()
	}()
	return s.loop(ctx, conn, mac, rs)
}

// listen opens the socket on the interface's link-local address, waiting
// for one (an interface without carrier has none yet) until ctx ends (nil,
// nil then). It looks every 200 ms at first (DAD takes a second or two),
// then less and less often, up to listenPollMax: each look is a netlink
// dump of the addresses, and an interface without IPv6 never gets one.
func listen(ctx context.Context, ifi *net.Interface) (*ndp.Conn, error) {
	wait := 200 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if hasLinkLocal(ifi) {
			conn, _, err := ndp.Listen(ifi, ndp.LinkLocal)
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-t.C:
		}
		wait = min(wait*3/2, listenPollMax)
		t.Reset(wait)
	}
}

// listenPollMax is the longest wait between two looks for a link-local
// address.
const listenPollMax = 5 * time.Second

func hasLinkLocal(ifi *net.Interface) bool {
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

func setup(conn *ndp.Conn) error {
	if err := conn.JoinGroup(allRouters); err != nil {
		return fmt.Errorf("join ff02::2: %w", err)
	}
	if err := conn.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
		return fmt.Errorf("hop limit control messages: %w", err)
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	if err := conn.SetICMPFilter(&f); err != nil {
		return fmt.Errorf("ICMPv6 filter: %w", err)
	}
	return nil
}

// loop sends the RAs: unsolicited on a random schedule, after a change at
// once, after a solicitation within maxRADelay but no sooner than
// minDelayBetweenRAs after the last one.
func (s *Server) loop(ctx context.Context, conn *ndp.Conn, mac net.HardwareAddr, rs <-chan struct{}) error {
	var last time.Time
	sent := 0 // unsolicited RAs so far: the first ones come sooner
	next := time.Now()
	why := "unsolicited"
	send := func(kind string) {
		now := time.Now()
		if ra := s.advertisement(now, mac); ra != nil {
			if err := conn.WriteTo(ra, nil, allNodes); err != nil {
				s.fail(fmt.Errorf("send RA: %w", err))
			} else {
				s.count(kind)
				last = now
			}
		}
		sent++
		iv := s.interval()
		if sent < maxInitialRAs {
			iv = min(iv, maxInitialInterval)
		}
		next, why = now.Add(iv), "unsolicited"
	}
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
			sent = 0 // announce a change like a new interface (RFC 4861 6.2.4)
			send("change")
		case <-rs:
			at := time.Now().Add(rand.N(maxRADelay))
			if at.Before(last.Add(minDelayBetweenRAs)) {
				at = last.Add(minDelayBetweenRAs)
			}
			if at.Before(next) {
				next, why = at, "solicited"
			}
		case <-timer.C:
			send(why)
		}
		timer.Reset(time.Until(next))
	}
}

// interval is a random time between MaxInterval/3 and MaxInterval.
func (s *Server) interval() time.Duration {
	lo := s.cfg.MaxInterval / 3
	return lo + rand.N(s.cfg.MaxInterval-lo+1)
}

// readLoop takes the router solicitations and signals them (coalesced).
func (s *Server) readLoop(conn *ndp.Conn, rs chan<- struct{}) {
	for {
		m, cm, src, err := conn.ReadFrom()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.fail(fmt.Errorf("read: %w", err))
			time.Sleep(time.Second)
			continue
		}
		if why := checkRS(m, cm, src); why != "" {
			s.drop(why)
			continue
		}
		s.mu.Lock()
		s.stats.Solicitations++
		s.mu.Unlock()
		select {
		case rs <- struct{}{}:
		default:
		}
	}
}

// checkRS says why a message is no valid router solicitation (RFC 4861
// 6.1.1), or "" for one.
func checkRS(m ndp.Message, cm *ipv6.ControlMessage, src netip.Addr) string {
	rs, ok := m.(*ndp.RouterSolicitation)
	switch {
	case !ok:
		return "not_rs"
	case cm == nil || cm.HopLimit != ndp.HopLimit:
		return "hop_limit"
	case src.IsUnspecified() && slices.ContainsFunc(rs.Options, func(o ndp.Option) bool {
		_, lla := o.(*ndp.LinkLayerAddress)
		return lla
	}):
		return "unspecified_with_lla"
	}
	return ""
}
