package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/internal/netnstest"
)

// The server behind the ISP: srv6 on a 1500-byte link that the ISP routes
// to, so a TCP connection between it and h1 starts with an MSS of 1440 on
// both sides and only path MTU discovery fits it through the box's
// 1400-byte WAN. The same server answers at srv6Far too, which the ISP
// routes with a locked MTU of 1280 (a narrower hop beyond the WAN: the
// forwarding kernel honours a route's MTU only when it is locked):
//
//	srv (srv6/64 and srv6Far, MTU 1500) ── isp (2001:db8:65::fe) ── (MTU 1400) ── box ── h1 (MTU 1500)
const (
	srv6    = "2001:db8:65::1"
	srv6Far = "2001:db8:66::1"
)

// bulkSize is the size of the HTTP transfers with the server.
const bulkSize = 1 << 20

// bulkData is what the server's GET /bulk answers: pseudo-random, so a
// lost, repeated or reordered segment changes its hash.
var bulkData = func() []byte {
	b := make([]byte, bulkSize)
	rand.NewChaCha8([32]byte{'e', '1', 'k'}).Read(b)
	return b
}()

// server adds the namespace srv behind the ISP with an HTTP server for
// bulk transfers (serveBulk) on port 8080 and an iperf3 server on 5201.
// The box's WAN link keeps its 1400 bytes; the ISP sends the server its
// own packets too big, and h1 those to srv6Far larger than 1280 bytes.
func (l *v6Lab) server(t *testing.T) *netnstest.Namespace {
	t.Helper()
	srv := netnstest.New(t, "ipv6-s")
	srv.IP(t, "link", "set", "lo", "up")
	srv.Sysctl(t, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.isp, Name: "srv0", Off: noOff, Addrs: []string{"2001:db8:65::fe/64"}, Up: true},
		netnstest.End{NS: srv, Name: "eth0", Off: noOff, Addrs: []string{srv6 + "/64"}, Up: true})
	srv.IP(t, "-6", "addr", "add", srv6Far+"/128", "dev", "lo")
	srv.IP(t, "-6", "route", "add", "default", "via", "2001:db8:65::fe", "dev", "eth0")
	l.isp.IP(t, "-6", "route", "add", srv6Far+"/128", "via", srv6, "dev", "srv0", "mtu", "lock", "1280")
	serveBulk(t, srv, "[::]:8080")
	iperf3Server(t, srv, 5201)
	return srv
}

// serveBulk serves bulk transfers on addr inside ns: GET /bulk answers
// bulkData; POST /bulk answers "N HASH from ADDR": the number of bytes
// received, their SHA-256 in hex and the client's address.
func serveBulk(t *testing.T, ns *netnstest.Namespace, addr string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bulk", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "bulk", time.Time{}, bytes.NewReader(bulkData))
	})
	mux.HandleFunc("POST /bulk", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x from %s", n, h.Sum(nil), r.RemoteAddr)
	})
	serveIn(t, ns, addr, mux)
}

// pmtud moves data both ways between h1 (at addr) and the server behind
// the ISP with curl and iperf3. Before each transfer both ends forget
// what they learnt of the path, so each must discover it again: an upload
// by the box's packet too big to h1 (route6's too_big count rises, h1's
// route to the server shows mtu 1400), a download by the ISP's to the
// server (its route to h1 shows mtu 1400). An upload to srv6Far finds the
// 1400 bytes from the box, then 1280 from the ISP's packet too big, which
// the box's firewall passes in as related to h1's connection. Nothing on
// the path clamps the MSS: without the discovery the first full-sized
// segments would never arrive and the transfers would stall.
func (l *v6Lab) pmtud(t *testing.T, srv *netnstest.Namespace, addr netip.Addr) {
	t.Helper()
	h := l.hosts[0]
	dir := t.TempDir()
	upload := filepath.Join(dir, "upload")
	if err := os.WriteFile(upload, bulkData, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(bulkData))
	curl := func(server string, args ...string) (string, error) {
		return h.Output(append([]string{"curl", "-6", "-sS", "--max-time", "10", "--interface", addr.String()},
			append(args, "http://["+server+"]:8080/bulk")...)...)
	}
	get := func(server string) func() (string, error) {
		return func() (string, error) {
			got := filepath.Join(dir, "download")
			if out, err := curl(server, "-o", got); err != nil {
				return "", fmt.Errorf("%w: %s", err, out)
			}
			b, err := os.ReadFile(got)
			if err != nil {
				return "", err
			}
			if s := fmt.Sprintf("%x", sha256.Sum256(b)); len(b) != bulkSize || s != sum {
				return "", fmt.Errorf("downloaded %d bytes with SHA-256 %s, want %d bytes with %s", len(b), s, bulkSize, sum)
			}
			return "the object's SHA-256", nil
		}
	}
	post := func(server string) func() (string, error) {
		return func() (string, error) {
			out, err := curl(server, "-H", "Content-Type: application/octet-stream", "--data-binary", "@"+upload)
			if want := fmt.Sprintf("%d %s from [%v]:", bulkSize, sum, addr); err != nil || !strings.HasPrefix(out, want) {
				return "", fmt.Errorf("the server answered %q (%v), want %q…", out, err, want)
			}
			return "the server's SHA-256", nil
		}
	}
	// Over 2 s at least 2 MB: 8 Mbit/s, far below what the box forwards
	// even on a loaded machine, far above what a stalled connection that
	// retransmits after timeouts gets through.
	const iperfFloor = 2e6
	iperf := func(args ...string) func() (string, error) {
		return func() (string, error) {
			r, err := iperf3(h, append([]string{"-6", "-c", srv6, "-B", addr.String(), "-t", "2"}, args...)...)
			if err != nil {
				return "", err
			}
			if got := r.End.SumReceived.Bytes; got < iperfFloor {
				return "", fmt.Errorf("%.0f bytes received, want at least %.0f", got, iperfFloor)
			}
			return fmt.Sprintf("%.0f bytes received, %.1f Mbit/s, %d retransmits",
				r.End.SumReceived.Bytes, r.End.SumReceived.BitsPerSecond/1e6, r.End.SumSent.Retransmits), nil
		}
	}
	for _, tc := range []struct {
		name   string
		server string
		up     bool // h1 sends the big segments (else the server)
		mtu    int  // the path MTU the sender learns
		run    func() (string, error)
	}{
		{"curl GET 1 MiB", srv6, false, 1400, get(srv6)},
		{"curl POST 1 MiB", srv6, true, 1400, post(srv6)},
		{"curl POST 1 MiB past a 1280-byte hop", srv6Far, true, 1280, post(srv6Far)},
		{"iperf3 upload", srv6, true, 1400, iperf()},
		{"iperf3 -R download", srv6, false, 1400, iperf("-R")},
	} {
		sender, receiver, dst := h, srv, tc.server
		if !tc.up {
			sender, receiver, dst = srv, h, addr.String()
		}
		for _, ns := range []*netnstest.Namespace{sender, receiver} {
			ns.IP(t, "-6", "route", "flush", "cache")
		}
		if out := sender.IP(t, "-6", "route", "get", dst); strings.Contains(out, " mtu ") {
			t.Fatalf("%s: the sender's route to %s still has a path MTU after the flush: %q", tc.name, dst, out)
		}
		before := l.stats(t)
		start := time.Now()
		res, err := tc.run()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		took := time.Since(start)
		if out := sender.IP(t, "-6", "route", "get", dst); !strings.Contains(out, fmt.Sprintf(" mtu %d ", tc.mtu)) {
			t.Errorf("%s: the sender's route to %s after the transfer: %q, want mtu %d", tc.name, dst, out, tc.mtu)
		}
		after := l.stats(t)
		tooBig := tooBigCount(after) - tooBigCount(before)
		if tc.up && tooBig == 0 {
			t.Errorf("%s: the box's too_big count stayed at %d: h1 never sent it a segment larger than the WAN's 1400 bytes",
				tc.name, tooBigCount(before))
		}
		t.Logf("%s in %.1f s: %s; the box's packets too big %d, the fast path's MTU punts %d",
			tc.name, took.Seconds(), res, tooBig, mtuPunts(after)-mtuPunts(before))
	}
}

// tooBigCount is route6's too_big count in s: the packets the box
// answered with packet too big (or dropped past the ICMPv6 rate).
func tooBigCount(s dataplane.Snapshot) uint64 {
	if s.IPv6 == nil {
		return 0
	}
	return s.IPv6.Drops["too_big"]
}

// mtuPunts is the fast path's count in s of the frames it left to the
// slow path as too big.
func mtuPunts(s dataplane.Snapshot) uint64 {
	if s.FastPath == nil {
		return 0
	}
	return s.FastPath.Punts["mtu"]
}

// udp6 sends iperf3 UDP from h1 (at addr) to the server behind the ISP
// and back (-R: the server's datagrams come in from the WAN as replies of
// the connection h1 opened) at 50 Mbit/s for 1 s each, in datagrams that
// fit the 1400-byte WAN. iperf3 sizes them by its control connection's
// MSS, 1428 bytes while the path is unknown: the first one gets the box's
// packet too big and the next send fails with EMSGSIZE (a connected UDP
// socket reports it), and a sender that fragmented instead would have its
// fragments dropped (route6's fragment policy). At least half of what was
// sent must arrive.
func (l *v6Lab) udp6(t *testing.T, addr netip.Addr) {
	t.Helper()
	const (
		mbits = 50   // Mbit/s
		size  = 1200 // payload bytes: IPv6 packets of 1248
		secs  = 1
	)
	want := float64(mbits * 1e6 * secs / 8 / size / 2)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"upload", nil},
		{"-R download", []string{"-R"}},
	} {
		args := append([]string{"-6", "-c", srv6, "-B", addr.String(), "-u", "-b", strconv.Itoa(mbits) + "M", "-l", strconv.Itoa(size), "-t", strconv.Itoa(secs)}, tc.args...)
		start := time.Now()
		r, err := iperf3(l.hosts[0], args...)
		if err != nil {
			t.Errorf("iperf3 UDP %s: %v", tc.name, err)
			continue
		}
		s := r.End.Sum
		if got := s.Packets - s.LostPackets; got < want {
			t.Errorf("iperf3 UDP %s: %.0f of %.0f datagrams arrived, want at least %.0f", tc.name, got, s.Packets, want)
		}
		t.Logf("iperf3 UDP %s in %.1f s: %.0f datagrams, %.2f%% lost", tc.name, time.Since(start).Seconds(), s.Packets, s.LostPercent)
	}
}
