package dnsd

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// netns is the network namespace the server's sockets belong in, when it
// is not the process's own: New was called on a thread that entered
// another namespace (a test, or a supervisor placing the service). nil
// means the process's namespace.
type netns struct{ fd int }

// startNetns is the network namespace the process started in, read during
// package initialization, before any thread could have left it. (The main
// thread is no reference later: a goroutine that locks it and enters a
// namespace keeps it there for good.)
var startNetns struct {
	dev, ino uint64
	known    bool
}

func init() {
	var st unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &st) == nil {
		startNetns.dev, startNetns.ino, startNetns.known = st.Dev, st.Ino, true
	}
}

// captureNetns returns the calling thread's network namespace if it differs
// from the one the process started in.
func captureNetns() (*netns, error) {
	if !startNetns.known {
		return nil, nil // no /proc: no way to tell, nor to enter one
	}
	var thread unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &thread); err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	if thread.Dev == startNetns.dev && thread.Ino == startNetns.ino {
		return nil, nil
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	return &netns{fd: fd}, nil
}

// do runs f where sockets it creates land in the namespace: on a fresh
// thread that entered it (a socket keeps its namespace for life, so f's
// sockets may be used from any goroutine afterwards).
func (n *netns) do(f func() error) error {
	if n == nil {
		return f()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine instead of
		// going back to the scheduler inside another namespace.
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

func (n *netns) close() {
	if n != nil {
		unix.Close(n.fd)
	}
}

// listenConfig binds with IP_FREEBIND, so the server can start before the
// LAN address is configured and keeps its sockets when the address
// goes away and comes back.
func listenConfig() net.ListenConfig {
	return net.ListenConfig{Control: func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if strings.HasSuffix(network, "6") {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			}
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("freebind: %w", serr)
		}
		return nil
	}}
}
