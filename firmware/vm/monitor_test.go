package vm

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// monitorSays is a connection to a monitor that writes out and hangs up.
// The writer stops (its peer closed) and is joined when the test ends,
// also when readPrompt returned before reading all of out.
func monitorSays(t *testing.T, out string) net.Conn {
	c, peer := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		peer.Write([]byte(out))
		peer.Close()
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return c
}

func TestReadPrompt(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"banner", "QEMU 7.2.22 monitor - type 'help' for more information\r\n(qemu) ", "QEMU 7.2.22 monitor - type 'help' for more information"},
		{"echoed command dropped", "i\x1b[K\x1b[Dinfo status\x1b[K\r\nVM status: running\r\n(qemu) ", "VM status: running"},
		{"empty answer", "\x1b[Dsendkey alt-sysrq-l\r\n(qemu) ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPrompt(monitorSays(t, tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("no prompt", func(t *testing.T) {
		if _, err := readPrompt(monitorSays(t, "half an answer")); err == nil {
			t.Error("no error for an answer without a prompt")
		}
	})
}

func TestRIPLines(t *testing.T) {
	regs := "CPU#0\r\nRAX=0000000000000000 RBX=0000000000000000\nRIP=ffffffff8f998adf RFL=00000202 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=1\nCPU#1\nRIP=ffffffff8f998adf RFL=00000206 [-----P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\n"
	want := []string{
		"CPU#0",
		"RIP=ffffffff8f998adf RFL=00000202 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=1",
		"CPU#1",
		"RIP=ffffffff8f998adf RFL=00000206 [-----P-] CPL=0 II=0 A20=1 SMM=0 HLT=1",
	}
	if diff := cmp.Diff(want, ripLines(regs)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzReadPrompt(f *testing.F) {
	f.Add("banner\r\n(qemu) ")
	f.Add("\x1b[Dinfo usernet\r\nHub -1 (mgmt):\r\n(qemu) ")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := readPrompt(monitorSays(t, in))
		if err == nil && strings.Contains(out, "\x1b") {
			t.Errorf("escape left in %q", out)
		}
	})
}
