package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// PathDigestPrefix begins every path digest ([PathDigest]).
const PathDigestPrefix = "hmac-sha256:"

// pathDigestLabel derives the path digest subkey from the audit key.
const pathDigestLabel = "fsbroker audit path digest v1"

// PathDigest returns the digest that stands for path in a record when paths are redacted
// (audit.redactPaths): "hmac-sha256:" followed by the hex HMAC-SHA256 of path under a subkey,
// itself HMAC-SHA256(key, "fsbroker audit path digest v1"). The subkey keeps the chain key out
// of every digest: publishing digests, or the subkey, reveals nothing that could forge a MAC.
//
// What is hashed is exactly the bytes of path, with no normalization of any kind (no cleaning,
// case folding, Unicode normalization or symlink resolution): the broker passes the canonical
// absolute path it decided on, so a digest to look for must be computed from that same string.
// The same key and path always give the same digest; without the key a digest cannot be
// reversed or checked against a guessed path.
func PathDigest(key []byte, path string) string {
	sub := hmac.New(sha256.New, key)
	sub.Write([]byte(pathDigestLabel))
	h := hmac.New(sha256.New, sub.Sum(nil))
	h.Write([]byte(path))
	return PathDigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// IsPathDigest reports whether s has the form of a path digest: [PathDigestPrefix] followed by
// 64 lower-case hex digits.
func IsPathDigest(s string) bool {
	hexPart, ok := strings.CutPrefix(s, PathDigestPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
