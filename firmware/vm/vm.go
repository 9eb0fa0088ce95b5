// Package vm boots an e1kbox image in QEMU with emulated e1000e NICs.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OVMF firmware files from Debian's ovmf package.
const (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// Options describe one VM.
type Options struct {
	Image string // disk image; used in place (it is the box's disk)
	UEFI  bool   // boot with OVMF instead of SeaBIOS
	// HTTPPort and DashboardPort are the host ports (on 127.0.0.1)
	// forwarded to the guest's gokrazy UI (80) and dashboard (8080).
	// 0 picks a free port.
	HTTPPort, DashboardPort int
	GuestHTTPPort           int // default 80
	GuestDashboardPort      int // default 8080
	// DataTaps names the host tap devices for eth1 and eth2. An empty name
	// leaves that port on a restricted user network (no traffic).
	DataTaps [2]string
	MemoryMB int    // default 1024
	CPUs     int    // default 2
	StateDir string // for OVMF vars; default: next to the image
	// Console receives the serial console (and is kept in a tail buffer).
	Console io.Writer
}

// VM is a running QEMU.
type VM struct {
	Opts    Options
	cmd     *exec.Cmd
	tail    *tailBuffer
	done    chan struct{}
	waitErr error
}

// Start launches QEMU.
func Start(ctx context.Context, opts Options) (*VM, error) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, errors.New("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
	}
	if opts.MemoryMB == 0 {
		opts.MemoryMB = 1024
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	if opts.GuestHTTPPort == 0 {
		opts.GuestHTTPPort = 80
	}
	if opts.GuestDashboardPort == 0 {
		opts.GuestDashboardPort = 8080
	}
	for _, p := range []*int{&opts.HTTPPort, &opts.DashboardPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
	}
	if _, err := os.Stat(opts.Image); err != nil {
		return nil, fmt.Errorf("disk image: %w", err)
	}
	args := []string{
		"-name", "e1kbox",
		"-machine", "pc", "-accel", "tcg", "-cpu", "max",
		"-smp", strconv.Itoa(opts.CPUs), "-m", strconv.Itoa(opts.MemoryMB),
		"-display", "none", "-monitor", "none", "-serial", "stdio",
		"-drive", "file=" + opts.Image + ",format=raw,if=ide,index=0,media=disk,cache=unsafe",
		"-netdev", fmt.Sprintf("user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:%d-:%d,hostfwd=tcp:127.0.0.1:%d-:%d",
			opts.HTTPPort, opts.GuestHTTPPort, opts.DashboardPort, opts.GuestDashboardPort),
		"-device", "e1000e,netdev=mgmt,mac=52:54:00:e1:00:00",
	}
	for i, tap := range opts.DataTaps {
		id := fmt.Sprintf("data%d", i+1)
		if tap != "" {
			args = append(args, "-netdev", "tap,id="+id+",ifname="+tap+",script=no,downscript=no")
		} else {
			args = append(args, "-netdev", "user,id="+id+",restrict=on")
		}
		args = append(args, "-device", fmt.Sprintf("e1000e,netdev=%s,mac=52:54:00:e1:00:%02x", id, i+1))
	}
	if opts.UEFI {
		if _, err := os.Stat(OVMFCode); err != nil {
			return nil, errors.New("OVMF not found (apt-get install ovmf)")
		}
		dir := opts.StateDir
		if dir == "" {
			dir = filepath.Dir(opts.Image)
		}
		vars := filepath.Join(dir, filepath.Base(opts.Image)+".ovmf-vars.fd")
		if _, err := os.Stat(vars); err != nil {
			b, err := os.ReadFile(OVMFVars)
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(vars, b, 0o644); err != nil {
				return nil, err
			}
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	v := &VM{Opts: opts, cmd: cmd, tail: &tailBuffer{max: 512 << 10}, done: make(chan struct{})}
	var out io.Writer = v.tail
	if opts.Console != nil {
		out = io.MultiWriter(v.tail, opts.Console)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	go func() {
		v.waitErr = cmd.Wait()
		close(v.done)
	}()
	return v, nil
}

// HTTPAddr is the host address of the guest's gokrazy UI.
func (v *VM) HTTPAddr() string { return fmt.Sprintf("127.0.0.1:%d", v.Opts.HTTPPort) }

// DashboardAddr is the host address of the guest's dashboard.
func (v *VM) DashboardAddr() string { return fmt.Sprintf("127.0.0.1:%d", v.Opts.DashboardPort) }

// Done is closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Err is QEMU's exit error once Done is closed.
func (v *VM) Err() error { return v.waitErr }

// Kill stops QEMU at once, like pulling the power cord.
func (v *VM) Kill() {
	if v.cmd.Process != nil {
		v.cmd.Process.Kill()
	}
	<-v.done
}

// Console returns the last part of the serial console.
func (v *VM) Console() string { return v.tail.String() }

// ConsoleContains reports whether the retained console output contains s.
func (v *VM) ConsoleContains(s string) bool { return strings.Contains(v.tail.String(), s) }

// FreePort returns a currently unused TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, nil))
}
