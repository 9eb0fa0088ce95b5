package config

import (
	"fmt"
	"strconv"
	"strings"
)

// versionSecretPrefix and versionSecretSuffix frame VersionSecret.
const (
	versionSecretPrefix = "(the password of version "
	versionSecretSuffix = ")"
)

// VersionSecret stands for the secret (the PPPoE password) stored in
// version id of the config, in what the API shows of that version: a
// restore of the version puts its own password back, not the running
// one (RedactedSecret).
func VersionSecret(id uint64) string {
	return versionSecretPrefix + strconv.FormatUint(id, 10) + versionSecretSuffix
}

// SecretVersion reports the version whose secret s stands for, when s is
// a VersionSecret.
func SecretVersion(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, versionSecretPrefix)
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, versionSecretSuffix)
	if !ok || rest == "" || rest[0] == '+' || rest[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}

// placeholderError says why a secret that is still a placeholder cannot
// be applied, or "".
func placeholderError(s string) string {
	if s == RedactedSecret {
		return fmt.Sprintf("%q stands for the stored password, and there is none: enter the password", RedactedSecret)
	}
	if id, ok := SecretVersion(s); ok {
		return fmt.Sprintf("%q stands for the password of version %d, which is no longer stored: enter the password", s, id)
	}
	return ""
}
