package diag

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// LookupOptions configure Lookup.
type LookupOptions struct {
	Name string
	Type string // default A
	// Server is host or host:port; "" asks the first nameserver of
	// ResolvConf.
	Server     string
	Device     string
	ResolvConf string // default /etc/resolv.conf
	Timeout    time.Duration
}

// LookupResult is one DNS answer.
type LookupResult struct {
	Server    string
	RCode     string
	RTT       time.Duration
	Answer    []string
	Authority []string
}

// Lookup sends one query (UDP, then TCP if the answer was truncated).
func Lookup(ctx context.Context, o LookupOptions) (LookupResult, error) {
	if o.Type == "" {
		o.Type = "A"
	}
	qt, ok := dns.StringToType[strings.ToUpper(o.Type)]
	if !ok {
		return LookupResult{}, fmt.Errorf("type %q: want A, AAAA, MX, TXT, NS, CNAME, PTR, SOA, SRV or ANY", o.Type)
	}
	name := strings.TrimSpace(o.Name)
	if qt == dns.TypePTR {
		if rev, err := dns.ReverseAddr(name); err == nil {
			name = rev
		}
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return LookupResult{}, fmt.Errorf("name %q is not a domain name", o.Name)
	}
	server, err := serverAddr(o.Server, o.ResolvConf)
	if err != nil {
		return LookupResult{}, err
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Second
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	m.SetEdns0(1232, false)
	c := &dns.Client{Timeout: o.Timeout, Dialer: &net.Dialer{Timeout: o.Timeout, Control: bindControl(o.Device)}}
	r, rtt, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, rtt, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return LookupResult{Server: server}, fmt.Errorf("asking %s: %w", server, err)
	}
	res := LookupResult{Server: server, RCode: dns.RcodeToString[r.Rcode], RTT: rtt}
	for _, rr := range r.Answer {
		res.Answer = append(res.Answer, rr.String())
	}
	for _, rr := range r.Ns {
		res.Authority = append(res.Authority, rr.String())
	}
	return res, nil
}

// serverAddr is host:port for a server given by the user, or the first
// nameserver of the resolver config.
func serverAddr(server, resolvConf string) (string, error) {
	if server != "" {
		if _, _, err := net.SplitHostPort(server); err == nil {
			return server, nil
		}
		if strings.Count(server, ":") > 1 && !strings.HasPrefix(server, "[") {
			return net.JoinHostPort(server, "53"), nil // a bare IPv6 address
		}
		return net.JoinHostPort(server, "53"), nil
	}
	if resolvConf == "" {
		resolvConf = "/etc/resolv.conf"
	}
	cc, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("the box has no resolver configured (%s): name a server", resolvConf)
		}
		return "", fmt.Errorf("reading %s: %w", resolvConf, err)
	}
	if len(cc.Servers) == 0 {
		return "", fmt.Errorf("%s names no nameserver: name a server", resolvConf)
	}
	return net.JoinHostPort(cc.Servers[0], cc.Port), nil
}
