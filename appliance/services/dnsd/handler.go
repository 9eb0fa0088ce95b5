package dnsd

import (
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// anyTTL is the TTL of the RFC 8482 answer to ANY.
const anyTTL = 3600

// serveDNS answers one query: rate limit, then respond, then fit the
// response to the transport.
func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.LocalAddr().(*net.TCPAddr)
	if tcp {
		s.stats.queriesTCP.Add(1)
	} else {
		s.stats.queriesUDP.Add(1)
	}
	client := addrOf(w.RemoteAddr())
	if ok, report := s.lim.allow(client, s.now()); !ok {
		s.stats.rateLimited.Add(1)
		if report {
			st := s.st.Load()
			s.log.Warn("dnsd: client over its query rate, dropping queries", "client", client,
				"rate", st.cfg.RateLimit, "burst", st.cfg.RateBurst)
		}
		if tcp {
			w.Close()
		}
		return
	}
	st := s.st.Load()
	resp := s.respond(st, req, addrOf(w.LocalAddr()))
	if resp == nil {
		if tcp {
			w.Close()
		}
		return
	}
	size := dns.MaxMsgSize
	if !tcp {
		size = udpSize(st, req)
	}
	if fit(resp, size) && !tcp {
		s.stats.truncated.Add(1)
	}
	if err := w.WriteMsg(resp); err != nil {
		s.log.Debug("dnsd: write response", "client", client, "err", err)
	}
}

// respond builds the response to req, or nil to send none.
func (s *Server) respond(st *settings, req *dns.Msg, arrived netip.Addr) *dns.Msg {
	if req.Response {
		return nil
	}
	if req.Opcode != dns.OpcodeQuery {
		return s.refuse(st, req, dns.RcodeNotImplemented, nil)
	}
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil || o.Hdr.Name != "." {
				// RFC 6891 §6.1.1: one OPT, owned by the root.
				return s.refuse(st, req, dns.RcodeFormatError, nil)
			}
			opt = o
		}
	}
	if len(req.Question) != 1 || len(req.Answer) > 0 || len(req.Ns) > 0 {
		return s.refuse(st, req, dns.RcodeFormatError, opt)
	}
	if opt != nil && opt.Version() != 0 {
		return s.refuse(st, req, dns.RcodeBadVers, opt)
	}
	q := req.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		return s.refuse(st, req, dns.RcodeRefused, opt)
	case q.Qtype == dns.TypeOPT:
		return s.refuse(st, req, dns.RcodeFormatError, opt)
	case q.Qtype == dns.TypeAXFR, q.Qtype == dns.TypeIXFR, q.Qtype == dns.TypeMAILA,
		q.Qtype == dns.TypeMAILB, q.Qtype == dns.TypeTSIG, q.Qtype == dns.TypeTKEY:
		return s.refuse(st, req, dns.RcodeRefused, opt)
	}
	name := dns.CanonicalName(q.Name)

	if lr, ok := st.local(q, name, arrived); ok {
		s.stats.local.Add(1)
		resp := reply(st, req, opt)
		resp.Authoritative = true
		resp.Rcode = lr.rcode
		resp.Answer, resp.Ns = lr.answer, lr.ns
		return resp
	}
	if q.Qtype == dns.TypeANY {
		// RFC 8482 §4.2: a small synthesized HINFO instead of everything;
		// an ANY query is nearly always a probe or an amplification try.
		s.stats.anyQ.Add(1)
		resp := reply(st, req, opt)
		resp.Answer = []dns.RR{&dns.HINFO{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: anyTTL},
			Cpu: "RFC8482",
		}}
		return resp
	}

	key := cacheKey{name: name, qtype: q.Qtype}
	if opt != nil && opt.Do() {
		key.flags |= keyDO
	}
	if req.CheckingDisabled {
		key.flags |= keyCD
	}
	a, ok := s.cache.get(key, s.now())
	if ok {
		s.stats.hits.Add(1)
	} else {
		s.stats.misses.Add(1)
		var err error
		if a, err = s.forward(st, key, q); err != nil {
			s.stats.servFail.Add(1)
			if err != errBusy && err != errNoUpstream {
				s.log.Debug("dnsd: no upstream answered", "name", name, "type", dns.TypeToString[q.Qtype], "err", err)
			}
			return servFail(st, req, opt)
		}
	}
	resp, err := s.fromAnswer(st, req, opt, a)
	if err != nil {
		s.log.Error("dnsd: cached answer does not unpack", "name", name, "err", err)
		s.stats.servFail.Add(1)
		return servFail(st, req, opt)
	}
	return resp
}

func servFail(st *settings, req *dns.Msg, opt *dns.OPT) *dns.Msg {
	resp := reply(st, req, opt)
	resp.Rcode = dns.RcodeServerFailure
	return resp
}

// reply starts the response to req: its ID, question and flags, recursion
// available, and an OPT record when req had one (RFC 6891 §7).
func reply(st *settings, req *dns.Msg, opt *dns.OPT) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if opt != nil {
		resp.SetEdns0(uint16(st.cfg.UDPSize), opt.Do())
	}
	return resp
}

// refuse answers a query the server will not handle with rcode.
func (s *Server) refuse(st *settings, req *dns.Msg, rcode int, opt *dns.OPT) *dns.Msg {
	s.stats.invalid.Add(1)
	resp := reply(st, req, opt)
	resp.Opcode = req.Opcode
	resp.Rcode = rcode
	if rcode == dns.RcodeBadVers && opt == nil {
		resp.Rcode = dns.RcodeFormatError
	}
	return resp
}

// fromAnswer answers req from an upstream answer, its TTLs counted down by
// the seconds since it arrived.
func (s *Server) fromAnswer(st *settings, req *dns.Msg, opt *dns.OPT, a answer) (*dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(a.wire); err != nil {
		return nil, err
	}
	elapsed, _ := a.remaining(s.now())
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl -= min(h.Ttl, elapsed)
		}
	}
	resp := reply(st, req, opt)
	resp.Rcode = m.Rcode
	// RFC 6840 §5.8: AD only to a client that asked for it (AD or DO).
	resp.AuthenticatedData = m.AuthenticatedData && (req.AuthenticatedData || opt != nil && opt.Do())
	resp.Answer, resp.Ns = m.Answer, m.Ns
	resp.Extra = append(m.Extra, resp.Extra...)
	return resp, nil
}

// udpSize is the largest UDP response req may get: 512 without EDNS, else
// the client's buffer size within [512, UDPSize].
func udpSize(st *settings, req *dns.Msg) int {
	opt := req.IsEdns0()
	if opt == nil {
		return dns.MinMsgSize
	}
	return min(max(int(opt.UDPSize()), dns.MinMsgSize), st.cfg.UDPSize)
}

// fit makes resp fit in size bytes: additional records go first (they are
// not needed, RFC 2181 §9), then, if it still does not fit, every record
// but OPT, with TC set so the client asks again over TCP. It reports
// whether it set TC.
func fit(resp *dns.Msg, size int) bool {
	resp.Compress = true
	if resp.Len() <= size {
		return false
	}
	var keep []dns.RR
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			keep = append(keep, rr)
		}
	}
	resp.Extra = keep
	if resp.Len() <= size {
		return false
	}
	resp.Answer, resp.Ns = nil, nil
	resp.Truncated = true
	return true
}
