package webui

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeCert writes a self-signed certificate and key for 127.0.0.1.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "e1kbox"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "gokrazy-web.pem"), filepath.Join(dir, "gokrazy-web.key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

func TestServeTLS(t *testing.T) {
	cert, key := writeCert(t)
	pw := writePassword(t, testPassword)
	s, err := New(Options{PasswordFiles: []string{pw}, CertFile: cert, KeyFile: key, Stats: newFakeStats(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !s.TLS() {
		t.Fatal("TLS() = false with certificate files present")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serveErr error
	served := make(chan struct{})
	go func() { defer close(served); serveErr = s.Serve(ctx, ln) }()
	// Stopped and joined below, or here when the test fails first.
	t.Cleanup(func() { cancel(); <-served })

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest("GET", "https://"+ln.Addr().String()+"/api/system", nil)
	req.SetBasicAuth(User, testPassword)
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.TLS == nil {
		t.Errorf("status %d, TLS %v", res.StatusCode, res.TLS != nil)
	}
	plain, err := http.Get("http://" + ln.Addr().String() + "/")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS port")
		}
	}
	cancel()
	select {
	case <-served:
		if serveErr != nil {
			t.Errorf("Serve: %v", serveErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestTLSFiles(t *testing.T) {
	cert, key := writeCert(t)
	pw := writePassword(t, testPassword)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	tests := []struct {
		name      string
		cert, key string
		wantTLS   bool
		wantErr   bool
	}{
		{name: "both", cert: cert, key: key, wantTLS: true},
		{name: "none", cert: missing, key: missing + "2"},
		{name: "disabled", cert: "-", key: "-"},
		{name: "key missing", cert: cert, key: missing, wantErr: true},
		{name: "garbage", cert: garbage, key: key, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Options{PasswordFiles: []string{pw}, CertFile: tt.cert, KeyFile: tt.key})
			if (err != nil) != tt.wantErr {
				t.Fatalf("New: %v, want error %v", err, tt.wantErr)
			}
			if err == nil && s.TLS() != tt.wantTLS {
				t.Errorf("TLS() = %v, want %v", s.TLS(), tt.wantTLS)
			}
		})
	}
}

func TestRunOnce(t *testing.T) {
	f := startFixture(t, nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.srv.Run(ctx); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if err := f.srv.Run(ctx); err == nil {
		t.Error("second Run did not fail")
	}
	// Run published once before it saw the cancelled context.
	f.doJSON("GET", "/api/stats", nil, http.StatusOK, nil)
}

func TestBuildMessage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := &Snapshot{
		Time: t0,
		Ports: []PortStats{
			{Name: "a", RxPackets: 100, RxBytes: 10000, TxPackets: 50, TxBytes: 5000},
			{Name: "b", RxPackets: 1000, TxPackets: 1000},
		},
		Drops:    []DropStat{{Reason: "ring", Packets: 10}, {Reason: "rules", Packets: 5}},
		CPUs:     []CPUStat{{CPU: 0, BusySeconds: 10, IdleSeconds: 90}, {CPU: 1, BusySeconds: 5, IdleSeconds: 5}},
		IRQs:     []IRQStat{{IRQ: 40, Name: "eth1-rx-0", Count: 1000}},
		FastPath: &FastPathSummary{Mode: "tcx", Flows: 3, Packets: 500},
	}
	cur := &Snapshot{
		Time: t0.Add(2 * time.Second),
		Ports: []PortStats{
			{Name: "b", RxPackets: 10, TxPackets: 1100}, // counters reset (restart)
			{Name: "a", RxPackets: 300, RxBytes: 30000, TxPackets: 60, TxBytes: 6000},
			{Name: "new", RxPackets: 7},
		},
		Drops:    []DropStat{{Reason: "rules", Packets: 9}, {Reason: "malformed", Packets: 3}},
		CPUs:     []CPUStat{{CPU: 0, BusySeconds: 11.5, IdleSeconds: 90.5}, {CPU: 1, BusySeconds: 5, IdleSeconds: 5}},
		IRQs:     []IRQStat{{IRQ: 40, Name: "eth1-rx-0", Count: 3000}, {IRQ: 41, Name: "eth1-tx-0", Count: 5}},
		FastPath: &FastPathSummary{Mode: "tcx", Flows: 4, Packets: 2500},
	}
	got := buildMessage(7, prev, cur)
	want := StatsMessage{
		Type: "stats", Seq: 7, Time: cur.Time, Interval: 2,
		Ports: []PortRates{
			{PortStats: cur.Ports[0], RxPPS: 0, TxPPS: 50},
			{PortStats: cur.Ports[1], RxPPS: 100, TxPPS: 5, RxBPS: 80000, TxBPS: 4000},
			{PortStats: cur.Ports[2]},
		},
		Drops:    []DropRates{{DropStat: cur.Drops[0], PerSecond: 2}, {DropStat: cur.Drops[1]}},
		CPUs:     []CPURates{{CPU: 0, Busy: 0.75}, {CPU: 1, Busy: 0}},
		IRQs:     []IRQRates{{IRQStat: cur.IRQs[0], PerSecond: 1000}, {IRQStat: cur.IRQs[1]}},
		FastPath: &FastPathRates{FastPathSummary: *cur.FastPath, PerSecond: 1000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buildMessage (-want +got):\n%s", diff)
	}
	first := buildMessage(1, nil, cur)
	if first.Interval != 0 || first.Ports[1].RxPPS != 0 || first.IRQs[0].PerSecond != 0 {
		t.Errorf("first message has rates: %+v", first)
	}
	// Time going backwards gives no rates rather than negative ones.
	back := buildMessage(2, cur, prev)
	if back.Interval != 0 || back.Ports[0].RxPPS != 0 {
		t.Errorf("backwards message %+v", back)
	}
}

func TestOriginChecker(t *testing.T) {
	oc, err := newOriginChecker([]string{"https://proxy.example:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newOriginChecker([]string{"not a url"}); err == nil {
		t.Error("bad trusted origin accepted")
	}
	tests := []struct {
		name     string
		method   string
		headers  map[string]string
		mutation bool // checkMutation passes
		ws       bool // checkWebSocket passes
	}{
		{name: "curl", headers: map[string]string{CSRFHeader: "1"}, mutation: true, ws: true},
		{name: "curl without header", headers: map[string]string{}, mutation: false, ws: true},
		{name: "same origin", headers: map[string]string{CSRFHeader: "1", "Origin": "http://box:8080"}, mutation: true, ws: true},
		{name: "other port", headers: map[string]string{CSRFHeader: "1", "Origin": "http://box:8081"}, mutation: false, ws: false},
		{name: "trusted", headers: map[string]string{CSRFHeader: "1", "Origin": "https://proxy.example:8443"}, mutation: true, ws: true},
		{name: "trusted host, other scheme", headers: map[string]string{CSRFHeader: "1", "Origin": "http://proxy.example:8443"}, mutation: false, ws: false},
		{name: "foreign", headers: map[string]string{CSRFHeader: "1", "Origin": "http://evil"}, mutation: false, ws: false},
		{name: "foreign referer", headers: map[string]string{CSRFHeader: "1", "Referer": "http://evil/x"}, mutation: false, ws: true},
		{name: "cross-site fetch", headers: map[string]string{CSRFHeader: "1", "Sec-Fetch-Site": "cross-site"}, mutation: false, ws: true},
		{name: "garbage origin", headers: map[string]string{CSRFHeader: "1", "Origin": "::"}, mutation: false, ws: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "http://box:8080/api/config/apply", nil)
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			if err := oc.checkMutation(r); (err == nil) != tt.mutation {
				t.Errorf("checkMutation: %v, want pass %v", err, tt.mutation)
			}
			if got := oc.checkWebSocket(r); got != tt.ws {
				t.Errorf("checkWebSocket = %v, want %v", got, tt.ws)
			}
		})
	}
}
