package vm

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Monitor runs one command on QEMU's human monitor and returns its output.
func (v *VM) Monitor(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", v.monitor, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("qemu monitor: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := readPrompt(c); err != nil { // the banner
		return "", fmt.Errorf("qemu monitor banner: %w", err)
	}
	if _, err := c.Write([]byte(cmd + "\n")); err != nil {
		return "", fmt.Errorf("qemu monitor %q: %w", cmd, err)
	}
	out, err := readPrompt(c)
	if err != nil {
		return out, fmt.Errorf("qemu monitor %q: %w", cmd, err)
	}
	return out, nil
}

const prompt = "(qemu) "

// readPrompt reads up to the monitor's next prompt, without it and without
// the terminal escapes the monitor echoes the command with.
func readPrompt(c net.Conn) (string, error) {
	var buf bytes.Buffer
	b := make([]byte, 4096)
	for !bytes.HasSuffix(buf.Bytes(), []byte(prompt)) {
		n, err := c.Read(b)
		buf.Write(b[:n])
		if err != nil {
			return buf.String(), err
		}
		if buf.Len() > 1<<20 {
			return buf.String(), errors.New("monitor answer over 1 MiB")
		}
	}
	out := strings.TrimSuffix(buf.String(), prompt)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "\x1b") {
			lines = append(lines, strings.TrimRight(l, "\r"))
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), nil
}

// HangReport is what a test prints for a box that stopped answering: where
// each vCPU is, twice a second apart (a guest spinning in one place reads
// the same RIP; an idle one sits in HLT), the kernel's own view from magic
// SysRq on the serial console (all CPUs' backtraces, blocked tasks), which
// lands in the console a test saves, and the user networks' connections.
func (v *VM) HangReport() string {
	var s strings.Builder
	for i := range 2 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		out, err := v.Monitor("info registers -a")
		if err != nil {
			fmt.Fprintf(&s, "%v\n", err)
			continue
		}
		fmt.Fprintf(&s, "vCPU instruction pointers (%d): %s\n", i+1, strings.Join(ripLines(out), "; "))
	}
	for _, k := range []string{"alt-sysrq-l", "alt-sysrq-w"} {
		if _, err := v.Monitor("sendkey " + k); err != nil {
			fmt.Fprintf(&s, "%v\n", err)
		}
	}
	if st, err := v.Monitor("info status"); err == nil {
		fmt.Fprintf(&s, "qemu: %s\n", st)
	}
	// QEMU's user networks as their slirp sees them: a forwarded
	// connection stuck in SYN_SENT is a guest that does not answer on
	// eth0; ESTABLISHED with a growing RecvQ or SendQ, one whose program
	// does not read, or QEMU not delivering.
	if un, err := v.Monitor("info usernet"); err == nil {
		fmt.Fprintf(&s, "%s\n", un)
	}
	return s.String()
}

// ripLines picks the RIP and halted state of each CPU from info registers.
func ripLines(regs string) []string {
	var out []string
	for _, l := range strings.Split(regs, "\n") {
		if strings.HasPrefix(l, "RIP=") || strings.HasPrefix(l, "CPU#") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}
