// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// argumentsDigestLabel derives the arguments digest subkey from the audit key.
const argumentsDigestLabel = "fsbroker audit arguments digest v1"

// ArgumentsDigest returns the digest that stands for a forwarded request's arguments in a
// forward record: [PathDigestPrefix] followed by the hex HMAC-SHA256, under a subkey
// HMAC-SHA256(key, "fsbroker audit arguments digest v1"), of the arguments in canonical form
// ([CanonicalJSON]), so that the same arguments give the same digest whatever their member
// order or white space. The subkey is not the path digests' and not the chain key: a digest
// reveals nothing that could forge a MAC or match a path digest. Without the key a digest
// cannot be reversed or checked against guessed arguments. It fails only for args that are not
// one JSON value.
func ArgumentsDigest(key []byte, args []byte) (string, error) {
	canonical, err := CanonicalJSON(args)
	if err != nil {
		return "", err
	}
	sub := hmac.New(sha256.New, key)
	sub.Write([]byte(argumentsDigestLabel))
	h := hmac.New(sha256.New, sub.Sum(nil))
	h.Write(canonical)
	return PathDigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// CanonicalJSON returns doc (one JSON value) re-encoded with no white space, the members of
// every object sorted by name, numbers as written and strings escaped as encoding/json escapes
// them without HTML escaping. It fails for anything that is not one JSON value.
func CanonicalJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("audit: canonical JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("audit: canonical JSON: more than one value")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps are encoded with sorted keys
		return nil, fmt.Errorf("audit: canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
