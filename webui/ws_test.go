package webui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func wsURL(f *fixture, query string) string {
	u := "ws" + strings.TrimPrefix(f.ts.URL, "http") + "/api/stream"
	if query != "" {
		u += "?" + query
	}
	return u
}

func basicHeader(pw string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(User+":"+pw)))
	return h
}

// dial opens the stream with Basic credentials and extra headers.
func dial(t *testing.T, f *fixture, query string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	c, res, err := websocket.DefaultDialer.Dial(wsURL(f, query), hdr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, res, err
}

func readStats(t *testing.T, c *websocket.Conn, timeout time.Duration) (StatsMessage, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("message type %d, want text", typ)
	}
	var m StatsMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("message does not follow the schema: %v\n%s", err, b)
	}
	return m, b
}

func TestStreamSchema(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Interval = 50 * time.Millisecond })
	c, _, err := dial(t, f, "", basicHeader(testPassword))
	if err != nil {
		t.Fatal(err)
	}
	readStats(t, c, 2*time.Second) // the newest message, sent on connect
	m, raw := readStats(t, c, 2*time.Second)

	// The documented members, with their JSON types.
	var generic map[string]any
	json.Unmarshal(raw, &generic)
	wantTypes := map[string]string{
		"type": "string", "seq": "number", "time": "string", "interval_s": "number",
		"ports": "array", "drops": "array", "cpus": "array", "irqs": "array",
		"worker_restarts": "number", "conntrack": "object", "fast_path": "object", "config": "object",
		"alarms": "array", "router": "null",
	}
	for k, typ := range wantTypes {
		if got := jsonType(generic[k]); got != typ {
			t.Errorf("member %q is %s, want %s", k, got, typ)
		}
	}
	if len(generic) != len(wantTypes) {
		t.Errorf("message has %d members, want %d: %s", len(generic), len(wantTypes), raw)
	}
	port := generic["ports"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "iface", "up", "speed_mbps", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "ring_drops", "rx_pps", "tx_pps", "rx_bps", "tx_bps"} {
		if _, ok := port[k]; !ok {
			t.Errorf("port has no %q: %v", k, port)
		}
	}
	if m.Type != "stats" || m.Seq < 2 || m.Interval <= 0 {
		t.Errorf("message %+v", m)
	}
	if len(m.Ports) != 3 || m.Ports[0].Name != "port1" || m.Ports[0].Interface != "eth1" || !m.Ports[0].Up || m.Ports[0].RxPPS <= 0 || math.Abs(m.Ports[0].RxBPS-8*600*m.Ports[0].RxPPS) > 1 {
		t.Errorf("ports %+v", m.Ports)
	}
	if len(m.CPUs) != 2 || m.CPUs[1].Busy < 0.79 || m.CPUs[1].Busy > 0.81 {
		t.Errorf("cpus %+v, want cpu1 80%% busy", m.CPUs)
	}
	if m.Config == nil || m.Config.Version.ID != "v1" || m.Config.Pending != nil {
		t.Errorf("config %+v", m.Config)
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return "?"
}

func TestStreamOneHertz(t *testing.T) {
	f := newFixture(t, nil) // the default interval
	c, _, err := dial(t, f, "", basicHeader(testPassword))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := readStats(t, c, 3*time.Second)
	prev := first
	for range 3 {
		m, _ := readStats(t, c, 3*time.Second)
		if m.Seq != prev.Seq+1 {
			t.Errorf("seq %d after %d", m.Seq, prev.Seq)
		}
		// Samples are taken on the ticker: 1 s apart, give or take the
		// scheduling of a busy test machine.
		if d := m.Time.Sub(prev.Time); d < 750*time.Millisecond || d > 1250*time.Millisecond {
			t.Errorf("samples %v apart, want 1 s", d)
		}
		if m.Interval < 0.75 || m.Interval > 1.25 {
			t.Errorf("interval_s %v, want about 1", m.Interval)
		}
		prev = m
	}
}

// TestStuckClient: a client that never reads is dropped; a good client
// keeps receiving every message meanwhile.
func TestStuckClient(t *testing.T) {
	stats := newFakeStats()
	stats.extra = 2000 // about 120 kB per message, to fill the socket buffers fast
	f := newFixture(t, func(o *Options) {
		o.Stats = stats
		// The good client's slack is the queue (16 messages, 320 ms) and
		// the write timeout: enough for a reader on a loaded 2-core
		// machine (a queue of 2, 40 ms, dropped it there now and then).
		// The stuck client fills its socket buffers and then the queue.
		o.Interval = 20 * time.Millisecond
		o.SendQueue = 16
		o.WriteTimeout = 2 * time.Second
	})

	// The stuck client: a WebSocket handshake by hand, then nothing read.
	raw, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := "GET /api/stream HTTP/1.1\r\nHost: " + f.ts.Listener.Addr().String() + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
		"Authorization: " + basicHeader(testPassword).Get("Authorization") + "\r\n\r\n"
	if _, err := raw.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	good, _, err := dial(t, f, "", basicHeader(testPassword))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for f.srv.Clients() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := f.srv.Clients(); n != 2 {
		t.Fatalf("%d clients connected, want 2", n)
	}

	var last uint64
	received := 0
	for f.srv.Clients() > 1 || f.srv.hub.dropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stuck client not dropped after %d messages to the good one", received)
		}
		m, _ := readStats(t, good, 2*time.Second)
		if last != 0 && m.Seq != last+1 {
			t.Errorf("good client: seq %d after %d", m.Seq, last)
		}
		last = m.Seq
		received++
	}
	// The good client goes on receiving after the drop.
	for range 10 {
		m, _ := readStats(t, good, 2*time.Second)
		if m.Seq != last+1 {
			t.Errorf("good client after the drop: seq %d after %d", m.Seq, last)
		}
		last = m.Seq
	}
	if n := f.srv.Clients(); n != 1 {
		t.Errorf("%d clients, want 1", n)
	}
	// The stuck client's connection was closed by the server: reading
	// drains what was buffered and then ends.
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<16)
	for {
		if _, err := raw.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Error("stuck client's connection is still open")
			}
			break
		}
	}
}

func TestStreamAuthAndOrigin(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.TrustedOrigins = []string{"https://proxy.example"} })
	ticket := func() string {
		var a map[string]string
		f.doJSON("GET", "/api/stream/ticket", nil, http.StatusOK, &a)
		return a["ticket"]
	}
	same := "http://" + f.ts.Listener.Addr().String()
	tk := ticket()
	tests := []struct {
		name   string
		query  string
		pw     string // "" for no Authorization
		origin string
		want   int
	}{
		{name: "no credentials", want: http.StatusUnauthorized},
		{name: "wrong password", pw: "nope", want: http.StatusUnauthorized},
		{name: "bad ticket", query: "ticket=00112233445566778899aabbccddeeff", want: http.StatusUnauthorized},
		{name: "foreign origin", pw: testPassword, origin: "http://evil.example", want: http.StatusForbidden},
		{name: "foreign origin with ticket", query: "ticket=" + ticket(), origin: "http://evil.example", want: http.StatusForbidden},
		{name: "same origin", pw: testPassword, origin: same, want: http.StatusSwitchingProtocols},
		{name: "trusted origin", pw: testPassword, origin: "https://proxy.example", want: http.StatusSwitchingProtocols},
		{name: "no origin (not a browser)", pw: testPassword, want: http.StatusSwitchingProtocols},
		{name: "ticket", query: "ticket=" + tk, origin: same, want: http.StatusSwitchingProtocols},
		{name: "ticket used twice", query: "ticket=" + tk, origin: same, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{}
			if tt.pw != "" {
				hdr = basicHeader(tt.pw)
			}
			if tt.origin != "" {
				hdr.Set("Origin", tt.origin)
			}
			c, res, err := dial(t, f, tt.query, hdr)
			if res == nil {
				t.Fatalf("no response: %v", err)
			}
			if res.StatusCode != tt.want {
				t.Fatalf("status %d, want %d (%v)", res.StatusCode, tt.want, err)
			}
			if tt.want == http.StatusSwitchingProtocols {
				readStats(t, c, 3*time.Second)
			}
		})
	}
}

func TestTickets(t *testing.T) {
	tk := newTickets(30 * time.Second)
	now := time.Unix(1000, 0)
	a, b := tk.issue(now), tk.issue(now)
	if a == b || len(a) != 32 {
		t.Fatalf("tickets %q %q", a, b)
	}
	if tk.redeem(a, now.Add(31*time.Second)) {
		t.Error("expired ticket accepted")
	}
	if tk.redeem(a, now) {
		t.Error("ticket accepted after a failed (expired) use")
	}
	if !tk.redeem(b, now.Add(29*time.Second)) {
		t.Error("valid ticket refused")
	}
	if tk.redeem(b, now) || tk.redeem("", now) {
		t.Error("ticket accepted twice or empty ticket accepted")
	}
	for range 2 * maxTickets {
		tk.issue(now)
	}
	if n := len(tk.live); n > maxTickets {
		t.Errorf("%d live tickets, want at most %d", n, maxTickets)
	}
}
