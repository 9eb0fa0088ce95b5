package timesync

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// behaviour is how a fakeServer answers.
type behaviour struct {
	offset    time.Duration   // the server's time is the real time plus offset
	jitter    []time.Duration // added to offset, one per answer in turn
	stratum   uint8           // 0 means 2
	leap      uint8           // leap indicator
	kiss      string          // answer a kiss of death with this code
	silent    bool            // answer nothing
	staleRef  bool            // reference time two days old
	rootDelay time.Duration
	rootDisp  time.Duration
}

// fakeServer is a small NTPv4 server on a UDP socket: it answers client
// requests with the time and header fields its behaviour says.
type fakeServer struct {
	conn     *net.UDPConn
	b        atomic.Pointer[behaviour]
	requests atomic.Int64
	done     chan struct{}
}

// newFakeServer serves on 127.0.0.1.
func newFakeServer(t testing.TB, b behaviour) *fakeServer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, conn, b)
}

// serveFake serves on conn until the test ends.
func serveFake(t testing.TB, conn *net.UDPConn, b behaviour) *fakeServer {
	s := &fakeServer{conn: conn, done: make(chan struct{})}
	s.set(b)
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		<-s.done
	})
	return s
}

func (s *fakeServer) addr() string { return s.conn.LocalAddr().String() }

func (s *fakeServer) set(b behaviour) { s.b.Store(&b) }

func (s *fakeServer) serve() {
	defer close(s.done)
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		i := s.requests.Add(1) - 1
		b := s.b.Load()
		if n < 48 || buf[0]&7 != 3 || b.silent { // mode 3: client
			continue
		}
		s.conn.WriteToUDPAddrPort(b.reply(buf[:n], int(i)), from)
	}
}

// reply builds the answer to the i-th request req.
func (b *behaviour) reply(req []byte, i int) []byte {
	now := time.Now().Add(b.offset)
	if len(b.jitter) > 0 {
		now = now.Add(b.jitter[i%len(b.jitter)])
	}
	p := make([]byte, 48)
	stratum, refID := b.stratum, []byte{127, 0, 0, 1}
	if stratum == 0 {
		stratum = 2
	}
	if b.kiss != "" {
		stratum, refID = 0, []byte(b.kiss)
	}
	p[0] = b.leap<<6 | 4<<3 | 4 // version 4, mode 4: server
	p[1] = stratum
	p[2] = 6    // poll 2^6 s
	p[3] = 0xec // precision 2^-20 s
	binary.BigEndian.PutUint32(p[4:], ntpShort(b.rootDelay))
	binary.BigEndian.PutUint32(p[8:], ntpShort(b.rootDisp))
	copy(p[12:16], refID)
	ref := now.Add(-time.Second)
	if b.staleRef {
		ref = now.Add(-48 * time.Hour)
	}
	binary.BigEndian.PutUint64(p[16:], ntpTime(ref))
	copy(p[24:32], req[40:48]) // origin: the client's transmit time stamp
	binary.BigEndian.PutUint64(p[32:], ntpTime(now))
	binary.BigEndian.PutUint64(p[40:], ntpTime(now.Add(time.Microsecond)))
	return p
}

// ntpTime is t as an NTP time stamp: seconds since 1900 and a binary
// fraction, 32 bits each.
func ntpTime(t time.Time) uint64 {
	const ntpEpochOffset = 2208988800 // 1900 to 1970
	secs := uint64(t.Unix()+ntpEpochOffset) & 0xffffffff
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return secs<<32 | frac
}

// ntpShort is d in NTP's 16.16 short format.
func ntpShort(d time.Duration) uint32 {
	return uint32(d * (1 << 16) / time.Second)
}

// fakeClock is the clock under test: the real clock shifted by the
// corrections it was given. A slew is applied at once (the kernel would
// take |offset|/500 ppm).
type fakeClock struct {
	mu       sync.Mutex
	shift    time.Duration
	actions  []action
	marks    int
	setError error
}

// action is one correction the clock was given.
type action struct {
	Step   bool // else a slew
	Offset time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.shift)
}

func (c *fakeClock) Step(d time.Duration) error { return c.correct(action{Step: true, Offset: d}) }

func (c *fakeClock) Slew(d time.Duration) error { return c.correct(action{Offset: d}) }

func (c *fakeClock) correct(a action) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.setError != nil {
		return c.setError
	}
	c.actions = append(c.actions, a)
	c.shift += a.Offset
	return nil
}

func (c *fakeClock) MarkSynced(maxError, estError time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if maxError < 0 || estError < 0 {
		return errors.New("fakeClock: MarkSynced with a negative error bound")
	}
	c.marks++
	return nil
}

// drift moves the clock by d, as a drifting oscillator would.
func (c *fakeClock) drift(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shift += d
}

// record returns the corrections so far and how often the clock was marked
// synchronized.
func (c *fakeClock) record() ([]action, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]action(nil), c.actions...), c.marks
}

// approx compares durations to within 20 ms: loopback RTTs are tiny, but
// the test's goroutines are scheduled at will.
var approx = cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() <= 20*time.Millisecond })

// testLogger logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
