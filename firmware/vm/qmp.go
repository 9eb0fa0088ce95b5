package vm

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"sync"
	"time"
)

// events follows QEMU's QMP socket and keeps when the guest's watchdog
// fired: the console shows nothing of it (the firmware starts again).
type events struct {
	mu       sync.Mutex
	start    time.Time
	watchdog []time.Duration // since QEMU started
}

// follow connects to the QMP socket at path (QEMU creates it at start;
// it is retried until QEMU has exited) and reads its events until QEMU
// exits.
func (e *events) follow(path string, exited <-chan struct{}) {
	var c net.Conn
	for {
		var err error
		if c, err = net.DialTimeout("unix", path, time.Second); err == nil {
			break
		}
		select {
		case <-exited:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer c.Close()
	// QEMU's exit closes the socket; closing it here as well ends a read
	// that a QEMU which never answered would leave waiting.
	stop, closer := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closer)
		select {
		case <-exited:
			c.Close()
		case <-stop:
		}
	}()
	e.read(c, c)
	close(stop)
	<-closer
}

// read takes QMP's greeting, leaves its capabilities negotiation mode (the
// events flow only then) and records the events that follow.
func (e *events) read(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() { // the greeting
		return
	}
	if _, err := io.WriteString(w, `{"execute":"qmp_capabilities"}`+"\n"); err != nil {
		return
	}
	for sc.Scan() {
		var m struct {
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Event == "WATCHDOG" {
			e.mu.Lock()
			e.watchdog = append(e.watchdog, time.Since(e.start))
			e.mu.Unlock()
		}
	}
}

// WatchdogFired lists when the guest's watchdog fired (QEMU's WATCHDOG
// event), in host time since QEMU started.
func (v *VM) WatchdogFired() []time.Duration {
	v.events.mu.Lock()
	defer v.events.mu.Unlock()
	return append([]time.Duration(nil), v.events.watchdog...)
}
