// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
)

// KeySize is the size of the audit (HMAC-SHA256) key in bytes.
const KeySize = 32

// PublicKeyFile is the name of the checkpoint public key written beside the log.
const PublicKeyFile = "checkpoint.pub"

// Default key file names in the state directory ([WithStateDir]).
const (
	DefaultKeyFile           = "audit.key"
	DefaultCheckpointKeyFile = "audit-checkpoint.key"
)

// ErrKeyPermissions is returned, wrapped, for a private key file that group or others may
// access (on unix, any mode bit in 0o077).
var ErrKeyPermissions = errors.New("audit: key file is accessible to group or others")

// LoadKey reads an audit key file: exactly [KeySize] raw bytes, mode 0600 or stricter.
func LoadKey(path string) ([]byte, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	if len(data) != KeySize {
		return nil, fmt.Errorf("audit: key file %s holds %d bytes, want %d", path, len(data), KeySize)
	}
	return data, nil
}

// LoadOrCreateKey reads the audit key file at path, or creates it (mode 0600, [KeySize] random
// bytes) when it does not exist. Two processes racing to create it end up with the same key.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := LoadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("audit: generate key: %w", err)
	}
	if err := createExclusive(path, key); err != nil {
		return nil, err
	}
	return LoadKey(path)
}

// LoadCheckpointKey reads an ed25519 private key file (PEM, PKCS #8), mode 0600 or stricter.
func LoadCheckpointKey(path string) (ed25519.PrivateKey, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("audit: %s is not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: parse %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: %s is not an ed25519 key", path)
	}
	return priv, nil
}

// LoadOrCreateCheckpointKey reads the ed25519 checkpoint key file at path, or creates it (mode
// 0600) with a new key when it does not exist.
func LoadOrCreateCheckpointKey(path string) (ed25519.PrivateKey, error) {
	priv, err := LoadCheckpointKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return priv, err
	}
	_, priv, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("audit: generate checkpoint key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("audit: encode checkpoint key: %w", err)
	}
	if err := createExclusive(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		return nil, err
	}
	return LoadCheckpointKey(path)
}

// LoadPublicKey reads a checkpoint public key file (PEM, PKIX), such as <dir>/checkpoint.pub.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: read public key: %w", err)
	}
	pub, err := parsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("audit: %s: %w", path, err)
	}
	return pub, nil
}

// LoadPublishedKeys reads the checkpoint public keys published in a log directory:
// checkpoint.pub, and the keys a rotation retired, each kept as checkpoint.pub.<keyid> (see
// [Writer.Reopen]), so that the checkpoints signed before the rotation still verify. Like
// checkpoint.pub itself, they are only as trustworthy as the directory. A retired key file
// whose name does not match its key's id is an error.
func LoadPublishedKeys(dir string) ([]ed25519.PublicKey, error) {
	pub, err := LoadPublicKey(filepath.Join(dir, PublicKeyFile))
	if err != nil {
		return nil, err
	}
	keys := []ed25519.PublicKey{pub}
	retired, err := filepath.Glob(filepath.Join(dir, PublicKeyFile+".*"))
	if err != nil {
		return nil, fmt.Errorf("audit: list public keys: %w", err)
	}
	slices.Sort(retired)
	for _, p := range retired {
		id := strings.TrimPrefix(filepath.Base(p), PublicKeyFile+".")
		if !isKeyID(id) {
			continue // not a retired key: a temporary file, a backup, ...
		}
		k, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		if KeyID(k) != id {
			return nil, fmt.Errorf("audit: %s holds key %s", p, KeyID(k))
		}
		if !slices.ContainsFunc(keys, func(o ed25519.PublicKey) bool { return o.Equal(k) }) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// parsePublicKey parses a PEM PKIX ed25519 public key.
func parsePublicKey(data []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an ed25519 key")
	}
	return pub, nil
}

// isKeyID reports whether s has the form of a key id: 16 lower-case hex digits.
func isKeyID(s string) bool { return len(s) == 16 && isLowerHex(s) }

// publishKey writes <dir>/checkpoint.pub unless it already holds pub. Another key there is an
// error, unless this is a deliberate rotation from the key retire: retire is then kept as
// checkpoint.pub.<keyid>, and checkpoint.pub is replaced if it holds retire or a key retired
// before (another writer of the directory may have rotated first).
func publishKey(dir string, pub, retire ed25519.PublicKey) error {
	data, err := encodePublicKey(pub)
	if err != nil {
		return err
	}
	if retire != nil && !retire.Equal(pub) {
		if err := keepRetired(dir, retire); err != nil {
			return err
		}
	}
	p := filepath.Join(dir, PublicKeyFile)
	old, err := os.ReadFile(p)
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err == nil && retire == nil:
		return fmt.Errorf("audit: %s holds another checkpoint key", p)
	case err == nil:
		cur, perr := parsePublicKey(old)
		if perr != nil || !isRetired(dir, cur) {
			return fmt.Errorf("audit: %s holds another checkpoint key, neither this writer's nor a retired one (%s.<keyid>)", p, PublicKeyFile)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("audit: read public key: %w", err)
	}
	return writePublic(p, data)
}

// retiredKeyPath is where a retired checkpoint public key is kept.
func retiredKeyPath(dir string, pub ed25519.PublicKey) string {
	return filepath.Join(dir, PublicKeyFile+"."+KeyID(pub))
}

// keepRetired writes checkpoint.pub.<keyid> for pub unless it holds pub already.
func keepRetired(dir string, pub ed25519.PublicKey) error {
	if isRetired(dir, pub) {
		return nil
	}
	data, err := encodePublicKey(pub)
	if err != nil {
		return err
	}
	return writePublic(retiredKeyPath(dir, pub), data)
}

// isRetired reports whether checkpoint.pub.<keyid> holds pub.
func isRetired(dir string, pub ed25519.PublicKey) bool {
	k, err := LoadPublicKey(retiredKeyPath(dir, pub))
	return err == nil && k.Equal(pub)
}

// writePublic replaces the public key file path with data, mode 0644, atomically and durably.
func writePublic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("audit: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// encodePublicKey encodes pub as a PEM PKIX public key.
func encodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("audit: encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// KeyID identifies a checkpoint public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// MACKeyID identifies an audit key without revealing it: the first 8 bytes of
// HMAC-SHA256(key, "fsbroker audit key id"), in hex.
func MACKeyID(key []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("fsbroker audit key id"))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// readPrivate reads a private key file after checking its permissions.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: open key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: stat key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("audit: key file %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o, want 0600", ErrKeyPermissions, path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("audit: read key file: %w", err)
	}
	return data, nil
}

// createExclusive creates path with data and mode 0600 unless it exists (atomicfile.Create:
// written whole, then linked into place, so no reader ever sees a partial key). An existing
// file is not an error (another process won the race).
func createExclusive(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("audit: create key directory: %w", err)
	}
	if err := atomicfile.Create(path, data, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("audit: install key file: %w", err)
	}
	return nil
}
