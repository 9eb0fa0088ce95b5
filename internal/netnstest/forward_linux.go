package netnstest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Dial connects to addr from inside the namespace (the socket stays
// there). It may be called from any goroutine: it dials on a goroutine of
// its own whose thread is discarded if it cannot be switched back.
func (ns *Namespace) Dial(network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once the thread is back
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netnstest: this thread's namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := setns(path(ns.name)); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("netnstest: entering %s: %w", ns.name, err)}
			return
		}
		c, err := net.Dial(network, addr)
		if berr := unix.Setns(orig, unix.CLONE_NEWNET); berr != nil {
			err = errors.Join(err, fmt.Errorf("netnstest: switching back from %s: %w", ns.name, berr))
		} else {
			runtime.UnlockOSThread()
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// Forward listens on a loopback port of the test's own namespace and
// relays every connection to addr inside ns (a browser on the machine can
// open a server of the namespace that way); it returns the listen address.
// At cleanup it closes the listener and the connections it relays.
func (ns *Namespace) Forward(t testing.TB, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("netnstest: forward listener: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		open  = map[net.Conn]bool{}
		ended bool
	)
	track := func(c net.Conn, on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if on && ended {
			return false
		}
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
		return true
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		ended = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(c, true) {
				c.Close()
				return
			}
			wg.Go(func() {
				defer track(c, false)
				ns.relay(c, addr, track)
			})
		}
	})
	return ln.Addr().String()
}

// relay copies between c and a new connection to addr inside ns; track
// registers that connection for Forward's cleanup.
func (ns *Namespace) relay(c net.Conn, addr string, track func(net.Conn, bool) bool) {
	defer c.Close()
	in, err := ns.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer in.Close()
	if !track(in, true) {
		return
	}
	defer track(in, false)
	done := make(chan struct{})
	go func() {
		io.Copy(in, c)
		in.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, in)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
