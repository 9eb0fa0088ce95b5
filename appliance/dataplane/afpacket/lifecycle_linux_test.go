package afpacket

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCloseUnblocksReader: Close wakes a goroutine blocked in NextBlock
// without a timeout, and the socket refuses use afterwards.
func TestCloseUnblocksReader(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	errc, _ := background(t, s, func(<-chan struct{}) error {
		b, err := s.NextBlock(-1)
		if b != nil {
			err = fmt.Errorf("NextBlock returned a block (%d frames) on an idle port", b.Len())
		}
		return err
	})
	time.Sleep(50 * time.Millisecond) // let it block in poll
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("NextBlock returned %v, want ErrClosed", err)
		}
		t.Logf("reader woke %v after Close", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("NextBlock still blocked 2s after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.NextBlock(0); !errors.Is(err, ErrClosed) {
		t.Errorf("NextBlock after Close: %v, want ErrClosed", err)
	}
	if s.Append(testFrame(macB, macA, 9, 0, 60)) {
		t.Error("Append after Close = true")
	}
	if s.fd != -1 || s.mem != nil {
		t.Errorf("after Close fd=%d mapped=%v, want released", s.fd, s.mem != nil)
	}
}

// TestWake: Wake ends a wait without a block, once (the next wait runs
// to its timeout), and a Close after it still ends the next wait with
// ErrClosed.
func TestWake(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	type result struct {
		b   *Block
		err error
		d   time.Duration
	}
	wait := func(timeout time.Duration) chan result {
		c := make(chan result, 1)
		background(t, s, func(<-chan struct{}) error {
			start := time.Now()
			b, err := s.NextBlock(timeout)
			c <- result{b, err, time.Since(start)}
			return nil
		})
		return c
	}
	c := wait(10 * time.Second)
	time.Sleep(50 * time.Millisecond) // let it park
	if err := s.Wake(); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	select {
	case r := <-c:
		if r.b != nil || r.err != nil {
			t.Fatalf("NextBlock after Wake = %v, %v; want no block, no error", r.b, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("NextBlock still waiting 2 s after Wake")
	}
	// The wake was taken: the next wait runs to its timeout.
	if r := <-wait(200 * time.Millisecond); r.b != nil || r.err != nil || r.d < 150*time.Millisecond {
		t.Errorf("NextBlock(200ms) after a taken Wake = %v, %v after %v; want its timeout", r.b, r.err, r.d)
	}
	// Woken and closed before the next wait: Close wins.
	if err := s.Wake(); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := <-wait(time.Second); !errors.Is(r.err, ErrClosed) {
		t.Errorf("NextBlock after Wake and Close = %v, want ErrClosed", r.err)
	}
	if err := s.Wake(); !errors.Is(err, ErrClosed) {
		t.Errorf("Wake after Close = %v, want ErrClosed", err)
	}
}

// TestCloseWhileBlockHeld: the mapping survives Close until the holder
// releases its block.
func TestCloseWhileBlockHeld(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	peer := v.plain(t, vethA)
	peer.send(t, testFrame(macB, macA, 10, 0, 100))
	var b *Block
	deadline := time.Now().Add(5 * time.Second)
	for b == nil && time.Now().Before(deadline) {
		var err error
		if b, err = s.NextBlock(50 * time.Millisecond); err != nil {
			t.Fatalf("NextBlock: %v", err)
		}
	}
	if b == nil {
		t.Fatal("no block")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.mem == nil {
		t.Fatal("ring unmapped while a block is held")
	}
	var p Packet
	if !b.Next(&p) || len(p.Data) == 0 {
		t.Fatal("held block unreadable after Close")
	}
	s.ReleaseBlock()
	if s.mem != nil || s.fd != -1 {
		t.Error("ring still mapped after the held block was released")
	}
}

func TestOpenErrors(t *testing.T) {
	requireNetAdmin(t)
	if _, err := Open("afpt-no-such-if", Config{}); err == nil {
		t.Error("Open(missing interface) succeeded")
	}
	v := newVeth(t, 1500)
	var err error
	v.ns.Do(t, func() { _, err = Open(vethA, Config{BlockSize: 1000}) })
	if !errors.Is(err, ErrConfig) {
		t.Errorf("Open with a 1000-byte block: %v, want ErrConfig", err)
	}
	s := v.open(t, vethA, Config{NoTX: true})
	if s.Append(testFrame(macB, macA, 0, 0, 60)) {
		t.Error("Append on an RX-only socket = true")
	}
	if err := s.Flush(); !errors.Is(err, ErrNoRing) {
		t.Errorf("Flush on an RX-only socket: %v, want ErrNoRing", err)
	}
	s2 := v.open(t, vethA, Config{NoRX: true})
	if _, err := s2.NextBlock(0); !errors.Is(err, ErrNoRing) {
		t.Errorf("NextBlock on a TX-only socket: %v, want ErrNoRing", err)
	}
}

// TestLinkDown: taking the interface down wakes the reader with ENETDOWN.
func TestLinkDown(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{})
	errc, _ := background(t, s, func(<-chan struct{}) error {
		_, err := s.NextBlock(5 * time.Second)
		return err
	})
	time.Sleep(50 * time.Millisecond)
	v.ns.IP(t, "link", "set", vethB, "down")
	if err := <-errc; !errors.Is(err, unix.ENETDOWN) {
		t.Fatalf("NextBlock after link down: %v, want ENETDOWN", err)
	}
}
