// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fsbroker/fsbroker/internal/atomicfile"
	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// segmentIDs returns the ids of the segments of dir, oldest first.
func segmentIDs(t testing.TB, dir string) []string {
	t.Helper()
	var ids []string
	for _, p := range segments(t, dir) {
		ids = append(ids, strings.TrimSuffix(filepath.Base(p), segmentExt))
	}
	return ids
}

// verifyOK verifies path and fails the test unless the trail is intact.
func verifyOK(t testing.TB, path string, keys VerifyKeys) Report {
	t.Helper()
	rep, err := Verify(path, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("Verify(%s): %s\nall: %v", filepath.Base(path), rep.Problem, rep.Problems)
	}
	return rep
}

// recordsOf returns the records of a segment file.
func recordsOf(t testing.TB, path string) []Record {
	t.Helper()
	var recs []Record
	for _, l := range readLines(t, path) {
		recs = append(recs, parsed(t, l))
	}
	return recs
}

// waitFor polls cond until it holds or 5 seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAgeRotation(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	const age = 150 * time.Millisecond
	w := keys.open(t, dir, WithMaxSegmentAge(age))
	defer w.Close()
	// A segment holding only its header is not rotated while idle...
	first := w.Segment()
	time.Sleep(age + 50*time.Millisecond)
	if w.Segment() != first {
		t.Fatal("a segment holding only its header was rotated while idle")
	}
	// ... but by the next append.
	seq, err := w.Append(t.Context(), sampleRecord(KindDecision, 1))
	if err != nil {
		t.Fatal(err)
	}
	second := w.Segment()
	if second == first || seq != 1 {
		t.Fatalf("an append to a segment older than %s went to seq %d of %s", age, seq, second)
	}
	// While idle, the background loop rotates a segment that holds records.
	waitFor(t, "an idle rotation", func() bool { return w.Segment() != second })
	if recs := recordsOf(t, second); len(recs) != 3 || recs[2].Kind != KindCheckpoint {
		t.Fatalf("the idly rotated segment holds %+v", recs)
	}
	third := w.Segment()
	time.Sleep(3 * age)
	if w.Segment() != third {
		t.Fatal("a segment holding only its header was rotated while idle")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := verifyOK(t, dir, keys.verifyKeys()); rep.Segments != 3 {
		t.Fatalf("%d segments, want 3", rep.Segments)
	}
}

func TestOpenRejectsBadRotationOptions(t *testing.T) {
	keys := newTestKeys(t)
	for name, opt := range map[string]Option{
		"zero age":           WithMaxSegmentAge(0),
		"negative age":       WithMaxSegmentAge(-time.Second),
		"negative retention": WithRetention(-time.Hour, 0),
		"negative bytes":     WithRetention(0, -1),
	} {
		if w, err := Open(t.TempDir(), WithKey(keys.mac), WithCheckpointKey(keys.priv), opt); err == nil {
			w.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// TestReopenAfterMove is the logrotate contract: the operator moves the segment away and sends
// SIGHUP; the writer closes it and goes on in a fresh file in the directory.
func TestReopenAfterMove(t *testing.T) {
	keys := newTestKeys(t)
	dir, archive := t.TempDir(), t.TempDir()
	w := keys.open(t, dir)
	for i := range 5 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	old := w.Segment()
	moved := filepath.Join(archive, filepath.Base(old))
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	// Records appended before the Reopen still go to the moved file.
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 5)); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	fresh := w.Segment()
	if fresh == old || filepath.Dir(fresh) != dir {
		t.Fatalf("after Reopen the writer writes to %s", fresh)
	}
	for i := range 5 {
		if _, err := w.Append(t.Context(), sampleRecord(KindOutcome, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := recordsOf(t, moved)
	if len(recs) != 8 || recs[6].Kind != KindDecision || recs[7].Kind != KindCheckpoint {
		t.Fatalf("the moved segment holds %d records, ending %+v", len(recs), recs[len(recs)-1])
	}
	h := recordsOf(t, fresh)[0]
	if h.PrevSegment != strings.TrimSuffix(filepath.Base(old), segmentExt) || h.Prev != recs[7].Mac {
		t.Fatalf("the fresh segment does not continue the chain: %+v", h)
	}
	// The directory alone misses the moved segment; the moved file (with its checkpoint, left in
	// the directory) verifies alone; both together verify as one chain.
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problem.Kind != ProblemRemoved || rep.Problem.File != fresh {
		t.Fatalf("without the moved segment: %+v", rep.Problem)
	}
	if err := os.Rename(old+checkpointExt, moved+checkpointExt); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, moved, keys.verifyKeys())
	together := copyDir(t, dir)
	for _, p := range []string{moved, moved + checkpointExt} {
		data, _ := os.ReadFile(p)
		os.WriteFile(filepath.Join(together, filepath.Base(p)), data, 0o644)
	}
	if rep := verifyOK(t, together, keys.verifyKeys()); rep.Segments != 2 || rep.Checkpoints != 2 {
		t.Fatalf("%+v", rep)
	}
	// No lock file is left behind by a closed writer.
	if locks, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt+lockExt)); len(locks) != 0 {
		t.Fatalf("lock files left: %v", locks)
	}
}

// rotateKeyFiles replaces the key files of a state directory with new keys and returns them.
func rotateKeyFiles(t testing.TB, state string, mac, checkpoint bool) testKeys {
	t.Helper()
	k := newTestKeys(t)
	if mac {
		if err := atomicfile.WriteFile(filepath.Join(state, DefaultKeyFile), k.mac, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if checkpoint {
		p := filepath.Join(state, DefaultCheckpointKeyFile)
		os.Remove(p)
		priv, err := LoadOrCreateCheckpointKey(p)
		if err != nil {
			t.Fatal(err)
		}
		k.priv = priv
	}
	return k
}

// stateKeys loads the keys of a state directory.
func stateKeys(t testing.TB, state string) testKeys {
	t.Helper()
	mac, err := LoadKey(filepath.Join(state, DefaultKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadCheckpointKey(filepath.Join(state, DefaultCheckpointKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{mac: mac, priv: priv}
}

func TestKeyRotationOnReopen(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	w, err := Open(dir, WithStateDir(state), WithCheckpointInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	old := stateKeys(t, state)
	oldPub := old.priv.Public().(ed25519.PublicKey)
	for i := range 3 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	// A Reopen with unchanged keys records no rotation.
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	first := w.Segment()
	digest := w.PathDigest("/work/a")

	nu := rotateKeyFiles(t, state, true, true)
	newPub := nu.priv.Public().(ed25519.PublicKey)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	second := w.Segment()
	recs := recordsOf(t, first)
	rot := recs[len(recs)-2]
	if rot.Kind != KindKeyRotation || rot.MACKeyID != MACKeyID(nu.mac) || rot.KeyID != KeyID(newPub) ||
		recs[len(recs)-1].Kind != KindCheckpoint {
		t.Fatalf("the old segment ends with %+v, %+v", rot, recs[len(recs)-1])
	}
	if h := recordsOf(t, second)[0]; h.MACKeyID != MACKeyID(nu.mac) || h.KeyID != KeyID(newPub) || h.Prev != recs[len(recs)-1].Mac {
		t.Fatalf("the new segment's header: %+v", h)
	}
	if w.KeyID() != KeyID(newPub) || w.PathDigest("/work/a") == digest || w.PathDigest("/work/a") != PathDigest(nu.mac, "/work/a") {
		t.Fatal("the writer does not use the new keys")
	}
	// The new checkpoint key is published; the old one is kept beside it.
	if pub, err := LoadPublicKey(filepath.Join(dir, PublicKeyFile)); err != nil || !pub.Equal(newPub) {
		t.Fatalf("checkpoint.pub: %v", err)
	}
	published, err := LoadPublishedKeys(dir)
	if err != nil || len(published) != 2 || !published[0].Equal(newPub) || !published[1].Equal(oldPub) {
		t.Fatalf("LoadPublishedKeys: %d keys, %v", len(published), err)
	}
	for i := range 3 {
		if _, err := w.Append(t.Context(), sampleRecord(KindOutcome, i)); err != nil {
			t.Fatal(err)
		}
	}
	// A key file that cannot be read leaves the keys as they are; the segment is reopened.
	os.Rename(filepath.Join(state, DefaultKeyFile), filepath.Join(state, "moved.key"))
	if err := w.Reopen(); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reopen without a key file: %v", err)
	}
	os.Rename(filepath.Join(state, "moved.key"), filepath.Join(state, DefaultKeyFile))
	if w.Segment() == second || w.PathDigest("/work/a") != PathDigest(nu.mac, "/work/a") {
		t.Fatal("a failed key reload changed the keys or kept the segment")
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 9)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	both := VerifyKeys{MAC: [][]byte{nu.mac, old.mac}, Checkpoint: published}
	if rep := verifyOK(t, dir, both); rep.Segments != 4 || rep.Checkpoints != 4 {
		t.Fatalf("%+v", rep)
	}
	t.Run("without the old key", func(t *testing.T) {
		// Both segments under the old key are unknown; the one the new key's chain continues
		// from says why.
		rep, _ := Verify(dir, VerifyKeys{MAC: [][]byte{nu.mac}, Checkpoint: published})
		i := slices.IndexFunc(rep.Problems, func(p Problem) bool { return p.File == first })
		if rep.OK || len(rep.Problems) != 2 || i < 0 || rep.Problems[i].Kind != ProblemUnknownKey ||
			!strings.Contains(rep.Problems[i].Hint, "before the rotation") {
			t.Fatalf("%+v", rep.Problems)
		}
		t.Log(rep.Problems[i])
	})
	t.Run("without the new key", func(t *testing.T) {
		rep, _ := Verify(dir, VerifyKeys{MAC: [][]byte{old.mac}, Checkpoint: published})
		p := rep.Problem
		if rep.OK || p.Kind != ProblemUnknownKey || p.File != second || !strings.Contains(p.Hint, "rotated to "+MACKeyID(nu.mac)) {
			t.Fatalf("%+v", p)
		}
		t.Log(p)
	})
	t.Run("without the old checkpoint key", func(t *testing.T) {
		rep, _ := Verify(dir, VerifyKeys{MAC: both.MAC, Checkpoint: []ed25519.PublicKey{newPub}})
		p := rep.Problem
		if rep.OK || p.Kind != ProblemUnknownKey || !strings.Contains(p.Hint, PublicKeyFile+"."+KeyID(oldPub)) {
			t.Fatalf("%+v", p)
		}
	})
	// A new process on the rotated keys opens the directory without complaint.
	w2, err := Open(dir, WithStateDir(state))
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

// TestKeyRotationOfOneKey rotates the audit key only, then the checkpoint key only.
func TestKeyRotationOfOneKey(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	w, err := Open(dir, WithStateDir(state), WithSync(SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	k0 := stateKeys(t, state)
	k1 := rotateKeyFiles(t, state, true, false)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), sampleRecord(KindGrant, 1)); err != nil {
		t.Fatal(err)
	}
	k2 := rotateKeyFiles(t, state, false, true)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir)
	if len(segs) != 3 {
		t.Fatalf("%d segments", len(segs))
	}
	if r := recordsOf(t, segs[0])[1]; r.Kind != KindKeyRotation || r.MACKeyID != MACKeyID(k1.mac) || r.KeyID != "" {
		t.Fatalf("%+v", r)
	}
	if r := recordsOf(t, segs[1])[2]; r.Kind != KindKeyRotation || r.MACKeyID != "" || r.KeyID != KeyID(k2.priv.Public().(ed25519.PublicKey)) {
		t.Fatalf("%+v", r)
	}
	published, err := LoadPublishedKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, VerifyKeys{MAC: [][]byte{k0.mac, k1.mac}, Checkpoint: published})
}

// TestKeyChangeWithoutRotationRecord forges a segment that follows another under a new key
// without a key_rotation record: Verify reports it even when both keys are given.
func TestKeyChangeWithoutRotationRecord(t *testing.T) {
	a, b := newTestKeys(t), newTestKeys(t)
	dir := t.TempDir()
	w := a.open(t, dir)
	if _, err := w.Append(t.Context(), sampleRecord(KindDecision, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := segments(t, dir)[0]
	recs := recordsOf(t, p)
	id := "29990101T000000.000000000Z-1-0000abcd"
	hdr := Record{V: Version, Time: formatTime(time.Now()), Kind: KindSegmentStart, Segment: id,
		PrevSegment: recs[0].Segment, KeyID: KeyID(b.priv.Public().(ed25519.PublicKey)), MACKeyID: MACKeyID(b.mac),
		Prev: recs[len(recs)-1].Mac}
	line, _ := encodeLine(&hdr, newMAC(b.mac))
	os.WriteFile(filepath.Join(dir, id+segmentExt), line, 0o644)
	keys := VerifyKeys{MAC: [][]byte{a.mac, b.mac}, Checkpoint: append(a.verifyKeys().Checkpoint, b.verifyKeys().Checkpoint...)}
	rep, err := Verify(dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problem.Kind != ProblemInserted || rep.Problem.Line != 1 || !strings.Contains(rep.Problem.Detail, "key_rotation") {
		t.Fatalf("%+v", rep.Problem)
	}
}

// ageAll sets the modification time of every segment of dir, and its sidecars, to d ago.
func ageAll(t testing.TB, dir string, ids []string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	for _, id := range ids {
		for _, ext := range []string{"", checkpointExt, prevNoteExt} {
			p := filepath.Join(dir, id+segmentExt+ext)
			if err := os.Chtimes(p, at, at); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
}

// dirBytes sums the sizes of the segments of dir and their sidecars.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range segs {
		n += s.size
	}
	return n
}

func TestRetentionByAge(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w := keys.open(t, dir, WithMaxSegmentBytes(2<<10), WithRetention(time.Hour, 0))
	defer w.Close()
	appendConcurrently(t, w, 120, 4)
	ids := segmentIDs(t, dir)
	if len(ids) < 6 {
		t.Fatalf("only %d segments", len(ids))
	}
	old := ids[:len(ids)/2]
	ageAll(t, dir, old, 2*time.Hour)
	if err := w.retain(); err != nil {
		t.Fatal(err)
	}
	left := segmentIDs(t, dir)
	if !slices.Equal(left, ids[len(ids)/2:]) {
		t.Fatalf("left %v, want the newer half of %v", left, ids)
	}
	// The retention record names what was deleted, with its last MAC.
	var named []string
	for _, r := range recordsOf(t, w.Segment()) {
		if r.Kind == KindRetention {
			for _, rs := range r.Removed {
				named = append(named, rs.Segment)
				if rs.LastMAC == "" || rs.LastSeq == 0 {
					t.Errorf("retention record entry %+v", rs)
				}
			}
		}
	}
	// A background pass (asked for by the last rotation) may have taken part of them.
	slices.Sort(named)
	if !slices.Equal(named, old) {
		t.Fatalf("the retention records name %v, want %v", named, old)
	}
	rep := verifyOK(t, dir, keys.verifyKeys())
	if rep.RetentionRemoved != 1 {
		t.Fatalf("RetentionRemoved = %d, want 1 (the chain's one missing link)", rep.RetentionRemoved)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, keys.verifyKeys())
	if w.Failures() != 0 {
		t.Fatalf("Failures() = %d", w.Failures())
	}
}

func TestRetentionByBytes(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	const limit = 16 << 10
	w := keys.open(t, dir, WithMaxSegmentBytes(2<<10), WithRetention(0, limit), WithCheckpointEvery(10))
	defer w.Close()
	appendConcurrently(t, w, 400, 8)
	if err := w.retain(); err != nil {
		t.Fatal(err)
	}
	// The pass counts what is there before it adds its notes and record (and perhaps a
	// checkpoint record): a few hundred bytes each.
	if n := dirBytes(t, dir); n > limit+2<<10 {
		t.Fatalf("%d bytes after a retention pass, limit %d", n, limit)
	}
	verifyOK(t, dir, keys.verifyKeys())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Passes ran in the background at every rotation: after the last, the current segment grew
	// by at most a segment and a final checkpoint.
	if n := dirBytes(t, dir); n > limit+4<<10 {
		t.Fatalf("%d bytes after Close, limit %d", n, limit)
	}
	rep := verifyOK(t, dir, keys.verifyKeys())
	if rep.Segments < 3 || rep.RetentionRemoved != 1 {
		t.Fatalf("%+v", rep)
	}
	if w.Failures() != 0 {
		t.Fatalf("Failures() = %d", w.Failures())
	}

	t.Run("a segment deleted without a retention record", func(t *testing.T) {
		for _, which := range []int{0, 1} { // the chain's first segment (its predecessor was retained), and one in the middle
			cp := copyDir(t, dir)
			segs := segments(t, cp)
			os.Remove(segs[which])
			os.Remove(segs[which] + checkpointExt)
			os.Remove(segs[which] + prevNoteExt)
			rep, err := Verify(cp, keys.verifyKeys())
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Problem.Kind != ProblemRemoved || rep.Problem.File != segs[which+1] {
				t.Fatalf("deleting segment %d: %+v", which, rep.Problem)
			}
		}
	})
}

// TestRetentionNotesOutliveRecords: the retention record naming a deleted segment is itself
// deleted by a later pass while the deleted segment's successor stays (it belongs to another
// writer); the note beside the successor still accounts for the cut, and is checked.
func TestRetentionNotesOutliveRecords(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	w1 := keys.open(t, dir, WithRetention(time.Hour, 0), WithSync(SyncNone))
	defer w1.Close()
	w2 := keys.open(t, dir, WithSync(SyncNone))
	defer w2.Close()
	var chain2 []string // w2's segments
	for i := range 3 {
		if _, err := w2.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
		chain2 = append(chain2, strings.TrimSuffix(filepath.Base(w2.Segment()), segmentExt))
		if err := w2.Reopen(); err != nil {
			t.Fatal(err)
		}
	}
	// w1 deletes w2's first segment: the record is in w1's current segment, c1.
	c1 := strings.TrimSuffix(filepath.Base(w1.Segment()), segmentExt)
	ageAll(t, dir, chain2[:1], 2*time.Hour)
	if err := w1.retain(); err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(dir, chain2[1]+segmentExt+prevNoteExt)
	if _, err := os.Stat(note); err != nil {
		t.Fatalf("no note beside the successor: %v", err)
	}
	// w1 moves on, and the next pass deletes c1 with its record.
	if err := w1.Reopen(); err != nil {
		t.Fatal(err)
	}
	ageAll(t, dir, []string{c1}, 2*time.Hour)
	if err := w1.retain(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(segmentIDs(t, dir), c1) || !slices.Contains(segmentIDs(t, dir), chain2[1]) {
		t.Fatalf("segments left: %v", segmentIDs(t, dir))
	}
	rep := verifyOK(t, dir, keys.verifyKeys())
	if rep.RetentionRemoved != 2 {
		t.Fatalf("RetentionRemoved = %d, want 2", rep.RetentionRemoved)
	}

	t.Run("note removed", func(t *testing.T) {
		cp := copyDir(t, dir)
		os.Remove(filepath.Join(cp, filepath.Base(note)))
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemRemoved || filepath.Base(rep.Problem.File) != chain2[1]+segmentExt {
			t.Fatalf("%+v", rep.Problem)
		}
	})
	t.Run("note edited", func(t *testing.T) {
		cp := copyDir(t, dir)
		p := filepath.Join(cp, filepath.Base(note))
		data, _ := os.ReadFile(p)
		var n prevNote
		json.Unmarshal(data, &n)
		n.LastSeq++
		data, _ = json.Marshal(n)
		os.WriteFile(p, data, 0o644)
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemRemoved || !strings.Contains(rep.Problem.Detail, "MAC") {
			t.Fatalf("%+v", rep.Problem)
		}
	})
	t.Run("note under a key not given", func(t *testing.T) {
		other := newTestKeys(t)
		cp := copyDir(t, dir)
		p := filepath.Join(cp, filepath.Base(note))
		data, _ := os.ReadFile(p)
		var n prevNote
		json.Unmarshal(data, &n)
		n.MACKeyID = MACKeyID(other.mac)
		n.MAC = n.sum(other.mac)
		data, _ = json.Marshal(n)
		os.WriteFile(p, data, 0o644)
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemRemoved || !strings.Contains(rep.Problem.Hint, MACKeyID(other.mac)) {
			t.Fatalf("%+v", rep.Problem)
		}
		// With that key, a valid note accounts for the cut.
		verifyOK(t, cp, VerifyKeys{MAC: [][]byte{keys.mac, other.mac}, Checkpoint: keys.verifyKeys().Checkpoint})
	})
	t.Run("segment cut before retention", func(t *testing.T) {
		cp := copyDir(t, dir)
		p := filepath.Join(cp, filepath.Base(note))
		data, _ := os.ReadFile(p)
		var n prevNote
		json.Unmarshal(data, &n)
		n.LastMAC = strings.Repeat("0", 64)
		n.MAC = n.sum(keys.mac)
		data, _ = json.Marshal(n)
		os.WriteFile(p, data, 0o644)
		rep, _ := Verify(cp, keys.verifyKeys())
		if rep.OK || rep.Problem.Kind != ProblemTruncated {
			t.Fatalf("%+v", rep.Problem)
		}
	})
}

// TestRetentionSparesLiveSegments runs two writers on one directory, as two broker processes
// would: the one with retention deletes every closed segment, of both, and never the other's
// live one.
func TestRetentionSparesLiveSegments(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	other := keys.open(t, dir) // older: its live segment sorts first
	defer other.Close()
	if _, err := other.Append(t.Context(), sampleRecord(KindSessionStart, 0)); err != nil {
		t.Fatal(err)
	}
	w := keys.open(t, dir, WithMaxSegmentBytes(1<<10), WithRetention(0, 1))
	defer w.Close()
	for i := range 60 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			if _, err := other.Append(t.Context(), sampleRecord(KindOutcome, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.retain(); err != nil {
		t.Fatal(err)
	}
	live := []string{other.Segment(), w.Segment()}
	slices.Sort(live)
	if got := segments(t, dir); !slices.Equal(got, live) {
		t.Fatalf("segments %v, want only the live ones %v", got, live)
	}
	// The other writer closes its segment: the next pass deletes it, and not the new one.
	first := other.Segment()
	if err := other.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := w.retain(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the other writer's closed segment is still there: %v", err)
	}
	if _, err := os.Stat(first + lockExt); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its lock file is still there: %v", err)
	}
	if _, err := other.Append(t.Context(), sampleRecord(KindSessionEnd, 1)); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, keys.verifyKeys())
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, keys.verifyKeys())
}

// writerRole is the child process of TestKilledWriter: with DIR, the audit key and the
// checkpoint key's seed (hex) as its arguments, it appends to DIR until killed, and says
// "ready" once it has appended some records.
func writerRole(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want DIR KEY SEED, got %q", args)
	}
	key, err1 := hex.DecodeString(args[1])
	seed, err2 := hex.DecodeString(args[2])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	w, err := Open(args[0], WithKey(key), WithCheckpointKey(ed25519.NewKeyFromSeed(seed)), WithCheckpointEvery(7))
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		r := sampleRecord(KindDecision, i)
		r.Detail = strings.Repeat("x", i%MaxDetail)
		if _, err := w.Append(context.Background(), r); err != nil {
			return err
		}
		if i == 200 {
			fmt.Println("ready")
		}
	}
}

// TestKilledWriter kills a real writer process with SIGKILL while it appends: its segment's
// intact prefix verifies (a torn last line is not tampering), and once the process is gone its
// segment is closed, so retention deletes it.
func TestKilledWriter(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	child := helperproc.Start(t, helperproc.Command("writer", dir, hex.EncodeToString(keys.mac), hex.EncodeToString(keys.priv.Seed())))
	child.Expect("ready")
	time.Sleep(20 * time.Millisecond)
	child.Kill()
	killed := segments(t, dir)
	if len(killed) != 1 {
		t.Fatalf("segments %v", killed)
	}
	rep, err := Verify(dir, keys.verifyKeys())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind.Tampering() {
			t.Fatalf("a killed writer's segment looks tampered with: %s", p)
		}
	}
	t.Logf("killed after %d records; %d problems", rep.Records, len(rep.Problems))
	// The worst kill: a line half written.
	cp := copyDir(t, dir)
	seg := segments(t, cp)[0]
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"seq":99999,"time":"2026-`)
	f.Close()
	rep, _ = Verify(cp, keys.verifyKeys())
	if rep.OK || rep.Problem.Kind != ProblemTorn || len(rep.Problems) != 1 {
		t.Fatalf("%+v", rep.Problems)
	}

	// The dead writer's lock is gone with it: retention deletes its segment.
	w := keys.open(t, dir, WithRetention(0, 1))
	if err := w.retain(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed writer's segment is still there: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, dir, keys.verifyKeys())
	if locks, _ := filepath.Glob(filepath.Join(dir, "*"+lockExt)); len(locks) != 1 || filepath.Base(locks[0]) != retentionLockFile {
		t.Fatalf("lock files left: %v", locks)
	}
}

// TestReopenWhileAppending appends from 8 goroutines while Reopen is called over and over, and
// the audit key is rotated once on the way; the chain verifies with both keys.
func TestReopenWhileAppending(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	w, err := Open(dir, WithStateDir(state), WithCheckpointEvery(25), WithRetention(0, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	old := stateKeys(t, state)
	var (
		stop    atomic.Bool
		reopens atomic.Int64
		wg      sync.WaitGroup
		nu      testKeys
	)
	wg.Go(func() {
		for !stop.Load() {
			if reopens.Load() == 20 {
				nu = rotateKeyFiles(t, state, true, false)
			}
			if err := w.Reopen(); err != nil {
				t.Error(err)
				return
			}
			reopens.Add(1)
			time.Sleep(time.Millisecond)
		}
	})
	appendConcurrently(t, w, 2000, 8)
	for reopens.Load() < 25 && !t.Failed() {
		time.Sleep(time.Millisecond) // wait for the rotation to happen
	}
	stop.Store(true)
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep := verifyOK(t, dir, VerifyKeys{MAC: [][]byte{old.mac, nu.mac}, Checkpoint: old.verifyKeys().Checkpoint})
	n := 0
	for _, s := range segments(t, dir) {
		for _, r := range recordsOf(t, s) {
			if r.Kind == KindDecision || r.Kind == KindOutcome {
				n++
			}
		}
	}
	if n != 2000 {
		t.Fatalf("%d caller records, want 2000", n)
	}
	t.Logf("%d reopens, %d segments, %d records", reopens.Load(), rep.Segments, rep.Records)
}

// TestWriterRecordsMatchSchema checks the records only the writer writes (retention, and a
// key_rotation naming keys) against schema/audit-record.json.
func TestWriterRecordsMatchSchema(t *testing.T) {
	sch := compileRecordSchema(t)
	state, dir := t.TempDir(), t.TempDir()
	validate := func(line []byte) error {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			return err
		}
		return sch.Validate(inst)
	}
	// find validates every line of dir and returns the last one of a kind (and a key) match.
	find := func(match func(Record) bool) []byte {
		var found []byte
		for _, seg := range segments(t, dir) {
			for _, line := range readLines(t, seg) {
				if err := validate(line); err != nil {
					t.Fatalf("%v\n%s", err, line)
				}
				if match(parsed(t, line)) {
					found = line
				}
			}
		}
		return found
	}
	w, err := Open(dir, WithStateDir(state), WithMaxSegmentBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := w.Append(t.Context(), sampleRecord(KindDecision, i)); err != nil {
			t.Fatal(err)
		}
	}
	rotateKeyFiles(t, state, true, true)
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rotation := find(func(r Record) bool { return r.Kind == KindKeyRotation && r.MACKeyID != "" && r.KeyID != "" })
	// A second writer's retention deletes the first one's closed segments when it opens.
	w2, err := Open(dir, WithStateDir(state), WithRetention(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	retention := find(func(r Record) bool { return r.Kind == KindRetention })
	if retention == nil || rotation == nil {
		t.Fatalf("retention %q, key rotation %q", retention, rotation)
	}
	// removed belongs to retention records only, and macKeyId to headers and key rotations.
	for _, bad := range [][]byte{
		bytes.Replace(retention, []byte(`"kind":"retention"`), []byte(`"kind":"grant"`), 1),
		bytes.Replace(rotation, []byte(`"kind":"key_rotation"`), []byte(`"kind":"grant"`), 1),
		bytes.Replace(retention, []byte(`"lastSeq"`), []byte(`"content":"x","lastSeq"`), 1),
	} {
		if validate(bad) == nil {
			t.Errorf("validated: %s", bad)
		}
	}
}

// TestPublishKeyRotation pins down checkpoint.pub across rotations by several writers.
func TestPublishKeyRotation(t *testing.T) {
	dir := t.TempDir()
	pub := func() ed25519.PublicKey {
		p, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	k1, k2, k3 := pub(), pub(), pub()
	if err := publishKey(dir, k1, nil); err != nil {
		t.Fatal(err)
	}
	if err := publishKey(dir, k2, nil); err == nil {
		t.Fatal("another key replaced checkpoint.pub without a rotation")
	}
	if err := publishKey(dir, k2, k1); err != nil {
		t.Fatal(err)
	}
	// A second writer rotating from k1 to k2 finds it done.
	if err := publishKey(dir, k2, k1); err != nil {
		t.Fatal(err)
	}
	// A writer still on k1 that is told to rotate to k3 replaces k2? No: k2 is not retired.
	if err := publishKey(dir, k3, k1); err == nil {
		t.Fatal("a rotation replaced a key that is neither retired nor the writer's")
	}
	if err := publishKey(dir, k3, k2); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadPublishedKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || !keys[0].Equal(k3) {
		t.Fatalf("%d keys", len(keys))
	}
	// A retired key file holding another key than its name says is an error.
	data, _ := os.ReadFile(retiredKeyPath(dir, k1))
	os.WriteFile(retiredKeyPath(dir, k2), data, 0o644)
	if _, err := LoadPublishedKeys(dir); err == nil {
		t.Fatal("a misnamed retired key was accepted")
	}
}
