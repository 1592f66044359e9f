// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testKeys are one audit key and one checkpoint key.
type testKeys struct {
	mac  []byte
	priv ed25519.PrivateKey
}

// newTestKeys makes fresh random keys.
func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	mac := make([]byte, KeySize)
	if _, err := rand.Read(mac); err != nil {
		t.Fatal(err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{mac: mac, priv: priv}
}

// verifyKeys returns the keys Verify needs.
func (k testKeys) verifyKeys() VerifyKeys {
	return VerifyKeys{MAC: [][]byte{k.mac}, Checkpoint: []ed25519.PublicKey{k.priv.Public().(ed25519.PublicKey)}}
}

// open starts a writer with the keys given directly and time-based checkpoints out of the way,
// so that tests see only count-based ones.
func (k testKeys) open(t testing.TB, dir string, opts ...Option) *Writer {
	t.Helper()
	all := append([]Option{
		WithKey(k.mac), WithCheckpointKey(k.priv), WithCheckpointInterval(time.Hour),
	}, opts...)
	w, err := Open(dir, all...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sampleRecord returns a record of the given kind with the members that kind uses.
func sampleRecord(kind Kind, n int) Record {
	r := Record{Kind: kind, Server: "example", SessionID: fmt.Sprintf("s%d", n%8)}
	switch kind {
	case KindSessionStart:
		r.ProtocolVersion, r.Transport = "2025-06-18", "stdio"
	case KindDecision:
		r.DecisionID, r.Method, r.Operation = fmt.Sprintf("d%d", n), "files/read", "read"
		r.Paths = []string{fmt.Sprintf("/work/file-%d.txt", n)}
		r.Allow = Bool(n%3 != 0)
		if !*r.Allow {
			r.Code, r.Reasons = "ACCESS_DENIED", []string{"outside the workspace"}
		}
		r.PolicyRevision, r.LatencyUs = "rev-1", 12
	case KindOutcome:
		r.DecisionID, r.Outcome, r.Bytes, r.DurationUs = fmt.Sprintf("d%d", n), "ok", 4096, 80
	case KindConsent, KindGrant:
		r.Paths, r.Detail = []string{"/work"}, "granted for the session"
	case KindPolicyReload:
		r.PolicyRevision = "rev-2"
	case KindPolicyReloadFailed:
		r.Detail, r.Code = "compile error in authz.rego:3", "POLICY_ERROR"
	case KindKeyRotation:
		r.Detail = "audit key rotated"
	case KindSessionEnd:
		r.Detail = "peer closed"
	case KindForward:
		r.DecisionID, r.Method, r.Tool = fmt.Sprintf("fwd-%d", n), "tools/call", "write_file"
		r.ArgsDigest, _ = ArgumentsDigest(make([]byte, KeySize), fmt.Appendf(nil, `{"n":%d}`, n))
	}
	return r
}

// appendConcurrently appends total records (decisions and outcomes) from n goroutines and
// returns every seq Append gave out.
func appendConcurrently(t testing.TB, w *Writer, total, n int) []uint64 {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seqs []uint64
		errs = make(chan error, n)
	)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < total; i += n {
				kind := KindDecision
				if i%2 == 1 {
					kind = KindOutcome
				}
				seq, err := w.Append(context.Background(), sampleRecord(kind, i))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seqs = append(seqs, seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return seqs
}

// segments lists the segment files of dir, sorted.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// readLines returns a segment's lines without their newlines (a partial last line included).
func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// writeLines replaces a segment with lines, each ended by a newline.
func writeLines(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// parsed decodes a line the writer wrote.
func parsed(t testing.TB, line []byte) Record {
	t.Helper()
	e := parseEntry(1, line)
	if !e.parsed {
		t.Fatalf("not a record: %s", line)
	}
	e.rec.Mac = e.mac
	return e.rec
}
