package router

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"e1kbox/appliance/atomicfile"
)

// slaacSecretFile keeps RFC 7217's secret in the state directory, beside
// the DHCPv6 DUID: the WAN's SLAAC addresses stay the same across
// restarts.
const slaacSecretFile = "slaac-secret"

// slaacSecret reads the secret kept in dir, making and keeping a random
// 32-byte one first when there is none; when it cannot be kept, it is
// used for this run only (and the addresses change at the next start).
func slaacSecret(dir string, log *slog.Logger) []byte {
	path := filepath.Join(dir, slaacSecretFile)
	if b, err := os.ReadFile(path); err == nil {
		if s, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(s) >= 16 {
			return s
		}
		log.Warn("IPv6: the SLAAC secret file is not usable; making a new one", "file", path)
	}
	s := make([]byte, 32)
	rand.Read(s)
	if err := atomicfile.Write(path, []byte(hex.EncodeToString(s)+"\n"), 0o600); err != nil {
		log.Warn("IPv6: the SLAAC secret is not kept: the WAN's SLAAC addresses change at the next start", "file", path, "err", err)
	}
	return s
}
