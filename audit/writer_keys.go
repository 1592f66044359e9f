// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"crypto/ed25519"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// keySet is the audit key and the checkpoint key a segment is written with.
type keySet struct {
	mac  []byte
	priv ed25519.PrivateKey
}

// setKeys makes ks the keys in use, with w.mu held (or before the writer is shared).
func (w *Writer) setKeys(ks keySet) {
	w.keys = ks
	w.mac = newMAC(ks.mac)
	w.keyID = KeyID(ks.priv.Public().(ed25519.PublicKey))
	w.macKeyID = MACKeyID(ks.mac)
	k := slices.Clone(ks.mac)
	w.digestKey.Store(&k)
}

// keys resolves the audit key and the checkpoint key from the options.
func (c *config) keys() ([]byte, ed25519.PrivateKey, error) {
	key, priv := c.key, c.ckptKey
	var err error
	switch {
	case key != nil:
		if len(key) != KeySize {
			return nil, nil, fmt.Errorf("audit: key of %d bytes, want %d", len(key), KeySize)
		}
	case c.keyPath() != "":
		if key, err = LoadOrCreateKey(c.keyPath()); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errors.New("audit: no audit key: give WithKey, WithKeyFile or WithStateDir")
	}
	switch {
	case priv != nil:
		if len(priv) != ed25519.PrivateKeySize {
			return nil, nil, errors.New("audit: invalid ed25519 checkpoint key")
		}
	case c.checkpointKeyPath() != "":
		if priv, err = LoadOrCreateCheckpointKey(c.checkpointKeyPath()); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, errors.New("audit: no checkpoint key: give WithCheckpointKey, WithCheckpointKeyFile or WithStateDir")
	}
	return key, priv, nil
}

// fileKeys reads the key files again, for Reopen: exactly the keys named by files, nil for a
// key given directly. A key file that is missing or cannot be read is an error.
func (c *config) fileKeys() (keySet, error) {
	var (
		ks  keySet
		err error
	)
	if p := c.keyPath(); p != "" {
		if ks.mac, err = LoadKey(p); err != nil {
			return keySet{}, err
		}
	}
	if p := c.checkpointKeyPath(); p != "" {
		if ks.priv, err = LoadCheckpointKey(p); err != nil {
			return keySet{}, err
		}
	}
	return ks, nil
}

// Reopen closes the current segment as a rotation does (a final checkpoint, then fsync) and
// starts a new one in the log directory that continues the chain: after logrotate or a log
// shipper moved the segment away, the writer goes on in a fresh file. The broker calls it on
// SIGHUP. It is safe to call concurrently with Append; each call starts a new segment.
//
// Reopen also reads the key files again (those of [WithKeyFile], [WithCheckpointKeyFile] or
// [WithStateDir]; keys given directly do not change). A changed key is a key rotation: a
// key_rotation record naming the new key's id is appended to the current segment under the old
// keys, and the new segment is chained (and its checkpoints signed) under the new ones. A new
// checkpoint key is published as checkpoint.pub, the old public key kept beside it as
// checkpoint.pub.<keyid> so that earlier checkpoints still verify ([LoadPublishedKeys]). A key
// file that cannot be read, or a checkpoint key that cannot be published, leaves the keys in
// use as they were (the error says why); the segment is reopened all the same.
//
// If the new segment cannot be started, the error wraps [ErrUnavailable], and Append fails
// closed until it can be.
func (w *Writer) Reopen() error {
	w.reopenMu.Lock()
	defer w.reopenMu.Unlock()
	next, kerr := w.cfg.fileKeys() // file reads outside w.mu
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	var errs []error
	if kerr != nil {
		errs = append(errs, fmt.Errorf("audit: reopen: keys not reloaded: %w", kerr))
	} else if err := w.rotateKeys(next); err != nil {
		errs = append(errs, err)
	}
	w.reopen = true
	if err := w.rotate(); err != nil {
		w.failures.Add(1)
		errs = append(errs, fmt.Errorf("%w: reopen: %w", ErrUnavailable, err))
	}
	return errors.Join(errs...)
}

// rotateKeys starts a rotation to the keys next read from files, with w.mu held: for each key
// that changed, it appends a key_rotation record naming the new key's id and makes the keys
// pending, for the next segment.
func (w *Writer) rotateKeys(next keySet) error {
	cur := w.keys
	if w.pending != nil {
		cur = *w.pending
	}
	to := cur
	rec := Record{Kind: KindKeyRotation}
	var changed []string
	var perr error
	if next.mac != nil && !hmac.Equal(next.mac, cur.mac) {
		to.mac, rec.MACKeyID = next.mac, MACKeyID(next.mac)
		changed = append(changed, "audit key "+MACKeyID(cur.mac)+" to "+rec.MACKeyID)
	}
	if next.priv != nil && !next.priv.Equal(cur.priv) {
		pub, old := next.priv.Public().(ed25519.PublicKey), cur.priv.Public().(ed25519.PublicKey)
		if err := publishKey(w.dir, pub, old); err != nil {
			perr = fmt.Errorf("audit: reopen: checkpoint key not rotated: %w", err)
		} else {
			to.priv, rec.KeyID = next.priv, KeyID(pub)
			changed = append(changed, "checkpoint key "+KeyID(old)+" to "+rec.KeyID)
		}
	}
	if len(changed) == 0 {
		return perr
	}
	rec.Detail = "rotated on reopen: " + strings.Join(changed, ", ")
	if err := w.ready(); err != nil {
		w.failures.Add(1)
		return errors.Join(perr, fmt.Errorf("%w: reopen: key rotation not recorded: %w", ErrUnavailable, err))
	}
	if err := w.write(&rec); err != nil {
		w.failures.Add(1)
		return errors.Join(perr, fmt.Errorf("%w: reopen: key rotation not recorded: %w", ErrUnavailable, err))
	}
	w.pending = &to
	return perr
}
