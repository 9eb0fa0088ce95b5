package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// demoteFor is how long an upstream that timed out or failed is tried last.
const demoteFor = 30 * time.Second

// maxFlights bounds the distinct questions waiting on upstreams at once;
// beyond it new misses are answered SERVFAIL at once.
const maxFlights = 512

var (
	errNoUpstream = errors.New("no upstream servers")
	errBusy       = errors.New("too many questions in flight")
)

// upstream is one upstream server and its health.
type upstream struct {
	addr      netip.AddrPort
	badUntil  atomic.Int64 // unix nanoseconds; before it the upstream is tried last
	queries   atomic.Uint64
	failures  atomic.Uint64
	timeouts  atomic.Uint64
	demotedMu sync.Mutex // serializes the demote/recover log lines
}

func newUpstreams(addrs []netip.AddrPort) []*upstream {
	ups := make([]*upstream, len(addrs))
	for i, a := range addrs {
		ups[i] = &upstream{addr: a}
	}
	return ups
}

// ordered returns the upstreams to try: healthy ones in their configured
// order, then demoted ones in theirs.
func ordered(ups []*upstream, now time.Time) []*upstream {
	out := make([]*upstream, 0, len(ups))
	for _, u := range ups {
		if u.badUntil.Load() <= now.UnixNano() {
			out = append(out, u)
		}
	}
	for _, u := range ups {
		if u.badUntil.Load() > now.UnixNano() {
			out = append(out, u)
		}
	}
	return out
}

// flight is one question in flight upstream; identical questions wait for
// it instead of asking again.
type flight struct {
	done chan struct{}
	ans  answer
	err  error
}

type flightKey struct {
	cacheKey
	gen uint64
}

// forward answers a cache miss: it joins the identical question in flight
// or asks the upstreams itself, caching what may be cached.
func (s *Server) forward(st *settings, key cacheKey, q dns.Question) (answer, error) {
	gen := s.cache.generation()
	fk := flightKey{key, gen}
	s.flightMu.Lock()
	if f := s.flights[fk]; f != nil {
		s.flightMu.Unlock()
		s.stats.coalesced.Add(1)
		select {
		case <-f.done:
			return f.ans, f.err
		case <-s.base.Done():
			return answer{}, s.base.Err()
		}
	}
	if len(s.flights) >= maxFlights {
		s.flightMu.Unlock()
		return answer{}, errBusy
	}
	f := &flight{done: make(chan struct{})}
	s.flights[fk] = f
	s.flightMu.Unlock()

	f.ans, f.err = s.resolve(st, key, q)
	if f.err == nil {
		s.cache.put(key, f.ans, gen)
	}
	s.flightMu.Lock()
	delete(s.flights, fk)
	s.flightMu.Unlock()
	close(f.done)
	return f.ans, f.err
}

// resolve asks the upstreams in order until one answers.
func (s *Server) resolve(st *settings, key cacheKey, q dns.Question) (answer, error) {
	ups := *s.ups.Load()
	if len(ups) == 0 {
		if s.noUpstreamLogged.CompareAndSwap(false, true) {
			s.log.Warn("dnsd: no upstream servers: forwarded queries get SERVFAIL")
		}
		return answer{}, errNoUpstream
	}
	query := new(dns.Msg)
	query.Id = dns.Id()
	query.RecursionDesired = true
	query.AuthenticatedData = true // RFC 6840 §5.7: tell us whether it validated
	query.CheckingDisabled = key.flags&keyCD != 0
	query.Question = []dns.Question{{Name: key.name, Qtype: q.Qtype, Qclass: dns.ClassINET}}
	query.SetEdns0(DefaultUDPSize, key.flags&keyDO != 0)

	var last error
	for _, u := range ordered(ups, s.now()) {
		r, err := s.exchange(st, u, query)
		if err != nil {
			if s.base.Err() != nil {
				return answer{}, s.base.Err()
			}
			last = fmt.Errorf("upstream %s: %w", u.addr, err)
			continue
		}
		a, err := s.normalize(st, r)
		if err != nil {
			last = fmt.Errorf("upstream %s: %w", u.addr, err)
			continue
		}
		return a, nil
	}
	return answer{}, last
}

// exchange asks one upstream over UDP (over TCP when the answer was
// truncated), once more without EDNS when it answers FORMERR to EDNS.
// Timeouts and failures demote the upstream; SERVFAIL and REFUSED are
// failures that make the caller try the next one.
func (s *Server) exchange(st *settings, u *upstream, query *dns.Msg) (*dns.Msg, error) {
	r, err := s.exchangeOn(st, u, "udp", query)
	if err == nil && r.Rcode == dns.RcodeFormatError && query.IsEdns0() != nil {
		plain := query.Copy()
		plain.Extra = nil
		r, err = s.exchangeOn(st, u, "udp", plain)
		query = plain
	}
	if err == nil && r.Truncated {
		r, err = s.exchangeOn(st, u, "tcp", query)
	}
	if err == nil {
		switch r.Rcode {
		case dns.RcodeSuccess, dns.RcodeNameError:
		case dns.RcodeServerFailure:
			// Often the domain's fault (a DNSSEC failure, its servers
			// down), not the upstream's: try the next, don't demote.
			u.failures.Add(1)
			s.stats.upFailures.Add(1)
			return nil, fmt.Errorf("answered %s", dns.RcodeToString[r.Rcode])
		default:
			err = fmt.Errorf("answered %s", rcodeString(r.Rcode))
		}
	}
	if err != nil {
		u.failures.Add(1)
		s.stats.upFailures.Add(1)
		if isTimeout(err) {
			u.timeouts.Add(1)
			s.stats.upTimeouts.Add(1)
		}
		if s.base.Err() == nil {
			s.demote(u, err)
		}
		return nil, err
	}
	s.recovered(u)
	return r, nil
}

func rcodeString(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprintf("rcode %d", rc)
}

// exchangeOn sends one query over network and checks that the response
// answers it.
func (s *Server) exchangeOn(st *settings, u *upstream, network string, query *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(s.base, st.cfg.Timeout)
	defer cancel()
	u.queries.Add(1)
	s.stats.upQueries.Add(1)
	conn, err := s.dial(ctx, network, u.addr.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := dns.Client{Net: network, Timeout: st.cfg.Timeout, UDPSize: DefaultUDPSize}
	r, rtt, err := c.ExchangeWithConnContext(ctx, query, &dns.Conn{Conn: conn, UDPSize: DefaultUDPSize})
	if err != nil {
		return nil, err
	}
	if !r.Response || r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 ||
		dns.CanonicalName(r.Question[0].Name) != query.Question[0].Name ||
		r.Question[0].Qtype != query.Question[0].Qtype || r.Question[0].Qclass != query.Question[0].Qclass {
		return nil, errors.New("response does not answer the question")
	}
	s.stats.latency.observe(rtt)
	return r, nil
}

// dial connects in the server's network namespace.
func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := s.ns.do(func() (err error) {
		d := &net.Dialer{}
		if src := s.st.Load().cfg.Source; src.IsValid() {
			if strings.HasPrefix(network, "tcp") {
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			} else {
				d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
		}
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) demote(u *upstream, err error) {
	now := s.now()
	u.demotedMu.Lock()
	defer u.demotedMu.Unlock()
	if u.badUntil.Load() <= now.UnixNano() {
		s.log.Warn("dnsd: upstream failing, tried last", "upstream", u.addr, "for", demoteFor, "err", err)
	}
	u.badUntil.Store(now.Add(demoteFor).UnixNano())
}

func (s *Server) recovered(u *upstream) {
	if u.badUntil.Load() == 0 {
		return
	}
	u.demotedMu.Lock()
	defer u.demotedMu.Unlock()
	if u.badUntil.Swap(0) > s.now().UnixNano() {
		s.log.Info("dnsd: upstream answers again", "upstream", u.addr)
	}
}

// normalize turns an upstream response into a cacheable answer: the
// question, rcode, AD bit and records (no OPT, no TSIG), TTLs clamped to
// [MinTTL, MaxTTL]. Its cache TTL is the smallest record TTL; a negative
// answer (NXDOMAIN, or no answer records) is cached only with an SOA
// (RFC 2308 §5), for min(SOA TTL, SOA minimum, NegativeMaxTTL), and the
// SOA carries that TTL.
func (s *Server) normalize(st *settings, r *dns.Msg) (answer, error) {
	m := new(dns.Msg)
	m.Response = true
	m.Rcode = r.Rcode
	m.AuthenticatedData = r.AuthenticatedData
	m.Question = []dns.Question{{Name: dns.CanonicalName(r.Question[0].Name), Qtype: r.Question[0].Qtype, Qclass: r.Question[0].Qclass}}
	m.Answer = r.Answer
	m.Ns = r.Ns
	for _, rr := range r.Extra {
		if t := rr.Header().Rrtype; t != dns.TypeOPT && t != dns.TypeTSIG {
			m.Extra = append(m.Extra, rr)
		}
	}
	ttl := st.maxTTL
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl = min(max(h.Ttl, st.minTTL), st.maxTTL)
			ttl = min(ttl, h.Ttl)
		}
	}
	if m.Rcode == dns.RcodeNameError || len(m.Answer) == 0 {
		var soa *dns.SOA
		for _, rr := range m.Ns {
			if v, ok := rr.(*dns.SOA); ok {
				soa = v
				break
			}
		}
		if soa == nil {
			ttl = 0
		} else {
			ttl = min(ttl, soa.Minttl, st.negMaxTTL)
			soa.Hdr.Ttl = ttl
		}
	}
	m.Compress = true
	wire, err := m.Pack()
	if err != nil {
		return answer{}, fmt.Errorf("response does not pack again: %w", err)
	}
	return answer{wire: wire, at: s.now(), ttl: ttl}, nil
}
