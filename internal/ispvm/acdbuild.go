package ispvm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// acdBuild holds the acd command (the kernel-mode access concentrator,
// ./acd), built once per process: static (CGO_ENABLED=0) for the VM.
var acdBuild struct {
	once sync.Once
	bin  []byte
	err  error
}

// acdBinary returns the acd command built from this package's acd
// directory with the go command (go test puts GOROOT/bin first on PATH).
func acdBinary() ([]byte, error) {
	acdBuild.once.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			acdBuild.err = fmt.Errorf("ispvm: cannot locate the acd source")
			return
		}
		tmp, err := os.MkdirTemp("", "ispvm-acd-")
		if err != nil {
			acdBuild.err = fmt.Errorf("ispvm: building acd: %w", err)
			return
		}
		defer os.RemoveAll(tmp)
		out := filepath.Join(tmp, "acd")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
		cmd.Dir = filepath.Join(filepath.Dir(file), "acd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		var msg bytes.Buffer
		cmd.Stdout, cmd.Stderr = &msg, &msg
		if err := cmd.Run(); err != nil {
			acdBuild.err = fmt.Errorf("ispvm: building acd: %v: %s", err, msg.String())
			return
		}
		acdBuild.bin, acdBuild.err = os.ReadFile(out)
	})
	return acdBuild.bin, acdBuild.err
}

// addACD adds the acd command to a run's archive.
func addACD(w *cpioWriter) error {
	bin, err := acdBinary()
	if err != nil {
		return err
	}
	w.File("usr/sbin/acd", 0o755, bin)
	return nil
}
