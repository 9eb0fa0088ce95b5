package tuning

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeKmsg returns one queued record (or error) per Read, like /dev/kmsg,
// and blocks when empty until Close.
type fakeKmsg struct {
	items  chan any // string or error
	closed chan struct{}
	once   sync.Once
}

func newFakeKmsg(items ...any) *fakeKmsg {
	k := &fakeKmsg{items: make(chan any, len(items)), closed: make(chan struct{})}
	for _, it := range items {
		k.items <- it
	}
	return k
}

func (k *fakeKmsg) Read(p []byte) (int, error) {
	select {
	case it := <-k.items:
		if err, ok := it.(error); ok {
			return 0, err
		}
		return copy(p, it.(string)), nil
	case <-k.closed:
		return 0, errors.New("read /dev/kmsg: file already closed")
	}
}

func (k *fakeKmsg) Close() error {
	k.once.Do(func() { close(k.closed) })
	return nil
}

func TestWatchHangs(t *testing.T) {
	f := newFakeSys(t)
	eth1 := f.e1000e("eth1", 27)
	eth2 := f.e1000e("eth2", 30)
	tu := f.tuner()
	kmsg := newFakeKmsg(
		"6,1,100,-;e1000e 0000:00:04.0 eth1: NIC Link is Up 1000 Mbps Full Duplex\n",
		"11,2,200,-;e1000e 0000:00:04.0 eth1: Detected Hardware Unit Hang:\n", // user space (facility 1): ignored
		"3,3,300,-;e1000e 0000:00:05.0 eth2: Detected Hardware Unit Hang:\n",  // not watched
		"3,4,400,-;e1000e 0000:00:04.0 eth1: Detected Hardware Unit Hang:\\x0a  TDH <2b>\n SUBSYSTEM=pci\n",
		&osPathError{syscall.EPIPE}, // records lost: keep reading
		"garbage without a header",
		"3,6,600,-;e1000e 0000:00:04.0 eth1: Detected Hardware Unit Hang:\n",
	)
	var mu sync.Mutex
	var got []Report
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- tu.WatchHangs(ctx, kmsg, []string{"eth1"}, func(r Report) {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
		})
	}()
	// Stop and join the watcher: below, or here when the test fails first.
	var watchErr error
	stop := sync.OnceFunc(func() { cancel(); watchErr = <-done })
	t.Cleanup(stop)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if watchErr != nil {
		t.Fatalf("WatchHangs = %v, want nil after cancel", watchErr)
	}
	want := []brief{
		{"hang-mitigation", "eth1", "changed", ""},
		{"tx-tcp-segmentation", "eth1", "changed", "off"},
		{"tx-tcp6-segmentation", "eth1", "changed", "off"},
		{"tx-generic-segmentation", "eth1", "changed", "off"},
		{"hang-mitigation", "eth1", "ok", ""},
		{"tx-tcp-segmentation", "eth1", "ok", "off"},
		{"tx-tcp6-segmentation", "eth1", "ok", "off"},
		{"tx-generic-segmentation", "eth1", "ok", "off"},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Fatalf("(-want +got):\n%s\n%s", diff, reportLines(got))
	}
	if got[0].Message != "kernel: Detected Hardware Unit Hang; turned off tx-tcp-segmentation, tx-tcp6-segmentation, tx-generic-segmentation (known e1000e mitigation)" {
		t.Errorf("message %q", got[0].Message)
	}
	if eth1.features["tx-tcp-segmentation"].active || eth1.features["tx-generic-segmentation"].active {
		t.Errorf("eth1 still has segmentation offloads on")
	}
	if !eth2.features["tx-tcp-segmentation"].active {
		t.Errorf("eth2 was not watched but lost TSO")
	}
}

type osPathError struct{ err error }

func (e *osPathError) Error() string { return "read /dev/kmsg: " + e.err.Error() }
func (e *osPathError) Unwrap() error { return e.err }

func TestWatchHangsEndsOnEOFAndErrors(t *testing.T) {
	f := newFakeSys(t)
	tu := f.tuner()
	if err := tu.WatchHangs(context.Background(), newFakeKmsg(io.EOF), nil, func(Report) {}); err != nil {
		t.Errorf("EOF: %v, want nil", err)
	}
	if err := tu.WatchHangs(context.Background(), newFakeKmsg(&osPathError{syscall.EIO}), nil, func(Report) {}); !errors.Is(err, syscall.EIO) {
		t.Errorf("EIO: %v, want it wrapped", err)
	}
}

func TestMitigateHangUnknownPort(t *testing.T) {
	f := newFakeSys(t)
	got := f.tuner().MitigateHang("eth9")
	if len(got) != 1 || got[0].Status != StatusError || got[0].Knob != "hang-mitigation" {
		t.Errorf("MitigateHang(eth9) = %v, want one error", got)
	}
}
