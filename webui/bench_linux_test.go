package webui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// cpuTime is the process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingWriter counts what a client receives.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func frameLen(payload int) int64 {
	switch {
	case payload < 126:
		return int64(payload) + 2
	case payload <= 0xffff:
		return int64(payload) + 4
	}
	return int64(payload) + 10
}

// BenchmarkPublish100Clients measures one publishing round (one per second
// in production): one Snapshot, one encoding, fan-out to 100 WebSocket
// clients, until every client has the whole message. cpu-ms/publish is the
// process's CPU time per round, which includes the 100 in-process clients
// reading; cpu-%@1Hz is the same as a share of one core at 1 Hz.
func BenchmarkPublish100Clients(b *testing.B) {
	const clients = 100
	clock := time.Now()
	stats := newFakeStats()
	stats.now = func() time.Time { return clock }
	pw := writePassword(b, testPassword)
	s, err := New(Options{Stats: stats, Config: newFakeStore(), PasswordFiles: []string{pw}, CertFile: "-", KeyFile: "-", SendQueue: 4})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	b.Cleanup(srv.Close)
	ts := srv.URL
	var received [clients]atomic.Int64
	// The readers end when their connections close (the cleanups below,
	// which run before this one).
	var readers sync.WaitGroup
	b.Cleanup(readers.Wait)
	hdr := http.Header{}
	hdr.Set("Authorization", basicHeader(testPassword).Get("Authorization"))
	for i := range clients {
		c, _, err := websocket.DefaultDialer.Dial("ws"+ts[len("http"):]+"/api/stream", hdr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		readers.Go(func() { io.Copy(countingWriter{&received[i]}, c.NetConn()) })
	}
	for s.Clients() < clients {
		time.Sleep(time.Millisecond)
	}
	var want int64
	publish := func() {
		clock = clock.Add(time.Second)
		s.publish(clock)
		s.mu.Lock()
		want += frameLen(len(s.lastJSON))
		s.mu.Unlock()
		for i := range clients {
			for received[i].Load() < want {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	publish() // warm up: the first message
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		publish()
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	perOp := cpu.Seconds() / float64(b.N)
	b.ReportMetric(perOp*1000, "cpu-ms/publish")
	b.ReportMetric(perOp*100, "cpu-%@1Hz")
	s.mu.Lock()
	b.ReportMetric(float64(len(s.lastJSON)), "msg-bytes")
	s.mu.Unlock()
	if s.Clients() != clients {
		b.Fatalf("%d clients left, want %d", s.Clients(), clients)
	}
}

func BenchmarkFilterConns100k(b *testing.B) {
	conns := newFakeConntrack(100000).conns
	for _, bc := range []struct {
		name string
		q    ConnQuery
	}{
		{"first page by bytes", ConnQuery{Sort: SortBytes, Limit: 100}},
		{"filtered udp", ConnQuery{Proto: "udp", Sort: SortPackets, Limit: 100}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				FilterConns(conns, bc.q)
			}
		})
	}
}
