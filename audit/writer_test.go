// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestKeyFiles(t *testing.T) {
	state := t.TempDir()
	logDir := filepath.Join(t.TempDir(), "log")
	w, err := Open(logDir, WithStateDir(state), WithSync(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindSessionStart, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DefaultKeyFile, DefaultCheckpointKeyFile} {
		fi, err := os.Stat(filepath.Join(state, name))
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", name, fi.Mode().Perm())
		}
	}
	key, err := LoadKey(filepath.Join(state, DefaultKeyFile))
	if err != nil || len(key) != KeySize {
		t.Fatalf("key %d bytes, %v", len(key), err)
	}
	again, err := LoadOrCreateKey(filepath.Join(state, DefaultKeyFile))
	if err != nil || !bytes.Equal(again, key) {
		t.Fatal("LoadOrCreateKey did not load the existing key")
	}
	priv, err := LoadCheckpointKey(filepath.Join(state, DefaultCheckpointKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(filepath.Join(logDir, PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) || KeyID(pub) != w.KeyID() {
		t.Fatal("checkpoint.pub is not the checkpoint key's public key")
	}
	// The keys from the files verify the trail.
	rep, err := Verify(logDir, VerifyKeys{MAC: [][]byte{key}, Checkpoint: []ed25519.PublicKey{pub}})
	if err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep.Problem)
	}
	// A second writer (another broker process) on the same state and log directories shares them.
	w2, err := Open(logDir, WithStateDir(state), WithSync(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

func TestKeyFileWithBroadModeIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	state := t.TempDir()
	keys := newTestKeys(t)
	keyFile := filepath.Join(state, "audit.key")
	if err := os.WriteFile(keyFile, keys.mac, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(keyFile, 0o644) // whatever the umask
	if _, err := LoadKey(keyFile); !errors.Is(err, ErrKeyPermissions) {
		t.Fatalf("LoadKey of a 0644 file: %v", err)
	}
	if _, err := LoadOrCreateKey(keyFile); !errors.Is(err, ErrKeyPermissions) {
		t.Fatalf("LoadOrCreateKey of a 0644 file: %v", err)
	}
	if _, err := Open(t.TempDir(), WithKeyFile(keyFile), WithCheckpointKey(keys.priv)); !errors.Is(err, ErrKeyPermissions) {
		t.Fatalf("Open with a 0644 key file: %v", err)
	}
	// The same for the checkpoint key.
	ckFile := filepath.Join(state, "ck.key")
	if _, err := LoadOrCreateCheckpointKey(ckFile); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ckFile, 0o640)
	if _, err := Open(t.TempDir(), WithKey(keys.mac), WithCheckpointKeyFile(ckFile)); !errors.Is(err, ErrKeyPermissions) {
		t.Fatalf("Open with a 0640 checkpoint key file: %v", err)
	}
	// Once tightened, it is accepted.
	os.Chmod(keyFile, 0o600)
	if _, err := LoadKey(keyFile); err != nil {
		t.Fatal(err)
	}
	// A short key file is refused too.
	os.WriteFile(keyFile, keys.mac[:16], 0o600)
	if _, err := LoadKey(keyFile); err == nil {
		t.Fatal("a 16-byte key file was accepted")
	}
}

func TestOpenNeedsKeys(t *testing.T) {
	keys := newTestKeys(t)
	for name, opts := range map[string][]Option{
		"no keys":           nil,
		"no checkpoint key": {WithKey(keys.mac)},
		"short key":         {WithKey(keys.mac[:8]), WithCheckpointKey(keys.priv)},
		"bad sync mode":     {WithKey(keys.mac), WithCheckpointKey(keys.priv), WithSync(SyncMode(7))},
		"zero segment":      {WithKey(keys.mac), WithCheckpointKey(keys.priv), WithMaxSegmentBytes(0)},
	} {
		if w, err := Open(t.TempDir(), opts...); err == nil {
			w.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
	// A log directory publishing another checkpoint key is refused.
	dir := t.TempDir()
	keys.open(t, dir).Close()
	other := newTestKeys(t)
	if _, err := Open(dir, WithKey(other.mac), WithCheckpointKey(other.priv)); err == nil {
		t.Fatal("Open over another checkpoint.pub succeeded")
	}
}

func TestSyncModes(t *testing.T) {
	for _, mode := range []SyncMode{SyncBatch, SyncAlways, SyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			if m, err := ParseSyncMode(mode.String()); err != nil || m != mode {
				t.Fatalf("ParseSyncMode(%q) = %v, %v", mode, m, err)
			}
			keys := newTestKeys(t)
			w := keys.open(t, t.TempDir(), WithSync(mode), WithCheckpointEvery(30))
			appendConcurrently(t, w, 200, 8)
			// The records are in the file when Append returns, before any Close.
			lines := readLines(t, w.Segment())
			if len(lines) < 201 {
				t.Fatalf("%d lines after 200 appends", len(lines))
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if rep, err := Verify(w.Dir(), keys.verifyKeys()); err != nil || !rep.OK {
				t.Fatalf("%v %+v", err, rep.Problem)
			}
		})
	}
	if _, err := ParseSyncMode("sometimes"); err == nil {
		t.Fatal("ParseSyncMode accepted an unknown mode")
	}
}

func TestAppendRejects(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir())
	for _, r := range []Record{
		{Kind: KindCheckpoint},
		{Kind: KindSegmentStart},
		{Kind: "exfiltrate"},
		{Kind: KindOutcome, Outcome: "ok", Detail: strings.Repeat("x", MaxDetail+1)},
		{Kind: KindOutcome, Outcome: "ok", Bytes: -1},
		{Kind: KindOutcome},
		{Kind: KindDecision, DecisionID: "d1"},
		{Kind: KindDecision, Allow: Bool(false)},
	} {
		if _, err := w.Append(t.Context(), r); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("Append(%s): %v", r.Kind, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := w.Append(ctx, sampleRecord(KindDecision, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a cancelled context: %v", err)
	}
	// Writer-only members set by a caller are dropped.
	seq, err := w.Append(t.Context(), Record{Kind: KindGrant, Segment: "x", MACKeyID: "y", Paths: []string{"/w"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := parsed(t, readLines(t, w.Segment())[seq]); r.Segment != "" || r.MACKeyID != "" {
		t.Fatalf("writer-only members kept: %+v", r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if w.Failures() != 0 {
		t.Fatalf("refused records counted as failures: %d", w.Failures())
	}
	if rep, err := Verify(w.Dir(), keys.verifyKeys()); err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep.Problem)
	}
}

// TestUnwritableDirectory makes the segment directory unwritable: the next rotation cannot
// create a segment, so Append fails closed until the directory is writable again.
func TestUnwritableDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory modes (TestRemovedDirectory covers a real failure as root)")
	}
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithMaxSegmentBytes(1)) // every append starts a segment
	defer w.Close()
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	for i := range 2 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("append %d to an unwritable directory: %v", i, err)
		}
	}
	if w.Failures() != 2 {
		t.Fatalf("Failures() = %d, want 2", w.Failures())
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 2)); err != nil {
		t.Fatalf("append after the directory is writable again: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir, keys.verifyKeys()); err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep.Problem)
	}
}

// TestRemovedDirectory removes the segment directory under a running writer (a failure root
// cannot override): appends fail closed, and once the directory is back the chain continues in
// a new segment whose missing predecessor Verify reports.
func TestRemovedDirectory(t *testing.T) {
	keys := newTestKeys(t)
	dir := filepath.Join(t.TempDir(), "log")
	w := keys.open(t, dir, WithMaxSegmentBytes(1))
	defer w.Close()
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("append %d without a directory: %v", i, err)
		}
	}
	if w.Failures() != 3 {
		t.Fatalf("Failures() = %d, want 3", w.Failures())
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 2)); err != nil {
		t.Fatalf("append once the directory is back: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problem.Kind != ProblemRemoved || rep.Problem.Line != 1 {
		t.Fatalf("the lost segment is not reported: %+v", rep.Problem)
	}
	// Its successor itself verifies.
	if rep, err := Verify(segments(t, dir)[0], keys.verifyKeys()); err != nil || !rep.OK {
		t.Fatalf("%v %+v", err, rep.Problem)
	}
}

// compileRecordSchema compiles schema/audit-record.json with no loader.
func compileRecordSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(RecordSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(nil)
	c.DefaultDraft(jsonschema.Draft2020)
	const id = "https://fsbroker.dev/schema/audit-record.json"
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func TestRecordsMatchSchema(t *testing.T) {
	sch := compileRecordSchema(t)
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithMaxSegmentBytes(4<<10), WithCheckpointEvery(7))
	for i := range 120 {
		if _, err := w.Append(t.Context(), sampleRecord(callerKinds[i%len(callerKinds)], i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]bool{}
	n := 0
	for _, seg := range segments(t, dir) {
		for i, line := range readLines(t, seg) {
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s line %d: %v\n%s", filepath.Base(seg), i+1, err, line)
			}
			kinds[parsed(t, line).Kind] = true
			n++
		}
	}
	if len(kinds) != len(callerKinds)+2 {
		t.Fatalf("only kinds %v were written", kinds)
	}
	// The schema is closed: an extra member, say file content, is invalid.
	bad := bytes.Replace(readLines(t, segments(t, dir)[0])[1], []byte(`{"v":1,`), []byte(`{"v":1,"content":"secret",`), 1)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	if sch.Validate(inst) == nil {
		t.Fatal("a record with an unknown member validated")
	}
	t.Logf("%d records in %d segments validated", n, len(segments(t, dir)))
}

// TestSchemaNamesEveryMember keeps Record and the schema in step.
func TestSchemaNamesEveryMember(t *testing.T) {
	var doc struct {
		Properties map[string]any `json:"properties"`
	}
	if err := jsonUnmarshal(RecordSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if _, ok := doc.Properties[name]; !ok {
			t.Errorf("Record.%s (%s) is not in the schema", rt.Field(i).Name, name)
		}
		delete(doc.Properties, name)
	}
	for name := range doc.Properties {
		t.Errorf("schema property %s is not in Record", name)
	}
}

// jsonUnmarshal is encoding/json's Unmarshal.
func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// TestWriteFailureRecovers makes a write fail for real (the segment's descriptor is closed under
// the writer): that append fails closed, and the next one continues the chain in a fresh
// segment that verifies together with the old one.
func TestWriteFailureRecovers(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithSync(SyncAlways))
	defer w.Close()
	for i := range 5 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	first := w.Segment()
	w.mu.Lock()
	w.f.Close()
	w.mu.Unlock()
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 5)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append to a closed descriptor: %v", err)
	}
	if w.Failures() != 1 {
		t.Fatalf("Failures() = %d", w.Failures())
	}
	seq, err := w.Append(t.Context(), sampleRecord(KindDecision, 6))
	if err != nil {
		t.Fatalf("the append after a failure: %v", err)
	}
	if seq != 1 || w.Segment() == first {
		t.Fatalf("the append after a failure is seq %d in %s", seq, w.Segment())
	}
	h := parsed(t, readLines(t, w.Segment())[0])
	old := readLines(t, first)
	if h.PrevSegment != strings.TrimSuffix(filepath.Base(first), segmentExt) || h.Prev != parsed(t, old[len(old)-1]).Mac {
		t.Fatalf("the new segment does not continue the chain: %+v", h)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir, keys.verifyKeys()); err != nil || !rep.OK || rep.Segments != 2 {
		t.Fatalf("%v %+v", err, rep)
	}
}

func TestVerifyEdgeSegments(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir)
	seg := w.Segment()
	// A segment holding only its header (a writer that never got a record) verifies.
	if rep, err := Verify(seg, keys.verifyKeys()); err != nil || !rep.OK || rep.Records != 1 {
		t.Fatalf("%v %+v", err, rep)
	}
	w.Close()
	// An empty segment is a writer killed before its header: torn, not tampering.
	empty := filepath.Join(dir, "20000101T000000.000000000Z-1-00000000.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problem.Kind != ProblemTorn || rep.Problem.File != empty || len(rep.Problems) != 1 {
		t.Fatalf("%+v", rep)
	}
	// A sign of tampering in a later file comes before an earlier torn one.
	lines := readLines(t, seg)
	writeLines(t, seg, lines[:1])
	rep, _ = Verify(dir, keys.verifyKeys())
	if rep.Problem.Kind != ProblemTruncated || rep.Problem.File != seg || len(rep.Problems) != 2 {
		t.Fatalf("%+v", rep)
	}
}

// TestAppendRefusesOverlongRecords: a record whose line would be longer than Verify reads is
// refused (it would pass for an edit), and the writer goes on.
func TestAppendRefusesOverlongRecords(t *testing.T) {
	keys := newTestKeys(t)
	w := keys.open(t, t.TempDir())
	defer w.Close()
	rec := sampleRecord(KindDecision, 1)
	rec.Paths = []string{strings.Repeat("p", maxLine)}
	if _, err := w.Append(context.Background(), rec); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append of a %d-byte path = %v, want ErrInvalidRecord", maxLine, err)
	}
	if w.Failures() != 0 {
		t.Errorf("an invalid record counted as a failure")
	}
	if _, err := w.Append(context.Background(), sampleRecord(KindDecision, 2)); err != nil {
		t.Fatalf("the next Append: %v", err)
	}
}
