// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// appendRecords appends records to the segment file at path (created if needed) as the writer
// encodes them, with the given times and seqs, under an all-zero key: the reader checks no MAC.
func appendRecords(t *testing.T, path string, recs ...Record) {
	t.Helper()
	h := newMAC(make([]byte, KeySize))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range recs {
		r.V, r.Mac = Version, ""
		line, _ := encodeLine(&r, h)
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
}

// at returns a record time s seconds after a fixed instant.
func at(s int) string {
	return formatTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Second))
}

// collect reads every entry of r, failing on any error.
func collect(t *testing.T, r *Reader) []Entry {
	t.Helper()
	var out []Entry
	for e, err := range r.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// readAll reads every matching entry at path.
func readAll(t *testing.T, path string, f Filter) []Entry {
	t.Helper()
	r, err := NewReader(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, r)
}

// TestReadMergesWritersInTimeOrder reads a real trail: two writers in one directory, each
// rotating through several segments, appending in turn.
func TestReadMergesWritersInTimeOrder(t *testing.T) {
	dir := t.TempDir()
	keys := newTestKeys(t)
	w1 := keys.open(t, dir, WithMaxSegmentBytes(2048), WithCheckpointEvery(7))
	w2 := keys.open(t, dir, WithMaxSegmentBytes(2048), WithCheckpointEvery(5))
	const n = 60
	for i := range n {
		w, server := w1, "one"
		if i%2 == 1 {
			w, server = w2, "two"
		}
		rec := sampleRecord(KindDecision, i)
		rec.Server = server
		if _, err := w.Append(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []*Writer{w1, w2} {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if segs := segments(t, dir); len(segs) < 6 {
		t.Fatalf("%d segments, want several per writer", len(segs))
	}

	got := readAll(t, dir, Filter{})
	if len(got) != n {
		t.Fatalf("read %d records, want the %d appended (headers and checkpoints left out)", len(got), n)
	}
	writers := map[string]string{} // server -> writer id
	for i, e := range got {
		if i > 0 && e.Record.Time < got[i-1].Record.Time {
			t.Errorf("record %d (%s) comes after a later one (%s)", i, e.Record.Time, got[i-1].Record.Time)
		}
		if want := fmt.Sprintf("d%d", i); e.Record.DecisionID != want {
			t.Errorf("record %d is %s, want %s (append order)", i, e.Record.DecisionID, want)
		}
		if e.Record.Kind != KindDecision {
			t.Errorf("record %d has kind %s", i, e.Record.Kind)
		}
		if w, ok := writers[e.Record.Server]; ok && w != e.Writer {
			t.Errorf("server %s's records have writer %s and %s", e.Record.Server, w, e.Writer)
		}
		writers[e.Record.Server] = e.Writer
		if e.Segment != strings.TrimSuffix(filepath.Base(e.File), segmentExt) || e.Line < 2 {
			t.Errorf("record %d: segment %s, file %s, line %d", i, e.Segment, e.File, e.Line)
		}
		if p := parsed(t, e.Raw); p.Mac != e.Record.Mac || p.DecisionID != e.Record.DecisionID {
			t.Errorf("record %d: Raw does not hold the record", i)
		}
	}
	if len(writers) != 2 || writers["one"] == writers["two"] {
		t.Errorf("writer ids %v: want one per writer", writers)
	}

	ck := readAll(t, dir, Filter{Kind: KindCheckpoint})
	if len(ck) == 0 {
		t.Error("Kind checkpoint yields no checkpoint records")
	}
	hdr := readAll(t, dir, Filter{Kind: KindSegmentStart})
	if len(hdr) != len(segments(t, dir)) {
		t.Errorf("%d headers, want one per segment", len(hdr))
	}

	// A single segment file reads on its own.
	one := readAll(t, got[0].File, Filter{})
	if len(one) == 0 || one[0].Record.DecisionID != "d0" {
		t.Errorf("reading the first segment alone gives %d records", len(one))
	}
	// The checkpoint public key and checkpoint files are not read as segments.
	if _, err := os.Stat(filepath.Join(dir, PublicKeyFile)); err != nil {
		t.Fatal(err)
	}
}

func TestReadTiesByFileThenLine(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	appendRecords(t, b,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "b"},
		Record{Seq: 1, Kind: KindSessionStart, Time: at(1), Detail: "b1"},
		Record{Seq: 2, Kind: KindSessionStart, Time: at(1), Detail: "b2"},
	)
	appendRecords(t, a,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "a"},
		Record{Seq: 1, Kind: KindSessionStart, Time: at(1), Detail: "a1"},
		Record{Seq: 2, Kind: KindSessionStart, Time: at(2), Detail: "a2"},
	)
	var got []string
	for _, e := range readAll(t, dir, Filter{}) {
		got = append(got, e.Record.Detail)
	}
	if want := []string{"a1", "b1", "b2", "a2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestReadSkipsTornTailAndReportsBadLines(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "s.jsonl")
	appendRecords(t, seg,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "s"},
		Record{Seq: 1, Kind: KindSessionStart, Time: at(1)},
	)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("this is not a record\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendRecords(t, seg, Record{Seq: 3, Kind: KindSessionEnd, Time: at(3)})
	full := readLines(t, seg)
	last := string(full[len(full)-1])
	// A torn write: the first half of a record, no newline.
	f, err = os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(last[:len(last)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r, err := NewReader(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	var errs []error
	for e, err := range r.Entries(context.Background()) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kinds = append(kinds, e.Record.Kind)
	}
	if want := []Kind{KindSessionStart, KindSessionEnd}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	var re *ReadError
	if len(errs) != 1 || !errors.As(errs[0], &re) || !errors.Is(errs[0], ErrNotRecord) || re.Line != 3 || re.File != seg {
		t.Fatalf("errors %v: want one ReadError for line 3 of %s", errs, seg)
	}

	// The torn line is left for the next read: completed, it is read then.
	f, err = os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(last[len(last)/2:] + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	again := collect(t, r)
	if len(again) != 1 || again[0].Record.Kind != KindSessionEnd || again[0].Line != 5 {
		t.Fatalf("after completing the torn line: %d entries, want its record (line 5)", len(again))
	}
}

func TestReadIsIncremental(t *testing.T) {
	dir := t.TempDir()
	keys := newTestKeys(t)
	w1 := keys.open(t, dir, WithMaxSegmentBytes(1024))
	w2 := keys.open(t, dir, WithMaxSegmentBytes(1024))
	defer w1.Close()
	defer w2.Close()
	appendN := func(from, to int) {
		for i := from; i < to; i++ {
			w := w1
			if i%2 == 1 {
				w = w2
			}
			if _, err := w.Append(context.Background(), sampleRecord(KindDecision, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Record.DecisionID)
		}
		return out
	}
	seq := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("d%d", i))
		}
		return out
	}

	r, err := NewReader(dir, Filter{Kind: KindDecision})
	if err != nil {
		t.Fatal(err)
	}
	appendN(0, 10)
	if got := ids(collect(t, r)); !slices.Equal(got, seq(0, 10)) {
		t.Fatalf("first read %v", got)
	}
	if got := collect(t, r); len(got) != 0 {
		t.Fatalf("nothing was appended, but a second read gives %v", ids(got))
	}
	before := len(segments(t, dir))
	appendN(10, 40) // rotates into new segments
	if len(segments(t, dir)) == before {
		t.Fatal("no rotation happened")
	}
	// Stopping early leaves the rest, the records read ahead from other segments included.
	var first []string
	for e, err := range r.Entries(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, e.Record.DecisionID)
		if len(first) == 5 {
			break
		}
	}
	rest := ids(collect(t, r))
	if got := append(first, rest...); !slices.Equal(got, seq(10, 40)) {
		t.Fatalf("reads after appending: %v then %v, want %v", first, rest, seq(10, 40))
	}
}

func TestFilter(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "s.jsonl")
	allow, deny := Bool(true), Bool(false)
	digest := PathDigest(make([]byte, KeySize), "/secret/plan.txt")
	appendRecords(t, seg,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "s"},
		Record{Seq: 1, Time: at(10), Kind: KindSessionStart, Server: "alpha", SessionID: "s1"},
		Record{Seq: 2, Time: at(20), Kind: KindDecision, Server: "alpha", SessionID: "s1", DecisionID: "d1",
			Method: "files/read", Paths: []string{"/a/b"}, Allow: allow},
		Record{Seq: 3, Time: at(21), Kind: KindOutcome, Server: "alpha", SessionID: "s1", DecisionID: "d1", Outcome: "ok"},
		Record{Seq: 4, Time: at(30), Kind: KindDecision, Server: "beta", SessionID: "s2", DecisionID: "d2",
			Method: "files/write", Paths: []string{"/a/bc"}, Allow: deny, Code: "PERMISSION_DENIED", Reasons: []string{"no"}},
		Record{Seq: 5, Time: at(40), Kind: KindDecision, Server: "beta", SessionID: "s2", DecisionID: "d3",
			Method: "files/rename", Paths: []string{"/x/y", "/a/b/c/d"}, Allow: allow},
		Record{Seq: 6, Time: at(41), Kind: KindOutcome, Server: "beta", SessionID: "s2", DecisionID: "d3",
			Outcome: "CONCURRENCY_CONFLICT", Code: "CONCURRENCY_CONFLICT"},
		Record{Seq: 7, Time: at(50), Kind: KindDecision, Server: "gamma", SessionID: "s3", DecisionID: "d4",
			Method: "files/read", Paths: []string{digest}, Allow: allow},
		Record{Seq: 8, Time: at(60), Kind: KindCheckpoint},
	)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		f    Filter
		want []uint64 // seqs
	}{
		{"everything but header and checkpoint", Filter{}, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{"server", Filter{Server: "beta"}, []uint64{4, 5, 6}},
		{"method", Filter{Method: "files/read"}, []uint64{2, 7}},
		{"kind", Filter{Kind: KindOutcome}, []uint64{3, 6}},
		{"checkpoint kind", Filter{Kind: KindCheckpoint}, []uint64{8}},
		{"allow", Filter{Decision: "allow"}, []uint64{2, 5, 7}},
		{"deny", Filter{Decision: "deny"}, []uint64{4}},
		{"decision code", Filter{Code: "PERMISSION_DENIED"}, []uint64{4}},
		{"outcome code", Filter{Code: "ok"}, []uint64{3}},
		{"code on both", Filter{Code: "CONCURRENCY_CONFLICT"}, []uint64{6}},
		{"path prefix at a segment boundary", Filter{PathPrefix: "/a/b"}, []uint64{2, 5}},
		{"path prefix with a trailing slash", Filter{PathPrefix: "/a/b/"}, []uint64{2, 5}},
		{"path prefix deeper", Filter{PathPrefix: "/a/b/c"}, []uint64{5}},
		{"path prefix root", Filter{PathPrefix: "/"}, []uint64{2, 4, 5}},
		{"path prefix that only prefixes text", Filter{PathPrefix: "/a/b/c/d/e"}, nil},
		{"path digest", Filter{PathDigest: digest}, []uint64{7}},
		{"since inclusive", Filter{Since: base.Add(30 * time.Second)}, []uint64{4, 5, 6, 7}},
		{"until exclusive", Filter{Until: base.Add(30 * time.Second)}, []uint64{1, 2, 3}},
		{"since and until", Filter{Since: base.Add(21 * time.Second), Until: base.Add(41 * time.Second)}, []uint64{3, 4, 5}},
		{"since in another zone", Filter{Since: base.Add(40 * time.Second).In(time.FixedZone("X", 3600))}, []uint64{5, 6, 7}},
		{"session", Filter{SessionID: "s1"}, []uint64{1, 2, 3}},
		{"decision id", Filter{DecisionID: "d3"}, []uint64{5, 6}},
		{"combined", Filter{Server: "beta", Decision: "allow", PathPrefix: "/x"}, []uint64{5}},
		{"combined that excludes", Filter{Server: "alpha", Decision: "deny"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []uint64
			for rec, err := range Records(context.Background(), dir, c.f) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rec.Seq)
				if !c.f.Match(&rec) {
					t.Errorf("Match rejects seq %d that the reader yielded", rec.Seq)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("seqs %v, want %v", got, c.want)
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	now := time.Now()
	for name, f := range map[string]Filter{
		"kind":     {Kind: "decisions"},
		"decision": {Decision: "denied"},
		"digest":   {PathDigest: "sha256:abc"},
		"range":    {Since: now, Until: now.Add(-time.Hour)},
	} {
		if err := f.Validate(); err == nil {
			t.Errorf("%s: Validate accepts %+v", name, f)
		}
		if _, err := NewReader(t.TempDir(), f); err == nil {
			t.Errorf("%s: NewReader accepts %+v", name, f)
		}
	}
	if _, err := NewReader(filepath.Join(t.TempDir(), "missing"), Filter{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing trail: %v, want ErrNotExist", err)
	}
}

// TestReadStopsWhenContextEnds: an ended context stops reading with its error, and what was
// not yielded is read by the next call.
func TestReadStopsWhenContextEnds(t *testing.T) {
	dir := t.TempDir()
	seg := filepath.Join(dir, "s.jsonl")
	appendRecords(t, seg,
		Record{Kind: KindSegmentStart, Time: at(0), Segment: "s"},
		Record{Seq: 1, Kind: KindSessionStart, Time: at(1)},
		Record{Seq: 2, Kind: KindSessionEnd, Time: at(2)},
	)
	r, err := NewReader(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []Kind
	var errs []error
	for e, err := range r.Entries(ctx) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, e.Record.Kind)
		cancel()
	}
	if !slices.Equal(got, []Kind{KindSessionStart}) || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("after cancel: records %v, errors %v; want one record, then context.Canceled", got, errs)
	}
	if rest := collect(t, r); len(rest) != 1 || rest[0].Record.Kind != KindSessionEnd {
		t.Errorf("the next read gives %d entries, want the session_end not yielded before", len(rest))
	}
}
