package dhcp6c

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/internal/netnstest"
)

// fakeLink is a transport whose other end is the test: it reads what the
// client sends and hands it frames as a server would.
type fakeLink struct {
	in     chan []byte
	out    chan *dhcpv6.Message
	closed chan struct{}
	once   sync.Once
	quit   chan struct{} // the test is over: nobody reads out
}

func newFakeLink() *fakeLink {
	return &fakeLink{in: make(chan []byte, 16), out: make(chan *dhcpv6.Message, 64), closed: make(chan struct{}), quit: make(chan struct{})}
}

func (f *fakeLink) Read(b []byte) (int, bool, error) {
	select {
	case p := <-f.in:
		return copy(b, p), false, nil
	case <-f.closed:
		return 0, false, net.ErrClosed
	}
}

func (f *fakeLink) Write(frame []byte, _ net.HardwareAddr) error {
	msg, err := dhcpv6.MessageFromBytes(frame[ethHdrLen+ipv6HdrLen+udpHdrLen:])
	if err != nil {
		return err
	}
	select {
	case f.out <- msg:
		return nil
	case <-f.quit:
		return net.ErrClosed
	}
}

func (f *fakeLink) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

// fakeRun is a client on a fakeLink; its lease changes arrive on changes.
type fakeRun struct {
	t       *testing.T
	c       *Client
	link    *fakeLink
	changes chan change
	server  dhcpv6.DUID
}

func startFake(t *testing.T, cfg Config) *fakeRun {
	t.Helper()
	return startFakeWith(t, cfg, newFakeLink(), true)
}

// startFakeWith is startFake on link; open says the test opens it (else
// cfg.Open does).
func startFakeWith(t *testing.T, cfg Config, link *fakeLink, open bool) *fakeRun {
	t.Helper()
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRun{t: t, c: c, link: link, changes: make(chan change, 16),
		server: &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ispMAC}}
	if open {
		c.core.Open = func() (dhcpclient.Transport, int, error) { return f.link, 1500, nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, func(old, new *Lease) {
			select {
			case f.changes <- change{old, new}:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		close(f.link.quit)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f
}

// sent waits for the client's next message of type typ (others are
// skipped: retransmissions of what came before).
func (f *fakeRun) sent(typ dhcpv6.MessageType, within time.Duration) *dhcpv6.Message {
	f.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-f.link.out:
			if m.MessageType == typ {
				return m
			}
		case <-deadline:
			f.t.Fatalf("no %s within %v", typ, within)
			return nil
		}
	}
}

// answer sends the client a message of type typ for its message req,
// built by opts.
func (f *fakeRun) answer(req *dhcpv6.Message, typ dhcpv6.MessageType, opts ...dhcpv6.Option) {
	f.t.Helper()
	m := &dhcpv6.Message{MessageType: typ, TransactionID: req.TransactionID}
	m.AddOption(dhcpv6.OptClientID(req.Options.ClientID()))
	m.AddOption(dhcpv6.OptServerID(f.server))
	for _, o := range opts {
		m.AddOption(o)
	}
	f.link.in <- replyFrame(m.ToBytes(), nil)
}

func (f *fakeRun) change(within time.Duration) change {
	f.t.Helper()
	return next(f.t, f.changes, within)
}

var (
	boxIAID    = [4]byte(boxMAC[2:6])
	delegation = netip.MustParsePrefix("2001:db8:100::/56")
	naAddr     = netip.MustParseAddr("2001:db8:86::100")
)

// iapd is our IA_PD with the delegation (or, without prefix, the status st).
func iapd(st iana.StatusCode) *dhcpv6.OptIAPD {
	pd := &dhcpv6.OptIAPD{IaId: boxIAID, T1: time.Hour, T2: 2 * time.Hour}
	if st != iana.StatusSuccess {
		pd.Options.Add(&dhcpv6.OptStatusCode{StatusCode: st})
		return pd
	}
	pd.Options.Add(&dhcpv6.OptIAPrefix{Prefix: ipnet(delegation.String()), PreferredLifetime: 2 * time.Hour, ValidLifetime: 4 * time.Hour})
	return pd
}

// iana is our IA_NA with naAddr (or, with status st, only the status).
func ianaOpt(st iana.StatusCode) *dhcpv6.OptIANA {
	na := &dhcpv6.OptIANA{IaId: boxIAID, T1: time.Hour, T2: 2 * time.Hour}
	if st != iana.StatusSuccess {
		na.Options.Add(&dhcpv6.OptStatusCode{StatusCode: st, StatusMessage: "no addresses"})
		return na
	}
	na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: naAddr.AsSlice(), PreferredLifetime: 2 * time.Hour, ValidLifetime: 4 * time.Hour})
	return na
}

func leaseAddrs(l *Lease) []netip.Addr {
	if l == nil {
		return nil
	}
	var as []netip.Addr
	for _, a := range l.Addrs {
		as = append(as, a.Addr)
	}
	return as
}

// TestNoAddrsAvail: asked for a prefix and an address, a server that has
// no address (NoAddrsAvail in the IA_NA, or at the top of the message
// beside the prefix) still delegates the prefix; an Advertise with
// NoAddrsAvail and no prefix is not taken.
func TestNoAddrsAvail(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dhcpv6.Option
		want bool // the prefix is delegated
	}{
		{"in the IA_NA", []dhcpv6.Option{iapd(iana.StatusSuccess), ianaOpt(iana.StatusNoAddrsAvail)}, true},
		{"at the top, with the prefix", []dhcpv6.Option{&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail},
			iapd(iana.StatusSuccess), ianaOpt(iana.StatusNoAddrsAvail)}, true},
		{"at the top, with neither", []dhcpv6.Option{&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail}}, false},
		{"no prefix either", []dhcpv6.Option{iapd(iana.StatusNoPrefixAvail), ianaOpt(iana.StatusNoAddrsAvail)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56, Address: true})
			sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
			if sol.Options.OneIANA() == nil || sol.Options.OneIAPD() == nil {
				t.Fatalf("SOLICIT %v asks for no address or no prefix", sol.Options)
			}
			f.answer(sol, dhcpv6.MessageTypeAdvertise, append([]dhcpv6.Option{dhcpv6.OptPreference(255)}, tc.opts...)...)
			if !tc.want {
				f.sent(dhcpv6.MessageTypeSolicit, 3*time.Second) // retransmitted: the Advertise was not taken
				if s := f.c.Stats(); s.Sent["REQUEST"] != 0 || s.Ignored[dropNothingOffered] != 1 {
					t.Errorf("stats %+v, want the Advertise ignored and no REQUEST", s)
				}
				return
			}
			req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
			if na := req.Options.OneIANA(); na == nil || len(na.Options.Addresses()) != 0 {
				t.Errorf("REQUEST's IA_NA %v, want one without addresses (still asked for)", na)
			}
			f.answer(req, dhcpv6.MessageTypeReply, tc.opts...)
			got := f.change(2 * time.Second).new
			if got == nil || len(got.Prefixes) != 1 || got.Prefixes[0].Prefix != delegation || len(got.Addrs) != 0 {
				t.Fatalf("lease %+v, want %v and no address", got, delegation)
			}
			if s := f.c.Stats(); s.State != "bound" {
				t.Errorf("state %q, want bound", s.State)
			}
		})
	}
}

// TestNoBindingOnRenew: a Renew's Reply with NoBinding for the IA_PD
// means the server lost the delegation (SOLICIT again); for an IA_NA the
// client holds no address in (asked for, none leased) it does not.
func TestNoBindingOnRenew(t *testing.T) {
	noBinding := func(o dhcpv6.Option) dhcpv6.Option {
		switch o := o.(type) {
		case *dhcpv6.OptIAPD:
			o.Options = dhcpv6.PDOptions{Options: dhcpv6.Options{&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding}}}
		case *dhcpv6.OptIANA:
			o.Options = dhcpv6.IdentityOptions{Options: dhcpv6.Options{&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding}}}
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		reply   []dhcpv6.Option
		solicit bool
	}{
		{"the IA_NA without an address", []dhcpv6.Option{shortT1(iapd(iana.StatusSuccess)), noBinding(shortT1(ianaOpt(iana.StatusSuccess)))}, false},
		{"the IA_PD", []dhcpv6.Option{noBinding(shortT1(iapd(iana.StatusSuccess))), shortT1(ianaOpt(iana.StatusNoAddrsAvail))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56, Address: true})
			sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
			f.answer(sol, dhcpv6.MessageTypeAdvertise, dhcpv6.OptPreference(255), iapd(iana.StatusSuccess), ianaOpt(iana.StatusNoAddrsAvail))
			req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
			f.answer(req, dhcpv6.MessageTypeReply, shortT1(iapd(iana.StatusSuccess)), shortT1(ianaOpt(iana.StatusNoAddrsAvail)))
			f.change(2 * time.Second)
			ren := f.sent(dhcpv6.MessageTypeRenew, 3*time.Second)
			f.answer(ren, dhcpv6.MessageTypeReply, tc.reply...)
			if tc.solicit {
				f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
				return
			}
			netnstest.WaitFor(t, 2*time.Second, "bound after the Renew's Reply", func() bool { return f.c.Stats().State == "bound" })
			if s := f.c.Stats(); s.Sent["SOLICIT"] != 1 {
				t.Errorf("stats %+v: SOLICIT again after NoBinding for an IA_NA without addresses", s)
			}
			if cur := f.c.Current(); cur == nil || len(cur.Prefixes) != 1 || cur.Prefixes[0].Prefix != delegation {
				t.Errorf("lease %+v, want %v kept", cur, delegation)
			}
		})
	}
}

// shortT1 sets an IA's T1 to 1 s and T2 to 2 s.
func shortT1(o dhcpv6.Option) dhcpv6.Option {
	switch o := o.(type) {
	case *dhcpv6.OptIAPD:
		o.T1, o.T2 = time.Second, 2*time.Second
	case *dhcpv6.OptIANA:
		o.T1, o.T2 = time.Second, 2*time.Second
	}
	return o
}

// TestDecline: an address Decline names leaves the lease at once (the
// prefix stays), goes to the server in a DECLINE (server ID, our IA_NA
// with the address, no option request), retransmitted after a second
// until a Reply; a later Reply that still carries it does not bring it
// back before the Decline is answered; then the client is bound again.
func TestDecline(t *testing.T) {
	f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56, Address: true})
	sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
	f.answer(sol, dhcpv6.MessageTypeAdvertise, dhcpv6.OptPreference(255), iapd(iana.StatusSuccess), ianaOpt(iana.StatusSuccess))
	req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
	f.answer(req, dhcpv6.MessageTypeReply, iapd(iana.StatusSuccess), ianaOpt(iana.StatusSuccess))
	if got := f.change(2 * time.Second).new; !slices.Equal(leaseAddrs(got), []netip.Addr{naAddr}) {
		t.Fatalf("bound %+v, want %v", got, naAddr)
	}

	f.c.Decline(netip.MustParseAddr("2001:db8:86::999")) // not ours: nothing
	f.c.Decline(naAddr)
	ch := f.change(2 * time.Second)
	if !slices.Equal(leaseAddrs(ch.old), []netip.Addr{naAddr}) || ch.new == nil || len(ch.new.Addrs) != 0 ||
		len(ch.new.Prefixes) != 1 || ch.new.Prefixes[0].Prefix != delegation {
		t.Fatalf("after Decline: %v -> %+v, want the address gone and %v kept", leaseAddrs(ch.old), ch.new, delegation)
	}
	dec := f.sent(dhcpv6.MessageTypeDecline, 2*time.Second)
	var addrs []netip.Addr
	na := dec.Options.OneIANA()
	if na != nil {
		for _, a := range na.Options.Addresses() {
			ip, _ := netip.AddrFromSlice(a.IPv6Addr)
			addrs = append(addrs, ip)
		}
	}
	if na == nil || na.IaId != boxIAID || !slices.Equal(addrs, []netip.Addr{naAddr}) || dec.Options.OneIAPD() != nil {
		t.Errorf("DECLINE's IAs: IA_NA %v, IA_PD %v; want our IA_NA with %v only", na, dec.Options.OneIAPD(), naAddr)
	}
	if sid := dec.Options.ServerID(); sid == nil || !sid.Equal(f.server) || dec.Options.ClientID() == nil ||
		dec.GetOneOption(dhcpv6.OptionORO) != nil || dec.GetOneOption(dhcpv6.OptionElapsedTime) == nil {
		t.Errorf("DECLINE %v, want the server's and our IDs, the elapsed time and no option request", dec.Options)
	}
	if s := f.c.Stats(); s.State != "declining" {
		t.Errorf("state %q, want declining", s.State)
	}
	again := f.sent(dhcpv6.MessageTypeDecline, 2*time.Second)
	if again.TransactionID != dec.TransactionID {
		t.Errorf("retransmitted DECLINE with transaction %x, want %x", again.TransactionID, dec.TransactionID)
	}
	f.answer(again, dhcpv6.MessageTypeReply, &dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
	netnstest.WaitFor(t, 2*time.Second, "bound after the Decline's Reply", func() bool { return f.c.Stats().State == "bound" })
	if s := f.c.Stats(); s.Sent["DECLINE"] != 2 || s.Received["REPLY"] != 2 {
		t.Errorf("stats %+v, want 2 DECLINEs and 2 REPLYs", s)
	}
	select {
	case c := <-f.changes:
		t.Errorf("the Decline's Reply changed the lease: %+v -> %+v", c.old, c.new)
	default:
	}
}

// TestDeclineWhileRenewing: a Decline during another exchange takes the
// address out at once and is sent once the client is bound; the Renew's
// Reply that still carries the address does not bring it back.
func TestDeclineWhileRenewing(t *testing.T) {
	f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56, Address: true})
	sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
	short := shortT1
	f.answer(sol, dhcpv6.MessageTypeAdvertise, dhcpv6.OptPreference(255), iapd(iana.StatusSuccess), ianaOpt(iana.StatusSuccess))
	req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
	f.answer(req, dhcpv6.MessageTypeReply, short(iapd(iana.StatusSuccess)), short(ianaOpt(iana.StatusSuccess)))
	f.change(2 * time.Second)
	ren := f.sent(dhcpv6.MessageTypeRenew, 3*time.Second)
	f.c.Decline(naAddr)
	if ch := f.change(2 * time.Second); len(ch.new.Addrs) != 0 {
		t.Fatalf("after Decline while renewing: %+v, want the address gone", ch.new)
	}
	f.answer(ren, dhcpv6.MessageTypeReply, short(iapd(iana.StatusSuccess)), short(ianaOpt(iana.StatusSuccess)))
	dec := f.sent(dhcpv6.MessageTypeDecline, 2*time.Second)
	if cur := f.c.Current(); cur == nil || len(cur.Addrs) != 0 || len(cur.Prefixes) != 1 {
		t.Errorf("after the Renew's Reply with the declined address: %+v, want the prefix only", cur)
	}
	f.answer(dec, dhcpv6.MessageTypeReply)
	netnstest.WaitFor(t, 2*time.Second, "bound after the Decline's Reply", func() bool { return f.c.Stats().State == "bound" })
	if diff := cmp.Diff([]netip.Addr(nil), leaseAddrs(f.c.Current()), addrCmp); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

// TestRequestSentOnce: the REQUEST that an Advertise starts is sent once,
// with its Elapsed Time option (RFC 8415 21.9: in every message of an
// exchange), and not again before its first retransmission time (REQ_TIMEOUT
// 1 s, less at most 10 %). It used to go twice at once.
func TestRequestSentOnce(t *testing.T) {
	f := startFake(t, Config{Interface: "wan", MAC: boxMAC, PrefixLength: 56})
	sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
	f.answer(sol, dhcpv6.MessageTypeAdvertise, dhcpv6.OptPreference(255), iapd(iana.StatusSuccess))
	req := f.sent(dhcpv6.MessageTypeRequest, 2*time.Second)
	if req.GetOneOption(dhcpv6.OptionElapsedTime) == nil {
		t.Errorf("the first REQUEST has no Elapsed Time option: %v", req.Options)
	}
	select {
	case m := <-f.link.out:
		t.Errorf("a second %s %v right after the first REQUEST, want none before its retransmission time", m.MessageType, m.Options)
	case <-time.After(800 * time.Millisecond):
	}
	if n := f.c.Stats().Sent["REQUEST"]; n != 1 {
		t.Errorf("REQUESTs sent: %d, want 1", n)
	}
}
